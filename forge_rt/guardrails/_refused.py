"""Calls that would be refused again: kept out of the turn's later constraints.

Two kinds of call fail the same way every time they are sent:

- one the validator refused (a placeholder argument, words copied from a correction, a
  tool-result marker, a value of the wrong type): validation depends on the call alone, so
  the same call is refused again. The real 0.5B sent ``open_file(path="/path/to/your/file")``
  four times in a row, each refused, and the run ended in ToolCallError; it answered with the
  same copied correction six times.
- one whose tool refused its arguments (:class:`~forge_rt.errors.ToolResolutionError`: "unknown
  symbol 'AAPL'; try ZENX"): the same arguments resolve the same way while nothing else
  changed. The real 0.5B sent ``get_stock_price(symbol="AAPL")`` again right after the tool
  said to try ZENX, until the loop guard ended the run.

:class:`RefusedCalls` remembers both for the constraint to exclude (``Guardrails.excluded_calls``
→ ``NarrowedConstraint.to(..., exclude=...)``): the tool stays callable, with arguments that
differ from the refused call in at least one. A refused free-text string is excluded with
every string that starts with it (:class:`~forge_rt.guardrails.StartsWith`): barred from
``quote="EUR"`` alone, the real 0.5B wrote ``"EUR}}"`` and then ``"EUR}}}}"``, the same call
with the string's closing brackets pulled inside it. A validator refusal stays excluded for the
rest of the turn. A resolution failure stays excluded until a call succeeds: a successful call may
have changed what the tool can resolve (an order created, a file opened). A call whose
arguments cannot be told apart by a constraint (numbers only, no parameters) is never
excluded: that would leave the tool out, and a refusal is no reason to take a tool away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.errors import ToolSchemaError
from forge_rt.guardrails._constrain import can_exclude
from forge_rt.guardrails._exclude import StartsWith
from forge_rt.guardrails._rescue_args import schema_of
from forge_rt.guardrails._validator import CallKey, call_key

__all__ = ["RefusedCalls"]


class RefusedCalls:
    """The calls of this turn that would be refused again if sent again, by key."""

    def __init__(self, specs: Mapping[str, ToolSpec]) -> None:
        self._specs = specs
        self._invalid: dict[CallKey, ToolCall] = {}  # refused by the validator: the whole turn
        self._unresolved: dict[CallKey, ToolCall] = {}  # refused by the tool: until a success
        self._excludable: dict[CallKey, bool] = {}

    def refused(self, call: ToolCall) -> None:
        """The validator refused ``call``."""
        if self._fits(call):
            self._invalid[call_key(call)] = self._by_start(call)

    def unresolved(self, call: ToolCall) -> None:
        """``call``'s tool refused its arguments (a ToolResolutionError)."""
        if self._fits(call):
            self._unresolved[call_key(call)] = self._by_start(call)

    def succeeded(self) -> None:
        """A call ran successfully: what a tool can resolve may have changed."""
        self._unresolved.clear()

    def new_turn(self) -> None:
        """A new user turn: nothing refused in the last one stays excluded."""
        self._invalid.clear()
        self._unresolved.clear()

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The calls to exclude: each refused one, once."""
        merged = {**self._invalid, **self._unresolved}
        return tuple(merged.values())

    def _by_start(self, call: ToolCall) -> ToolCall:
        """``call`` with each free-text string argument (a plain ``string`` property: no enum,
        const, pattern or format) given by its start, so no string beginning with it is left."""
        props = schema_of(self._specs[call.tool]).get("properties")
        if not isinstance(props, Mapping):
            return call
        args = {
            name: StartsWith(value)
            if isinstance(value, str) and _free_text(props.get(name))
            else value
            for name, value in call.args.items()
        }
        return ToolCall(tool=call.tool, args=args, call_id=call.call_id)

    def _fits(self, call: ToolCall) -> bool:
        """Whether a constraint can exclude ``call`` and still offer its tool."""
        spec = self._specs.get(call.tool)
        if spec is None:  # an unknown tool: no constraint offers it anyway
            return False
        key = call_key(call)
        fits = self._excludable.get(key)
        if fits is None:
            try:
                fits = can_exclude(spec, call)
            except ToolSchemaError:
                # A schema no constraint can be built from (a recursive model): the reply is
                # decoded freely, with nothing to exclude from.
                fits = False
            self._excludable[key] = fits
        return fits


def _free_text(schema: Any) -> bool:
    """Whether ``schema`` is a plain string property, whose values a start can exclude."""
    return (
        isinstance(schema, Mapping)
        and schema.get("type") == "string"
        and not any(k in schema for k in ("enum", "const", "pattern", "format"))
    )
