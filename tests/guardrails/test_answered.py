"""A call the caller's history already answered (the rule ``answered_calls``), and arguments
that carry the caller's guardrail text (``placeholders`` with markers)."""

from __future__ import annotations

from guard_support import reply, spec

from forge_rt.core import Message, ToolCall
from forge_rt.errors import ToolCallError, ToolLoopError
from forge_rt.guardrails import (
    Execute,
    Fatal,
    GuardrailOptions,
    Guardrails,
    StepBlocked,
    ToolErrors,
    ToolResult,
)

KILN = spec("kiln_heat", kiln="string")
GLAZE = spec("glaze_stock", colour="string")
HEAT = "Kiln K-3: 1180 degrees, rising"


def _guard(options: GuardrailOptions | None = None, **kw: object) -> Guardrails:
    """Guardrails of one request whose history already ran kiln_heat("K-3")."""
    guard = Guardrails([KILN, GLAZE], options=options or GuardrailOptions(), **kw)  # type: ignore[arg-type]
    ran = ToolCall(tool="kiln_heat", args={"kiln": "K-3"}, call_id="h1")
    guard.observe_history(
        [
            Message.user("How hot are kilns K-3 and K-4, and is there cobalt glaze?"),
            Message.assistant_calls([ran]),
            Message.tool_result(ran, HEAT),
        ]
    )
    return guard


def test_a_repeat_alone_is_answered_from_the_history() -> None:
    action = _guard().check(reply("kiln_heat", kiln="K-3"))
    assert isinstance(action, StepBlocked)
    assert action.rule == "answered_calls"
    (answer,) = action.errors
    assert answer.content.startswith(HEAT)
    assert "already" in answer.content


def test_a_repeat_beside_a_fresh_call_is_dropped() -> None:
    both = [
        ToolCall(tool="kiln_heat", args={"kiln": "K-3"}, call_id="a"),
        ToolCall(tool="glaze_stock", args={"colour": "cobalt"}, call_id="b"),
    ]
    action = _guard().check(both)
    assert isinstance(action, Execute)
    assert [c.tool for c in action.calls] == ["glaze_stock"]
    assert action.collapsed == 1


def test_a_call_answered_in_an_earlier_turn_runs_again_when_asked_again() -> None:
    """The user asks again in a new turn (the kiln has heated since): that is no repeat."""
    guard = Guardrails([KILN, GLAZE])
    ran = ToolCall(tool="kiln_heat", args={"kiln": "K-3"}, call_id="h1")
    guard.observe_history(
        [
            Message.user("How hot is kiln K-3?"),
            Message.assistant_calls([ran]),
            Message.tool_result(ran, HEAT),
            Message.assistant_text("K-3 is at 1180 degrees."),
            Message.user("And now?"),
        ]
    )
    assert isinstance(guard.check(reply("kiln_heat", kiln="K-3")), Execute)


def test_other_arguments_are_a_new_call() -> None:
    assert isinstance(_guard().check(reply("kiln_heat", kiln="K-4")), Execute)


def test_insisting_is_warned_then_ends_the_turn() -> None:
    guard = _guard()
    assert guard.check(reply("kiln_heat", kiln="K-3")).rule == "answered_calls"  # type: ignore[union-attr]
    warned = guard.check(reply("kiln_heat", kiln="K-3"))
    assert isinstance(warned, StepBlocked)
    assert warned.rule == "answered_calls"
    assert guard.left_out_tools == frozenset({"kiln_heat"})
    assert [c.tool for c in guard.excluded_calls] == ["kiln_heat"]
    ended = guard.check(reply("kiln_heat", kiln="K-3"))
    assert isinstance(ended, Fatal)
    assert isinstance(ended.error, ToolLoopError)


def test_answered_repeats_in_turn_are_bounded_though_valid_replies_between_reset_nothing() -> None:
    guard = _guard(GuardrailOptions(max_retries=1))
    assert isinstance(guard.check(reply("kiln_heat", kiln="K-3")), StepBlocked)
    ended = guard.check(reply("kiln_heat", kiln="K-3"))
    assert isinstance(ended, Fatal)
    assert isinstance(ended.error, ToolCallError)


def test_off_the_repeat_is_returned() -> None:
    guard = _guard(GuardrailOptions().without("answered_calls"))
    assert isinstance(guard.check(reply("kiln_heat", kiln="K-3")), Execute)


def test_an_argument_holding_a_marker_is_refused_as_a_placeholder() -> None:
    guard = _guard(markers=("[KilnNote]",), respond_tool=True)
    action = guard.check(reply("glaze_stock", colour="cobalt [KilnNote] call again"))
    assert isinstance(action, ToolErrors)
    assert action.rule == "placeholders"
    assert "copied back" in action.errors[0].content


def test_an_answer_goes_on_into_a_marker_is_the_callers_to_cut() -> None:
    # K-4 was asked about and never looked up: list coverage would send any answer back.
    guard = _guard(
        GuardrailOptions().without("list_coverage"), markers=("[KilnNote]",), respond_tool=True
    )
    kept = guard.check(reply("respond", message="It is at 1180 degrees. [KilnNote] more"))
    assert isinstance(kept, Execute)
    refused = guard.check(reply("respond", message="[KilnNote] more"))
    assert isinstance(refused, ToolErrors)
    assert refused.rule == "placeholders"


def _kiln_shop(options: GuardrailOptions | None = None) -> Guardrails:
    """Guardrails where ``glaze_stock`` writes (it is not idempotent) and ``kiln_heat`` reads."""
    guard = Guardrails([KILN, GLAZE], options=options or GuardrailOptions(), writes=["glaze_stock"])
    guard.new_turn("Order cobalt glaze, and check kilns K-3 and K-4.")
    return guard


def _ran(guard: Guardrails, tool: str, output: str, **args: str) -> None:
    action = guard.check(reply(tool, **args))
    assert isinstance(action, Execute), action
    guard.record([ToolResult(call=action.calls[0], output=output)])


def test_a_write_that_succeeded_is_answered_not_run_again() -> None:
    guard = _kiln_shop()
    _ran(guard, "glaze_stock", "order G-51 placed: cobalt", colour="cobalt")
    again = guard.check(reply("glaze_stock", colour="cobalt"))
    assert isinstance(again, StepBlocked)
    assert again.rule == "answered_calls"
    assert again.errors[0].content.startswith("order G-51 placed: cobalt")


def test_a_lookup_may_run_again_and_a_new_turn_may_write_again() -> None:
    guard = _kiln_shop()
    _ran(guard, "kiln_heat", HEAT, kiln="K-3")
    assert isinstance(guard.check(reply("kiln_heat", kiln="K-3")), Execute)  # idempotent
    _ran(guard, "glaze_stock", "order G-51 placed: cobalt", colour="cobalt")
    guard.new_turn("Order cobalt glaze again, please.")
    assert isinstance(guard.check(reply("glaze_stock", colour="cobalt")), Execute)


def test_off_a_write_runs_again() -> None:
    guard = _kiln_shop(GuardrailOptions().without("answered_calls"))
    _ran(guard, "glaze_stock", "order G-51 placed: cobalt", colour="cobalt")
    assert isinstance(guard.check(reply("glaze_stock", colour="cobalt")), Execute)
