"""Excluding a blocked call from a constraint: the tool stays callable, that call does not.

A call the loop guard blocked ends the run if sent once more. Narrowing leaves the blocked tool
out of the next constraint where something else is callable, but while it is the only pending
required step it must stay, and an unchanged constraint lets a small model write the blocked
call again. :func:`argument_variants` rewrites a tool's (bounded, inlined) parameter schema into
the alternatives whose instances all differ from every blocked call in at least one argument:

- a property's value differs: an ``enum`` or ``boolean`` without the blocked values, a
  ``const`` that is not one of them, a string or an integer that is none of them;
- an optional property the blocked calls all had is left out;
- an optional property they did not all have is present, with a value none of them gave it.

A blocked string may also be given by its start (:class:`StartsWith`). A property whose values
cannot be excluded (a number, an object, a list, a union) offers no variant of its own; a tool
none of whose arguments can differ offers none, and the caller leaves it out (see
:class:`~forge_rt.guardrails.NarrowedConstraint`).

An excluded value is an :class:`Excluded` leaf inside the variant; it renders as a JSON schema
(:meth:`Excluded.json_schema`: ``enum``/``const``, ``anyOf`` integer ranges, a string
``pattern``) for backends that take one, and as GBNF (:meth:`Excluded.gbnf`) for the grammar
forge_rt writes itself. Only keywords llama.cpp's ``json-schema-to-grammar`` and llguidance
both convert are used (no ``not``): a string pattern is anchored, uses character classes,
groups, ``|``, ``?`` and ``{m,n}`` only, and writes every character but letters and digits as a
``\\x``/``\\u``/``\\U`` escape, which regexes and GBNF read alike. Its characters are the ones a
JSON string holds unescaped (no quote, backslash or control character), so what llama.cpp
matches raw and what llguidance matches decoded is the same text. Two limits keep it small:
a string is told apart from a blocked one by its first :data:`EXCLUDED_PREFIX_CHARS`
characters (a longer blocked value also excludes the strings that share that prefix), and
integers are the canonical JSON ones of up to 16 digits (the grammars' own bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

__all__ = ["EXCLUDED_PREFIX_CHARS", "Excluded", "StartsWith", "argument_variants", "render_json"]

EXCLUDED_PREFIX_CHARS = 40
"""How many leading characters of a blocked string the exclusion compares: each is one nested
group of the pattern, and Rust's regex parser (llguidance) refuses nesting deeper than 250. A
longer blocked value is excluded with every string sharing its first forty characters."""

_INTEGER_DIGITS = 16  # the grammars' bound on an integer's digits (see _bounds.INTEGER_TOKENS)

# The characters a JSON string holds unescaped: not a quote, a backslash or a control character.
_UNSAFE = frozenset({'"', "\\", *(chr(c) for c in range(0x20))})
_DIGITS = "0123456789"


class StartsWith(msgspec.Struct, frozen=True):
    """A blocked string argument given by how it starts, in a blocked call's arguments where a
    value would stand: every string beginning with ``text`` is excluded (``StartsWith("<")``)."""

    text: str


class Excluded(msgspec.Struct, frozen=True):
    """A property schema (``schema``) with some of its values (``values``) excluded; built only
    by :func:`argument_variants`, for a schema it knows how to exclude from."""

    schema: dict[str, Any]
    values: tuple[Any, ...]

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the values of ``schema`` that are none of ``values``."""
        schema, values = self.schema, self.values
        if "enum" in schema:
            return {**schema, "enum": [v for v in schema["enum"] if not _among(v, values)]}
        if _kind(schema) == "boolean":
            rest = {k: v for k, v in schema.items() if k != "type"}
            return {**rest, "enum": [b for b in (False, True) if not _among(b, values)]}
        if _kind(schema) == "integer":
            ranges = [_int_range(schema, lo, hi) for lo, hi in _int_gaps(values)]
            return {"anyOf": [r for r in ranges if _nonempty(r)]}
        return {**schema, "pattern": "^" + _render(self._strings(), sep="") + "$"}

    def gbnf(self) -> str:
        """A GBNF expression for the JSON texts of those values (quotes included)."""
        schema, values = self.schema, self.values
        if "enum" in schema or _kind(schema) == "boolean":
            kept = self.json_schema()["enum"]
            return "(" + " | ".join(_gbnf_literal(v) for v in kept) + ")"
        if _kind(schema) == "integer":
            return _render(_integer_tree(values), sep=" ")
        return '"\\"" ' + _render(self._strings(), sep=" ") + ' "\\""'

    def _strings(self) -> _Node:
        low, high = _lengths(self.schema)
        tree = _string_tree(self.values, low, high)
        if tree is None:  # argument_variants builds no Excluded that leaves nothing
            raise ValueError(f"no string of {self.schema} is left once {self.values} are excluded")
        return tree


def render_json(schema: Any) -> Any:
    """``schema`` with every :class:`Excluded` leaf replaced by its JSON schema."""
    if isinstance(schema, Excluded):
        return schema.json_schema()
    if isinstance(schema, Mapping):
        return {k: render_json(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [render_json(v) for v in schema]
    return schema


def argument_variants(
    schema: Mapping[str, Any], blocked: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Object schemas whose instances are the instances of ``schema`` (inlined and bounded)
    that differ from every argument object in ``blocked`` in at least one argument (empty: none
    can); each is ``schema`` with one property changed (see the module docstring)."""
    props = schema.get("properties")
    if not blocked:
        return [dict(schema)]
    if not isinstance(props, Mapping):
        return []
    required = list(schema.get("required", []))
    closed = schema.get("additionalProperties") is False
    variants: list[dict[str, Any]] = []
    for name, sub in props.items():
        given = tuple(args[name] for args in blocked if name in args)
        excluded = _exclusion(sub, given)
        if excluded is not None:
            variants.append(
                {
                    **schema,
                    "properties": {**props, name: excluded},
                    "required": _with(required, name),
                }
            )
        if name not in required and closed and len(given) == len(blocked):
            variants.append(
                {
                    **schema,
                    "properties": {k: v for k, v in props.items() if k != name},
                    "required": required,
                }
            )
    return variants


def _with(required: list[str], name: str) -> list[str]:
    return required if name in required else [*required, name]


def _exclusion(schema: Any, values: tuple[Any, ...]) -> Any:
    """``schema`` without ``values``: itself (nothing to exclude), an :class:`Excluded`, or
    ``None`` when nothing is left or the exclusion cannot be expressed."""
    if not values:
        return schema
    if not isinstance(schema, Mapping):
        return None
    schema = dict(schema)
    if "const" in schema:
        return None if _among(schema["const"], values) else schema
    if "enum" in schema:
        return _enum_exclusion(schema, values)
    if any(k in schema for k in ("anyOf", "oneOf", "allOf")):
        return None  # a union's values are not excluded (see the module docstring)
    return _typed_exclusion(schema, values)


def _enum_exclusion(schema: dict[str, Any], values: tuple[Any, ...]) -> Any:
    """An ``enum`` without ``values``: unchanged when it has none of them, ``None`` when
    they are all it has (or it is no list)."""
    enum = schema["enum"]
    if not isinstance(enum, list):
        return None
    kept = [v for v in enum if not _among(v, values)]
    if not kept:
        return None
    return schema if len(kept) == len(enum) else Excluded(schema, values)


def _typed_exclusion(schema: dict[str, Any], values: tuple[Any, ...]) -> Any:
    """A boolean, integer or plain string schema without ``values``; ``None`` for any other
    type, and for a string with a ``pattern`` or ``format`` of its own."""
    kind = _kind(schema)
    if kind == "boolean":
        left = [b for b in (False, True) if not _among(b, values)]
        return Excluded(schema, values) if left else None
    if kind == "integer":
        ints = tuple(v for v in values if type(v) is int)
        return Excluded(schema, ints) if ints else schema
    if kind == "string" and "pattern" not in schema and "format" not in schema:
        return _string_exclusion(schema, values)
    return None


def _string_exclusion(schema: dict[str, Any], values: tuple[Any, ...]) -> Any:
    """A string schema without the blocked strings (and starts) among ``values``; ``None``
    when its lengths leave no other string."""
    low, high = _lengths(schema)
    strings = tuple(v for v in values if isinstance(v, str | StartsWith))
    if _string_tree(strings, low, high) is None:
        return None
    return Excluded(schema, strings)


def _among(value: Any, values: tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``values`` as JSON compares them (``True`` is not ``1``), or a
    string with the start a :class:`StartsWith` among them gives."""
    return any(
        (type(value) is type(v) and value == v)
        or (isinstance(v, StartsWith) and isinstance(value, str) and value.startswith(v.text))
        for v in values
    )


def _kind(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    return kind if isinstance(kind, str) else None


def _lengths(schema: Mapping[str, Any]) -> tuple[int, int]:
    low = schema.get("minLength", 0)
    high = schema["maxLength"]  # bounded() gave every constrained string one
    return int(low), int(high)


def _strings(values: tuple[Any, ...]) -> tuple[list[str], list[str]]:
    """The blocked strings a safe-character string could equal, cut to the compared prefix,
    and the blocked starts (:class:`StartsWith`), likewise."""
    whole: list[str] = []
    starts: list[str] = []
    for value in values:
        text = value.text if isinstance(value, StartsWith) else value
        if isinstance(text, str) and not _UNSAFE.intersection(text):
            (starts if isinstance(value, StartsWith) else whole).append(
                text[:EXCLUDED_PREFIX_CHARS]
            )
    return whole, starts


# --- integers ------------------------------------------------------------------------------


def _int_gaps(values: tuple[Any, ...]) -> list[tuple[int | None, int | None]]:
    """The ranges of integers between the excluded ``values`` (``None``: unbounded)."""
    gaps: list[tuple[int | None, int | None]] = []
    low: int | None = None
    for v in sorted(set(values)):
        if low is None or low <= v - 1:
            gaps.append((low, v - 1))
        low = v + 1
    gaps.append((low, None))
    return gaps


def _int_range(schema: Mapping[str, Any], low: int | None, high: int | None) -> dict[str, Any]:
    out = {**schema, "type": "integer"}
    if low is not None:
        own = out.get("minimum")
        out["minimum"] = low if not isinstance(own, int | float) else max(own, low)
    if high is not None:
        own = out.get("maximum")
        out["maximum"] = high if not isinstance(own, int | float) else min(own, high)
    return out


def _nonempty(schema: Mapping[str, Any]) -> bool:
    low, high = schema.get("minimum"), schema.get("maximum")
    return low is None or high is None or low <= high


def _integer_tree(values: tuple[Any, ...]) -> _Node:
    """The canonical JSON integers of up to 16 digits that are none of ``values``."""
    positive = [str(v) for v in values if v > 0]
    negative = [str(-v) for v in values if v < 0]
    options: list[_Node] = []
    if 0 not in values:
        options.append(_Chars(frozenset("0")))
    for texts, sign in ((positive, ""), (negative, "-")):
        tree = _Trie(texts).absent(low=1, high=_INTEGER_DIGITS, alphabet=_digit_alphabet)
        if tree is not None:
            options.append(tree if not sign else _Seq((_Chars(frozenset(sign)), tree)))
    return _Alt(tuple(options))


def _digit_alphabet(depth: int) -> _Alphabet:
    return _Alphabet(frozenset(_DIGITS[1:] if depth == 0 else _DIGITS), negated=False)


# --- strings -------------------------------------------------------------------------------


def _string_tree(values: tuple[Any, ...], low: int, high: int) -> _Node | None:
    """The safe-character strings of ``low`` to ``high`` characters that do not start with
    ``EXCLUDED_PREFIX_CHARS`` characters of a blocked value or with a blocked start, and are
    none of the shorter blocked values."""
    whole, starts = _strings(values)
    return _Trie(whole, starts=starts).absent(low=low, high=high, alphabet=_safe_alphabet)


def _safe_alphabet(depth: int) -> _Alphabet:
    return _Alphabet(_UNSAFE, negated=True)


# --- a small regular-expression tree, rendered as a regex or as GBNF ------------------------


class _Alphabet(msgspec.Struct, frozen=True):
    """A set of characters: ``chars``, or every character but ``chars`` when ``negated``."""

    chars: frozenset[str]
    negated: bool

    def without(self, chars: frozenset[str]) -> _Chars | None:
        if self.negated:
            return _Chars(self.chars | chars, negated=True)
        kept = self.chars - chars
        return _Chars(kept) if kept else None

    def all(self) -> _Chars:
        return _Chars(self.chars, negated=self.negated)


class _Chars(msgspec.Struct, frozen=True):
    chars: frozenset[str]
    negated: bool = False


class _Seq(msgspec.Struct, frozen=True):
    parts: tuple[_Node, ...]


class _Alt(msgspec.Struct, frozen=True):
    options: tuple[_Node, ...]


class _Opt(msgspec.Struct, frozen=True):
    node: _Node


class _Rep(msgspec.Struct, frozen=True):
    node: _Chars
    low: int
    high: int


_Node = _Chars | _Seq | _Alt | _Opt | _Rep


class _Trie:
    """The excluded texts as a prefix tree; :meth:`absent` is the language without them."""

    def __init__(
        self,
        texts: Sequence[str],
        *,
        starts: Sequence[str] = (),
        cut: int = EXCLUDED_PREFIX_CHARS,
    ) -> None:
        self.children: dict[str, _Trie] = {}
        self.end = False  # an excluded text ends here
        self.dead = False  # an excluded prefix ends here: nothing may follow
        for text, start in [*((t, False) for t in texts), *((t, True) for t in starts)]:
            node = self
            for c in text:
                node = node.children.setdefault(c, _Trie(()))
            if start or len(text) >= cut:
                node.dead = True
            node.end = True

    def absent(self, *, low: int, high: int, alphabet: Any, depth: int = 0) -> _Node | None:
        """The texts of ``low`` to ``high`` characters of ``alphabet`` (per position) that
        continue this node into no excluded text; ``None`` when there are none."""
        if self.dead:
            return None
        options: list[_Node] = []
        if depth < high:
            for c in sorted(self.children):
                rest = self.children[c].absent(
                    low=low, high=high, alphabet=alphabet, depth=depth + 1
                )
                if rest is not None:
                    head = _Chars(frozenset(c))
                    options.append(head if rest == _EMPTY else _Seq((head, rest)))
            other = alphabet(depth).without(frozenset(self.children))
            if other is not None:
                tail_low, tail_high = max(low - depth - 1, 0), high - depth - 1
                if tail_high == 0:
                    options.append(other)
                else:
                    options.append(
                        _Seq((other, _Rep(alphabet(depth + 1).all(), tail_low, tail_high)))
                    )
        may_end = not self.end and depth >= low
        if not options:
            return _EMPTY if may_end else None
        body = options[0] if len(options) == 1 else _Alt(tuple(options))
        return _Opt(body) if may_end else body


_EMPTY = _Seq(())


def _escape(c: str) -> str:
    """One character as regexes and GBNF both read it inside a class."""
    if c.isascii() and c.isalnum():
        return c
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02X}"
    if code < 0x10000:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _class(node: _Chars) -> str:
    """``node`` as a ``[...]`` class, runs of four or more characters written as ranges."""
    codes = sorted(ord(c) for c in node.chars)
    parts: list[str] = []
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        if j - i >= 3:
            parts.append(f"{_escape(chr(codes[i]))}-{_escape(chr(codes[j]))}")
        else:
            parts += [_escape(chr(c)) for c in codes[i : j + 1]]
        i = j + 1
    return f"[{'^' if node.negated else ''}{''.join(parts)}]"


def _render(node: _Node, *, sep: str) -> str:
    """``node`` as a regex (``sep=""``) or a GBNF expression (``sep=" "``)."""
    if isinstance(node, _Chars):
        return _class(node)
    if isinstance(node, _Rep):
        return f"{_class(node.node)}{{{node.low},{node.high}}}"
    if isinstance(node, _Opt):
        # An empty alternative, not ``?``: llama.cpp refuses a repeated group whose inside
        # expands into 2,000 rules or more, which nested string tails soon reach.
        return f"({_render(node.node, sep=sep)}|)"
    if isinstance(node, _Alt):
        return "(" + "|".join(_render(o, sep=sep) for o in node.options) + ")"
    return sep.join(_render(p, sep=sep) for p in node.parts)


def _gbnf_literal(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
