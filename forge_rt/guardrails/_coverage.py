"""An answer given before a listed fan-out is done is sent back once.

Small models stop a fan-out after its first item (asked about "Turku or Lima", they look up
Turku and answer). The answer passes every schema and every grounding check (it relays a real
result), and the run ends wrong.

:class:`ListCoverage` keeps the turn's *sources* -- the user's message and the successful tool
results -- and every call made in the turn. When the reply is a terminal call alone, it looks
for a call whose argument value is one item of an enumeration in a source ("Turku or Lima",
"K-7, K-8") and whose sibling items were never sent to that tool in that argument. The first
time in a turn it refuses the terminal call with the sibling's call, built from the model's own
arguments, to copy; the next answer is taken as it is (the model may know better). Only
siblings with the same *shape* as the value count (see :func:`shape`), so the words an
enumeration is embedded in are never taken for items.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec

from forge_rt.core import ToolCall

__all__ = ["REQUEST", "ListCoverage", "Uncovered", "enumerations", "shape"]

REQUEST = "your request"  # the source name of the user's message

# An enumeration: items of one to three words, separated by commas, semicolons, "and" or "or"
# (the Oxford comma too). An item is words of letters, digits and the marks ids are made of.
# A word of an item is never the separator word itself: "Rivers and Paper" is two items' edges.
_WORD = r"(?!(?:and|or)(?![\w.\-/@+#']))[\w][\w.\-/@+#']*"
_ITEM = rf"{_WORD}(?: {_WORD}){{0,2}}"
_SEPARATOR = r"(?:\s*[,;]\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+)"
_ENUMERATION = re.compile(rf"{_ITEM}(?:{_SEPARATOR}{_ITEM})+", re.IGNORECASE)
_SPLIT = re.compile(_SEPARATOR, re.IGNORECASE)


def enumerations(text: str) -> list[list[str]]:
    """The enumerations in ``text``, each as its items in order (``"Turku or Lima"`` ->
    ``["Turku", "Lima"]``); a list of one item is none. An item may carry words of the
    sentence around it: :func:`shape` keeps them from counting."""
    found = []
    for match in _ENUMERATION.finditer(text):
        items = [i.strip(" .'") for i in _SPLIT.split(match.group())]
        items = [i for i in items if i]
        if len(items) > 1:
            found.append(items)
    return found


def shape(value: str) -> str:
    """What kind of token ``value`` looks like: each run of capitals ``A``, of small letters
    ``a``, of digits ``9``, and every other character itself (``A-12`` -> ``A-9``)."""
    out: list[str] = []
    for char in value:
        kind = "A" if char.isupper() else "a" if char.isalpha() else "9" if char.isdigit() else char
        if not out or out[-1] != kind or kind not in "Aa9":
            out.append(kind)
    return "".join(out)


class Uncovered(msgspec.Struct, frozen=True, kw_only=True):
    """A listed item no call of the turn covered: ``call`` is the call to make for it (the
    covered sibling's call with the item in its place)."""

    call: ToolCall
    item: str
    covered: str
    source: str  # REQUEST or the tool whose result listed it


class ListCoverage:
    """This turn's sources and calls, and whether this turn's one refusal is spent."""

    def __init__(self) -> None:
        self._request = ""  # the user's message, lowered
        self._lists: list[tuple[str, list[str]]] = []  # (where from, an enumeration's items)
        self._sent: set[tuple[str, str, str]] = set()  # (tool, argument, value) tried
        self._calls: list[ToolCall] = []  # the calls that succeeded, in order
        self._refused = False

    def reset(self, request: str | None = None) -> None:
        """A new turn, with the user's ``request`` (``None``: not known) as its first source."""
        self._request = (request or "").lower()
        self._lists = []
        if request:
            self.add_source(REQUEST, request)
        self._sent = set()
        self._calls = []
        self._refused = False

    def add_source(self, where: str, text: str) -> None:
        """A source of this turn (the request, a successful tool result): the lists it names
        are to be covered; read once, here."""
        self._lists += [(where, items) for items in enumerations(text)]

    def add_call(self, call: ToolCall, *, ok: bool) -> None:
        """A call of this turn ran (``ok``: it succeeded); every value it sent is covered."""
        for name, value in call.args.items():
            if _scalar(value):
                self._sent.add((call.tool, name, _text(value)))
        if ok:
            self._calls.append(call)

    def calls_of(self, tool: str) -> tuple[ToolCall, ...]:
        """The calls of ``tool`` that succeeded this turn, in order."""
        return tuple(c for c in self._calls if c.tool == tool)

    def check(self) -> Uncovered | None:
        """The first listed item no call covered, the first time in a turn (the refusal is
        then spent), else ``None``."""
        if self._refused:
            return None
        found = self.peek()
        if found is not None:
            self._refused = True
        return found

    def peek(self) -> Uncovered | None:
        """The first listed item no call covered, whether or not the refusal is spent: the
        next step to point at after a repeat or a loop."""
        return next(self._uncovered(), None)

    def _uncovered(self) -> Iterator[Uncovered]:
        for call in self._calls:
            for name, value in call.args.items():
                if not _scalar(value):
                    continue
                sent = _text(value)
                # A value the user named outside a list is a pick from a listing, no fan-out.
                picked = re.search(rf"(?<!\w){re.escape(sent)}(?!\w)", self._request) is not None
                for where, items in self._lists:
                    if where == call.tool or (picked and where != REQUEST):
                        continue  # a tool's own listing of what it was asked is no request
                    for item in _siblings(sent, items):
                        if (call.tool, name, item.lower()) in self._sent:
                            continue
                        yield Uncovered(
                            call=ToolCall(tool=call.tool, args=_with(call.args, name, value, item)),
                            item=item,
                            covered=str(value),
                            source=where,
                        )


def _siblings(sent: str, items: list[str]) -> list[str]:
    """The items of ``items`` beside ``sent`` (if it is one of them) with its shape. An item at
    either end of an enumeration may carry words of its sentence ("Buy eggs" in "Buy eggs,
    butter and flour"), so an item is the run of as many words as ``sent`` has that touches a
    separator: the first item's last words, the last item's first, a middle item whole."""
    width = len(sent.split())
    edges = [_edge(item, width, i, len(items)) for i, item in enumerate(items)]
    lowered = [e.lower() if e is not None else None for e in edges]
    if sent not in lowered:
        return []
    mine = lowered.index(sent)
    kind = shape(edges[mine] or "")
    return [
        edge
        for i, edge in enumerate(edges)
        if i != mine and edge is not None and edge.lower() != sent and shape(edge) == kind
    ]


def _edge(item: str, width: int, index: int, count: int) -> str | None:
    """The run of ``width`` words of the ``index``-th of ``count`` items that touches its
    separators, or ``None`` where the item is shorter (or a middle item longer)."""
    words = item.split()
    if len(words) < width:
        return None
    if index == 0:
        return " ".join(words[-width:])
    if index == count - 1:
        return " ".join(words[:width])
    return item if len(words) == width else None


def _with(args: Mapping[str, Any], name: str, was: Any, item: str) -> dict[str, Any]:
    """``args`` with ``item`` in ``name``, as a number where ``was`` was one."""
    value: Any = item
    if isinstance(was, int) and not isinstance(was, bool) and item.isdigit():
        value = int(item)
    return {**args, name: value}


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _text(value: Any) -> str:
    return str(value).strip().lower()
