"""A call that picks an item of a listing the request does not name is sent back once, with
the item it does name.

A small model that lists items to act on one tends to pick the first id of the listing, not the
one the user named: a real id from a real result, which nothing else objects to.

:class:`ItemSelection` keeps the turn's request words and its successful results. A call whose
argument value is the id of one item of a result's listing (items split on ``;``, line breaks
or, failing those, commas; an item's id is its token of the value's shape) is checked against
the request: when that item shares no word with it and exactly one other item of the listing
does, the call is refused **once per turn** with that item's id in its place, to copy.
Listings the request names nothing of, or several items of, are left to the model.

:meth:`ItemSelection.named_row` (the rule ``named_row``) is the same reading for an id in *no*
row: a call whose identifier the run was never given (as :mod:`~forge_rt.guardrails._guesses`
judges one), made after a listing of the turn whose rows the request names one of best (more of
its words than any other row), is sent back **once a value** with that row's one identifier in
its place: nothing else tells the model which row it asked for.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from forge_rt.core import ToolCall
from forge_rt.guardrails._grounding import content_tokens
from forge_rt.guardrails._guesses import shape_of

__all__ = ["ItemSelection", "OtherItem"]

# The most results of a turn kept to find listings in (the latest first).
_RESULTS_KEPT = 8
_ROWS = re.compile(r"\s*(?:;|\n)\s*")
_TOKEN = re.compile(r"[^\s,;:()\[\]{}'\"`]+")


class OtherItem(msgspec.Struct, frozen=True, kw_only=True):
    """The item the request names, for a call that picked another of the same listing."""

    field: str
    picked: str  # the picked item's text, without its id
    named: str  # the named item's text
    value: str | int  # the named item's id, as the call's field takes it
    tool: str  # the tool whose result listed them


class ItemSelection:
    """This turn's request words and listings, and whether its one refusal is spent."""

    def __init__(self) -> None:
        self._asked: set[str] = set()
        self._results: list[tuple[str, str]] = []  # (tool, output), oldest first
        self._refused = False
        self._named: set[tuple[str, str]] = set()  # (field, value) sent back by named_row

    def reset(self, request: str = "") -> None:
        """A new turn, with the user's ``request``."""
        self._asked = content_tokens(request)
        self._results = []
        self._refused = False
        self._named = set()

    def add_result(self, tool: str, output: str) -> None:
        """A successful result of this turn: a listing an id may be picked from."""
        self._results = [*self._results, (tool, output)][-_RESULTS_KEPT:]

    def check(self, call: ToolCall) -> OtherItem | None:
        """The item the request names in place of the one ``call`` picked, the first time
        in a turn (the refusal is then spent), else ``None``."""
        if self._refused or not self._asked:
            return None
        for field, value in call.args.items():
            if isinstance(value, bool) or not isinstance(value, str | int):
                continue
            for tool, output in reversed(self._results):
                if tool == call.tool:
                    continue  # the call's own earlier result lists nothing to pick from
                other = self._other(field, value, tool, output)
                if other is not None:
                    self._refused = True
                    return other
        return None

    def named_row(
        self,
        call: ToolCall,
        unfounded: Callable[[str, str | int], bool],
        accepts: Callable[[str, str | int], bool],
    ) -> OtherItem | None:
        """The row the request names, for an argument of ``call`` that ``unfounded`` says no
        fact holds, once a value a turn, else ``None``. The row's identifier is its one token
        that ``accepts`` takes for the field (its schema); none or several, and it says nothing."""
        if not self._asked:
            return None
        for field, value in call.args.items():
            if isinstance(value, bool) or not isinstance(value, str | int):
                continue
            if (field, str(value)) in self._named or not unfounded(field, value):
                continue
            for tool, output in reversed(self._results):
                if tool == call.tool or (row := self._named_row(output)) is None:
                    continue
                tokens, text = row
                typed = [int(t) if isinstance(value, int) and t.isdigit() else t for t in tokens]
                fitting = [t for t in typed if type(t) is type(value) and accepts(field, t)]
                if len(fitting) != 1:
                    continue
                self._named.add((field, str(value)))
                return OtherItem(
                    field=field, picked=str(value), named=text, value=fitting[0], tool=tool
                )
        return None

    def _named_row(self, output: str) -> tuple[list[str], str] | None:
        """The identifiers and the words of the row of ``output``'s listing that shares more
        of the request's words than any other row, or ``None`` (no listing, or a tie)."""
        rows = [r for r in _ROWS.split(output) if r.strip()]
        if len(rows) < 2:
            return None
        shared = [len(content_tokens(r) & self._asked) for r in rows]
        best = max(shared)
        if best == 0 or shared.count(best) > 1:
            return None
        tokens = _TOKEN.findall(rows[shared.index(best)])
        ids = [t for t in tokens if _identifier(t) and t.lower() not in self._asked]
        words = " ".join(t for t in tokens if t not in ids and any(c.isalnum() for c in t))
        return ids, words

    def _other(self, field: str, value: str | int, tool: str, output: str) -> OtherItem | None:
        sent = str(value).lower()
        items = _items(output, shape_of(str(value)))
        ids = [i for i, _ in items]
        if sent not in ids or ids.count(sent) > 1:
            return None
        named = [(i, text) for i, text in items if content_tokens(text) & self._asked]
        picked = next(text for i, text in items if i == sent)
        if len(named) != 1 or named[0][0] == sent or content_tokens(picked) & self._asked:
            return None
        item_id, text = named[0]
        original = next(t for t in _TOKEN.findall(output) if t.lower() == item_id)
        return OtherItem(
            field=field,
            picked=picked,
            named=text,
            value=int(original) if isinstance(value, int) else original,
            tool=tool,
        )


def _identifier(token: str) -> bool:
    """Whether ``token`` reads as an identifier: it holds a digit, a ``/`` or an ``@``."""
    return any(c.isdigit() or c in "/@" for c in token)


def _items(output: str, shape: str) -> list[tuple[str, str]]:
    """The listing in ``output`` as (id, text) pairs: each row's first token of ``shape`` and
    the rest of the row; empty unless two or more rows have one."""
    rows = [r for r in _ROWS.split(output) if r.strip()]
    if len(rows) < 2:
        rows = [r for r in output.split(",") if r.strip()]
    items = []
    for row in rows:
        tokens = _TOKEN.findall(row)
        ids = [t for t in tokens if shape_of(t) == shape]
        if ids:
            rest = " ".join(t for t in tokens if t != ids[0])
            items.append((ids[0].lower(), rest))
    return items if len(items) >= 2 else []
