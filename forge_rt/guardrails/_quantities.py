"""An answer given while a number of the request never reached a tool is sent back once.

A small model may use a number of a result where the request gave its own (converting 1, from
"1 EUR = 0.86 GBP", instead of the 180 asked for): every call valid and every answer grounded,
only the user's number lost on the way.

:class:`RequestQuantities` keeps the numbers the turn's request states as words of their own
("180", "0.5"; not the 3 of "Q3"), the numbers every call of the turn sent (also as digits
inside strings), and the latest successful call that takes a number. When the reply is a
terminal call whose text does not state a request number that no call used either, it is
refused **once per turn** with that call, the number put in the field it most likely belongs in
(one whose value is not the request's own, a whole number for a whole number), to copy. Without
such a call nothing is refused (a tool that takes no number loses none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails._rescue_args import schema_of, valid_with

__all__ = ["LostNumber", "RequestQuantities", "request_numbers"]

_STANDALONE = re.compile(r"(?<![\w.,\-/:#])\d+(?:\.\d+)?(?![\w\-/:]|[.,]\d)")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_NUMERIC = frozenset({"number", "integer"})


def request_numbers(text: str) -> tuple[float, ...]:
    """The numbers ``text`` states as words of their own, in order, once each."""
    return tuple(dict.fromkeys(float(m.group()) for m in _STANDALONE.finditer(text)))


class LostNumber(msgspec.Struct, frozen=True, kw_only=True):
    """A number of the request no call used, and the call to make with it."""

    number: float
    call: ToolCall


class RequestQuantities:
    """This turn's request numbers, the numbers its calls sent, and whether its one refusal
    is spent."""

    def __init__(self) -> None:
        self._asked: tuple[float, ...] = ()
        self._used: set[float] = set()
        self._latest: tuple[ToolSpec, ToolCall] | None = None  # last ok call taking a number
        self._refused = False

    def reset(self, request: str = "") -> None:
        """A new turn, with the user's ``request``."""
        self._asked = request_numbers(request)
        self._used = set()
        self._latest = None
        self._refused = False

    def add_call(self, spec: ToolSpec | None, call: ToolCall, *, ok: bool) -> None:
        """A call of this turn ran: the numbers it sent are used; a successful one that takes
        a number is the one a lost number is shown in."""
        self._used |= set(_numbers_in(call.args.values()))
        if ok and spec is not None and _numeric_fields(spec):
            self._latest = (spec, call)

    def check(self, answer: Mapping[str, Any]) -> LostNumber | None:
        """The request number that neither a call nor the terminal call's ``answer``
        arguments used, with the call to make, the first time in a turn (the refusal is then
        spent); else ``None``."""
        if self._refused or self._latest is None:
            return None
        stated = set(_numbers_in(answer.values()))
        lost = [n for n in self._asked if n not in self._used and n not in stated]
        if not lost:
            return None
        spec, call = self._latest
        fixed = _with_number(spec, call, lost[0], self._asked)
        if fixed is None:
            return None
        self._refused = True
        return LostNumber(number=lost[0], call=fixed)


def _numbers_in(values: Iterable[Any]) -> Iterable[float]:
    for value in values:
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            yield float(value)
        elif isinstance(value, str):
            yield from (float(m.group()) for m in _DIGITS.finditer(value))


def _numeric_fields(spec: ToolSpec) -> list[str]:
    props: Mapping[str, Any] = schema_of(spec).get("properties") or {}
    return [k for k, v in props.items() if isinstance(v, Mapping) and _is_numeric(v)]


def _is_numeric(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return bool(kinds & _NUMERIC)


def _with_number(
    spec: ToolSpec, call: ToolCall, number: float, asked: tuple[float, ...]
) -> ToolCall | None:
    """``call`` with ``number`` in the numeric field whose value is not a request number,
    a whole-number value first for a whole number, else in schema order; ``None`` where none
    takes it."""
    whole = number.is_integer()
    fields = [
        f
        for f in _numeric_fields(spec)
        if not (isinstance(call.args.get(f), int | float) and float(call.args[f]) in asked)
    ]
    fields.sort(key=lambda f: _whole(call.args.get(f)) != whole)
    value: Any = int(number) if whole else number
    for field in fields:
        args = valid_with(spec, call.args, field, value)
        if args is not None:
            return ToolCall(tool=call.tool, args={**args, field: value})  # 180, not 180.0
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == int(value)
