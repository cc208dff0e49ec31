"""An identifier the model made up is sent back once, with where the real one comes from.

A small model fills an id, a path or a rate with a value that comes from nowhere rather than
looking it up first (it closes item ``1`` before listing the items). Each value passes its
schema, and a destructive call with one cannot be taken back.

:class:`ArgumentGrounding` keeps the text the run has been given as facts -- the system
prompt, the user's requests, the tools' results and errors, the arguments of calls that
succeeded -- and finds a call's *identifier-like* argument whose value appears in none of it:

- a string of one token that holds a digit, a ``/`` or an ``@`` (``INV-0317``, ``K-7``,
  ``/docs/roadmap.txt``, ``ilse@fleet.example``): words ("Lyon", "USD") cannot be judged;
- a whole number in a field named as an id (``task_id``, ``case_number``, ``index``);
- a number with a fractional part (``1.42``), in any field.

Nothing is judged before a request is known (without the user's words, every id looks made
up). Such a value is refused only where the correction can say where the real one comes from: a
same-shaped value the run has seen, shown in a corrected call, or a pending required step. Each
value is refused **once per turn**, and at most :data:`MAX_GUESS_REFUSALS` a turn: a model that
sends it again may know better (a value it worked out).
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

import msgspec

from forge_rt.core import ToolCall
from forge_rt.guardrails._coverage import shape
from forge_rt.guardrails._placeholders import normalise

__all__ = ["CORPUS_CHARS", "MAX_GUESS_REFUSALS", "ArgumentGrounding", "Guess", "shape_of"]

# The most characters of facts kept (the oldest go first): a chat daemon's weeks of results
# must not grow without bound, and an id is looked up soon after it is given.
CORPUS_CHARS = 200_000
# The most guessed values one turn refuses.
MAX_GUESS_REFUSALS = 3
# The most same-shaped values a correction names.
_CANDIDATES = 3

_ID_FIELD = re.compile(r"(?:^|_)(?:id|ids|no|num|number|index|idx)$|[a-z](?:Id|ID|Number)$")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # loose: "Q3", "#23", "21C" all give their number
_TOKEN = re.compile(r"[^\s'\"`,;()\[\]{}<>]+")
_EDGE = ".:!?"


class Guess(msgspec.Struct, frozen=True, kw_only=True):
    """One argument of a call whose value the run has never seen; ``candidates``: values of the
    same shape it has seen, this turn's request first, then the latest facts."""

    field: str
    value: str | int | float
    candidates: tuple[str, ...] = ()


class ArgumentGrounding:
    """The facts the run was given, and which guessed values this turn has refused."""

    def __init__(self, limit: int = CORPUS_CHARS) -> None:
        self._limit = limit
        self._facts: collections.deque[str] = collections.deque()
        self._chars = 0
        self._folded: str | None = None  # the facts, lowercased and joined; rebuilt on change
        self._normalised: str | None = None  # the facts as normalise() folds them
        self._numbers: set[float] | None = None
        self._request = ""
        self._refused: set[tuple[str, str, str]] = set()  # (tool, field, value) this turn

    def learn(self, text: str) -> None:
        """Remember ``text`` as given to the model as fact (a prompt, a request, a result)."""
        if not text.strip():
            return
        self._facts.append(text)
        self._chars += len(text)
        while self._chars > self._limit and len(self._facts) > 1:
            self._chars -= len(self._facts.popleft())
        self._folded = None
        self._normalised = None
        self._numbers = None

    def learn_args(self, args: Mapping[str, Any]) -> None:
        """Remember the arguments of a call that succeeded: its values were good ones."""
        self.learn(json.dumps(args, ensure_ascii=False, default=str))

    def new_turn(self, request: str) -> None:
        """A new user turn: its request is a fact, and each value may be refused once again."""
        self._request = request
        self.learn(request)
        self._refused.clear()

    def check(
        self, call: ToolCall, properties: Mapping[str, Any], *, source: str | None
    ) -> Guess | None:
        """The first argument of ``call`` (in ``properties``' order) to refuse as a guess, or
        ``None``. ``source`` names the pending step the value should come from, if any: without
        it, only a value with a same-shaped candidate is refused. Refusing is spent here."""
        if not self._request.strip() or len(self._refused) >= MAX_GUESS_REFUSALS:
            return None
        for field in properties:
            value = call.args.get(field)
            if not _checkable(value, field) or self._seen(value, properties[field]):
                continue
            key = (call.tool, field, json.dumps(value))
            if key in self._refused:
                continue
            candidates = self.candidates(value) if isinstance(value, str) else ()
            if source is None and not candidates:
                continue
            self._refused.add(key)
            return Guess(field=field, value=value, candidates=candidates)
        return None

    def unfounded(self, field: str, value: object, schema: Any) -> bool:
        """Whether ``value`` of ``field`` is identifier-like and neither a fact nor one its
        ``schema`` lists: a value the model made up (never refused here; see :meth:`check`)."""
        return _checkable(value, field) and not self._seen(value, schema)

    def holds(self, folded: str) -> bool:
        """Whether ``folded`` (a value as :func:`~forge_rt.guardrails._placeholders.normalise`
        folds it) is in the facts: a relayed result is no echo of a correction."""
        if not folded:
            return False
        if self._normalised is None:
            self._normalised = "\n".join(normalise(f) for f in self._facts)
        return folded in self._normalised

    @property
    def request_known(self) -> bool:
        """Whether a user's request has been given (without one, every value looks made up)."""
        return bool(self._request.strip())

    def seen(self, value: str | int | float) -> bool:
        """Whether ``value`` is among the facts: a string anywhere in them (case folded), a
        number as any number they hold, whatever its sign (a hyphen in the facts is as often a
        date's or a range's as a minus)."""
        if isinstance(value, str):
            return value.strip().lower() in self._text()
        return abs(float(value)) in self._numeric()

    def _seen(self, value: str | int | float, schema: Any) -> bool:
        """Whether ``value`` is among the facts, or one its schema lists."""
        if isinstance(schema, Mapping):
            listed = [
                *schema.get("enum", ()),
                *(() if "const" not in schema else (schema["const"],)),
            ]
            if value in listed or ("default" in schema and schema["default"] == value):
                return True
        return self.seen(value)

    def _text(self) -> str:
        if self._folded is None:
            self._folded = "\n".join(self._facts).lower()
        return self._folded

    def _numeric(self) -> set[float]:
        if self._numbers is None:
            self._numbers = {float(m.group()) for m in _NUMBER.finditer(self._text())}
        return self._numbers

    def candidates(self, value: str) -> tuple[str, ...]:
        """Values of ``value``'s shape the run has seen: the request's first, then the latest
        (none before a request is known). Also what a placeholder (``/path/to/your/file``)
        was to be: a model told only to use the path the task gives sends it again."""
        if not self._request.strip():
            return ()
        shape = shape_of(value)
        if "a" not in shape and shape not in ("/", "@"):
            return ()  # a bare number's shape is every number's: no candidate says which
        found: dict[str, None] = {}
        for text in (self._request, *reversed(self._facts)):
            for match in _TOKEN.finditer(text):
                token = match.group().strip(_EDGE)
                if token and token != value and shape_of(token) == shape:
                    found.setdefault(token)
            if len(found) >= _CANDIDATES:
                break
        return tuple(found)[:_CANDIDATES]


def _checkable(value: object, field: str) -> TypeGuard[str | int | float]:
    """Whether ``value`` is identifier-like enough that not having seen it means a guess."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float) and not value.is_integer():
        return True
    if isinstance(value, int | float):
        return _ID_FIELD.search(field) is not None
    if not isinstance(value, str):
        return False
    text = value.strip()
    if not 2 <= len(text) <= 200 or any(c.isspace() for c in text):
        return False
    return any(c.isdigit() or c in "/@\\" for c in text)


def shape_of(token: str) -> str:
    """What kind of identifier ``token`` is: a path or an address by kind, anything else by
    its pattern of letters, digits and separators (``INV-0317`` and ``K-7`` are alike,
    ``2027-04-15`` and ``19:00`` are not; the list-coverage :func:`shape`, case folded)."""
    if "@" in token:
        return "@"
    if "/" in token or "\\" in token:
        return "/"
    return shape(token.lower())
