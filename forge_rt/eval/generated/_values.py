"""Seeded makers of the values a generated case is made of: ids, dates, emails, amounts, names.

Real tools hand models values of many shapes, and a model that copies ``ORD-0042`` faithfully
may still mangle a UUID or a decimal. Every maker takes the case's ``random.Random`` so a case
is the same whenever its seed is. Id makers come in *families* of distinct shapes: the ids one
tool result holds side by side are drawn from different families, so no two of them look like
items of one list (the list-coverage guardrail reads same-shaped tokens as siblings).
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = [
    "FACT_KINDS",
    "ID_FAMILIES",
    "ID_FORMATS",
    "ID_PATTERNS",
    "PREFIX_CODE",
    "IdMaker",
    "fact_value",
    "iso_date",
    "long_date",
    "person_name",
]

IdMaker = Callable[[random.Random], str]

_CONSONANTS = "bcdfghjkmnpqrstvwxz"
_HEX = "0123456789abcdef"
_UPPER = "ABCDEFGHJKLMNPRSTUVWXY"

_FIRST = (
    "Odile", "Tomasz", "Ines", "Kwame", "Mirela", "Soren", "Yuki", "Dagny", "Rafael", "Nnamdi",
    "Leonie", "Ivo", "Aurelia", "Bastian", "Zofia", "Emeka", "Hollis", "Marisol", "Teodor",
    "Ingrid",
)  # fmt: skip
_LAST = (
    "Varga", "Okafor", "Lindqvist", "Moreau", "Castellanos", "Huang", "Abernathy", "Petrov",
    "Nakashima", "Delacroix", "Brennan", "Oyelaran", "Fitzwilliam", "Sandoval", "Kowalczyk",
    "Aguilar", "Thorsen", "Mbeki", "Quintero", "Halloran",
)  # fmt: skip
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_MAIL_HOSTS = ("example.org", "mail.example", "corp.example.net", "post.example.com")


def _prefix_code(rng: random.Random) -> str:
    """``QF-0417``: two capitals, a dash, four digits."""
    return f"{rng.choice(_UPPER)}{rng.choice(_UPPER)}-{rng.randrange(10, 9999):04d}"


def _short_key(rng: random.Random) -> str:
    """``k7f3q``: five characters, letters and digits alternating."""
    return "".join(
        rng.choice(_CONSONANTS) if i % 2 == 0 else str(rng.randrange(2, 10)) for i in range(5)
    )


def _uuid_like(rng: random.Random) -> str:
    """``3f2a9c1e-77b4-4d0e``: hex groups, as a database hands out."""
    groups = (8, 4, 4)
    text = "-".join("".join(rng.choice(_HEX) for _ in range(n)) for n in groups)
    # A group of digits only would change the shape from case to case; keep one letter in each.
    return "-".join(g if any(c.isalpha() for c in g) else "a" + g[1:] for g in text.split("-"))


def _underscored(rng: random.Random) -> str:
    """``lot_58213``: a lowercase word, an underscore and five digits."""
    word = rng.choice(("unit", "lot", "ref", "rec", "node", "slot"))
    return f"{word}_{rng.randrange(10000, 99999)}"


def _numeric(rng: random.Random) -> str:
    """``#60418``: a number with a hash, as ticketing systems print it."""
    return f"#{rng.randrange(10000, 99999)}"


ID_FAMILIES: tuple[IdMaker, ...] = (_prefix_code, _short_key, _uuid_like, _underscored, _numeric)
"""Id makers whose values never share a shape with another family's."""

ID_PATTERNS: dict[IdMaker, str] = {
    _prefix_code: r"^[A-Z]{2}-[0-9]{4}$",
    _short_key: r"^[a-z0-9]{5}$",
    _uuid_like: r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}$",
    _underscored: r"^[a-z]+_[0-9]{5}$",
    _numeric: r"^#[0-9]{5}$",
}
"""The JSON-schema ``pattern`` every value of a family matches."""

ID_FORMATS: dict[IdMaker, str] = {
    _prefix_code: "two capital letters, a hyphen and four digits",
    _short_key: "five lower-case letters and digits",
    _uuid_like: "three groups of hex digits (8, 4 and 4 long) joined by hyphens",
    _underscored: "a lower-case word, an underscore and five digits",
    _numeric: "a hash sign followed by five digits",
}
"""A family's format in words, for the errors that state it."""

PREFIX_CODE: IdMaker = _prefix_code
"""The family of ``QF-0417`` codes (recovery cases rely on their upper case)."""


def person_name(rng: random.Random) -> str:
    """A full name with a space in it (``Zofia Thorsen``)."""
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def iso_date(rng: random.Random) -> str:
    """A date as tools want it, ``2026-03-14``."""
    return f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"


def long_date(iso: str) -> str:
    """``2026-03-14`` as a person writes it: ``14 March 2026``."""
    year, month, day = iso.split("-")
    return f"{int(day)} {_MONTHS[int(month) - 1]} {year}"


def _email(rng: random.Random) -> str:
    first, last = person_name(rng).lower().split()
    return f"{first}.{last}@{rng.choice(_MAIL_HOSTS)}"


def _decimal(rng: random.Random) -> str:
    return f"{rng.randrange(100, 99999) / 100:.2f}"


def _count(rng: random.Random) -> str:
    return str(rng.randrange(3, 950))


def _clock(rng: random.Random) -> str:
    return f"{rng.randrange(6, 22):02d}:{rng.choice((0, 15, 30, 45)):02d}"


def _phone(rng: random.Random) -> str:
    return f"+44 20 {rng.randrange(1000, 9999)} {rng.randrange(1000, 9999)}"


def _percent(rng: random.Random) -> str:
    return f"{rng.randrange(5, 99)}.{rng.randrange(0, 10)}%"


FACT_KINDS: dict[str, IdMaker] = {
    "name": person_name,
    "date": iso_date,
    "email": _email,
    "decimal": _decimal,
    "count": _count,
    "clock": _clock,
    "phone": _phone,
    "percent": _percent,
}
"""The kinds of fact a lookup returns, by the name the domain vocabulary uses."""


def fact_value(kind: str, rng: random.Random) -> str:
    """A fact of ``kind`` (a key of :data:`FACT_KINDS`); a typo names the kinds there are."""
    try:
        maker = FACT_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown fact kind {kind!r}; choose from {sorted(FACT_KINDS)}") from None
    return maker(rng)
