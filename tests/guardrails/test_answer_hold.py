"""After a loop on a lookup that already answered, or a refused answer, the next reply is held
to the answer -- the shape of a small model that repeated a successful lookup, was warned,
answered with the warning's own words ("Your answer is the same as before.") twice, and looked
up again until the loop guard ended the run."""

from __future__ import annotations

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.guardrails import Execute, Guardrails, StepBlocked, ToolErrors, ToolResult

ORDER = ToolSpec(
    name="track_shipment",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)
SHIPPED = "KVX-0318: shipped on 2026-10-14 by courier"


def _reply(tool: str, **args: str) -> LLMResponse:
    return LLMResponse(result=[ToolCall(tool=tool, args=args)])


def _looked_up_three_times(guard: Guardrails) -> StepBlocked:
    guard.new_turn("What's the status of order 318?")
    for _ in range(2):
        action = guard.check(_reply("track_shipment", order_id="KVX-0318"))
        assert isinstance(action, Execute)
        guard.record([ToolResult(call=action.calls[0], output=SHIPPED)])
    blocked = guard.check(_reply("track_shipment", order_id="KVX-0318"))
    assert isinstance(blocked, StepBlocked)
    assert blocked.reason == "loop"
    return blocked


def _names(guard: Guardrails) -> set[str]:
    return {spec.name for spec in guard.callable_now()}


def test_a_loop_on_a_lookup_that_answered_leaves_only_the_answer() -> None:
    guard = Guardrails([ORDER], required_steps=["track_shipment"], respond_tool=True)
    assert _names(guard) == {"track_shipment"}  # the answer waits for the step
    _looked_up_three_times(guard)
    assert _names(guard) == {"respond"}
    guard.new_turn("And order 319?")  # the step stays done; the lookup is offered again
    assert _names(guard) == {"track_shipment", "respond"}


def test_a_loop_on_a_failing_call_does_not() -> None:
    """A call that keeps failing is no answer: the lookup stays callable with other values."""
    guard = Guardrails([ORDER], required_steps=["track_shipment"], respond_tool=True)
    guard.new_turn("What's the status of order 318?")
    for _ in range(2):
        action = guard.check(_reply("track_shipment", order_id="318"))
        assert isinstance(action, Execute)
        guard.record([ToolResult(call=action.calls[0], error=ValueError("bad id"))])
    assert isinstance(guard.check(_reply("track_shipment", order_id="318")), StepBlocked)
    assert "track_shipment" in _names(guard)


def test_an_answer_copied_from_a_correction_holds_the_next_to_the_results() -> None:
    """The loop warning's words as the answer are refused as an echo; the next answer may only
    be a result of the turn."""
    guard = Guardrails([ORDER], required_steps=["track_shipment"], respond_tool=True)
    blocked = _looked_up_three_times(guard)
    echo = blocked.errors[0].content.split("\n")[0][:60]
    refused = guard.check(_reply("respond", message=echo))
    assert isinstance(refused, ToolErrors)
    assert guard.answer_choices == (SHIPPED,)
