"""A call made of values from nowhere, where text was open, is sent back once a turn."""

from __future__ import annotations

from typing import Any

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    RetryWithNudge,
    TextAnswer,
    ToolErrors,
)

QUOTE = ToolSpec(
    name="share_quote",
    description="The latest price of a listed share.",
    parameters={
        "type": "object",
        "properties": {
            "ticker": {"type": "string"},
            "market": {"type": "string", "enum": ["north", "south"]},
        },
        "required": ["ticker"],
    },
)
TIMER = ToolSpec(
    name="garden_timer",
    description="Water the garden for some minutes.",
    parameters={
        "type": "object",
        "properties": {"minutes": {"type": "integer"}, "zone": {"type": "string"}},
        "required": ["minutes"],
    },
)
NOTE = ToolSpec(
    name="leave_note",
    description="Leave a note for someone in the house.",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        "required": ["to", "text"],
    },
)
TOOLS = [QUOTE, TIMER, NOTE]
# The value reading alone: unrelated_tools reads the tool's own words, and these tools share
# none with most requests here (their pairing is tests/guardrails/test_relevance.py).
ON = GuardrailOptions(unfounded_calls=True, prose_answers=True, unrelated_tools=False)


def _guard(request: str, options: GuardrailOptions = ON) -> Guardrails:
    guard = Guardrails(TOOLS, respond_tool=True, options=options)
    guard.new_turn(request)
    return guard


def _call(tool: str, call_id: str = "c1", **args: Any) -> ToolCall:
    return ToolCall(tool=tool, args=args, call_id=call_id)


def test_a_call_of_values_from_nowhere_is_sent_back_with_both_ways_on() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    action = guard.check([_call("share_quote", ticker="ZXQ")], text_offered=True)
    assert isinstance(action, ToolErrors)
    [note] = action.errors
    assert 'ticker="ZXQ"' in note.content
    assert "share_quote" in note.content
    assert "plain text" in note.content


def test_the_same_reply_again_is_taken_as_it_is() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    call = _call("share_quote", ticker="ZXQ")
    assert isinstance(guard.check([call], text_offered=True), ToolErrors)
    assert isinstance(guard.check([call], text_offered=True), Execute)


def test_a_new_turn_may_send_one_back_again() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    call = _call("share_quote", ticker="ZXQ")
    assert isinstance(guard.check([call], text_offered=True), ToolErrors)
    guard.new_turn("And who built its bell tower?")
    assert isinstance(guard.check([call], text_offered=True), ToolErrors)


def test_values_from_the_request_found_the_call() -> None:
    guard = _guard("Water the garden for 15 minutes, please.")
    assert isinstance(guard.check([_call("garden_timer", minutes=15)], text_offered=True), Execute)


def test_one_value_from_the_request_is_enough() -> None:
    guard = _guard("Water the rose bed.")
    call = _call("garden_timer", minutes=20, zone="rose bed")
    assert isinstance(guard.check([call], text_offered=True), Execute)


def test_a_value_the_tool_itself_spells_out_founds_the_call() -> None:
    pedal = ToolSpec(
        name="press_pedal",
        description="Press the pedal; position runs from 0.0 (up) to 1.0 (floored).",
        parameters={"type": "object", "properties": {"position": {"type": "number"}}},
    )
    guard = Guardrails([*TOOLS, pedal], respond_tool=True, options=ON)
    guard.new_turn("Press the pedal all the way down.")
    assert isinstance(guard.check([_call("press_pedal", position=1.0)], text_offered=True), Execute)
    assert isinstance(
        guard.check([_call("press_pedal", position=0.7)], text_offered=True), ToolErrors
    )


def test_composed_text_is_founded_by_any_of_its_words() -> None:
    guard = _guard("Let Ines know that the kiln has cooled.")
    call = _call("leave_note", to="Ines", text="Hi! It is ready for you now.")
    assert isinstance(guard.check([call], text_offered=True), Execute)


def test_values_the_schema_lists_are_no_evidence_either_way() -> None:
    guard = _guard("What is the tallest tree in the valley?")
    # Only the enum value and a word too short to judge: nothing to go on.
    assert isinstance(
        guard.check([_call("share_quote", ticker="ok", market="north")], text_offered=True),
        Execute,
    )


def test_a_reply_with_one_founded_call_runs_whole() -> None:
    guard = _guard("Water the garden for 15 minutes.")
    calls = [_call("garden_timer", minutes=15), _call("share_quote", "c2", ticker="ZXQ")]
    action = guard.check(calls, text_offered=True)
    assert isinstance(action, Execute)
    assert len(action.calls) == 2


def test_an_answer_beside_calls_from_nowhere_is_held_back_with_them() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    answer = _call("respond", "c2", message="A travelling joiner, by most accounts.")
    action = guard.check([_call("share_quote", ticker="ZXQ"), answer], text_offered=True)
    assert isinstance(action, ToolErrors)
    assert [e.call_id for e in action.errors] == ["c1"]
    assert [h.call_id for h in action.held_back] == ["c2"]


def test_nothing_is_judged_where_text_was_not_an_option() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    assert isinstance(guard.check([_call("share_quote", ticker="ZXQ")]), Execute)


def test_nothing_is_judged_with_the_option_off() -> None:
    guard = _guard(
        "Who carved the doors?", GuardrailOptions(prose_answers=True, unrelated_tools=False)
    )
    action = guard.check([_call("share_quote", ticker="ZXQ")], text_offered=True)
    assert isinstance(action, Execute)


def test_an_answer_is_never_judged() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    answer = _call("respond", message="A travelling joiner, by most accounts.")
    assert isinstance(guard.check([answer], text_offered=True), Execute)


def test_nothing_is_judged_before_a_request_is_known() -> None:
    guard = Guardrails(TOOLS, respond_tool=True, options=ON)
    assert isinstance(guard.check([_call("share_quote", ticker="ZXQ")], text_offered=True), Execute)


def test_the_note_copied_back_as_text_is_no_answer() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    action = guard.check([_call("share_quote", ticker="ZXQ")], text_offered=True)
    assert isinstance(action, ToolErrors)
    copied = action.errors[0].content
    assert isinstance(guard.check(copied, text_offered=True), RetryWithNudge)
    answer = "Nobody knows for certain; the parish records were lost."
    assert guard.check(answer, text_offered=True) == TextAnswer(text=answer, rule="prose_answers")


REEF = ToolSpec(
    name="reef_depth",
    parameters={
        "type": "object",
        "properties": {"reef": {"type": "string"}},
        "required": ["reef"],
    },
)
SCALE = ToolSpec(
    name="to_fathoms",
    parameters={
        "type": "object",
        "properties": {"metres": {"type": "number"}},
        "required": ["metres"],
    },
)


def _several(
    options: GuardrailOptions, request: str = "How deep is Coral Bank, in fathoms?"
) -> Guardrails:
    guard = Guardrails([REEF, SCALE], options=options, respond_tool=True)
    guard.new_turn(request)
    return guard


def test_a_negative_number_the_request_gives_is_no_value_from_nowhere() -> None:
    """The request writes the depth with a minus sign and a trailing zero; the call's number
    is the same value, so the call runs (the facts' numbers are read without a sign)."""
    call = ToolCall(tool="to_fathoms", args={"metres": -31.5}, call_id="b")
    given = _several(ON, "Coral Bank lies at -31.50 metres; how many fathoms is that?")
    assert isinstance(given.check([call], text_offered=True), Execute)
    elsewhere = _several(ON, "Coral Bank lies at -12.25 metres; how many fathoms is that?")
    assert isinstance(elsewhere.check([call], text_offered=True), ToolErrors)


def test_the_same_call_sent_again_after_the_note_quoted_its_values_is_no_echo() -> None:
    """The note names the call's values; the model's own values sent again are its own, not a
    copy of the note (insisting is taken at its word, not refused as an echo)."""
    guard = _guard("Who carved the doors of the old mill chapel?")
    call = _call("leave_note", to="2031-07-04 09:15:00", text="Stone lintel, 1820")
    first = guard.check([call], text_offered=True)
    assert isinstance(first, ToolErrors)
    assert '"2031-07-04 09:15:00"' in first.errors[0].content
    again = guard.check([_call("leave_note", "c2", **call.args)], text_offered=True)
    assert isinstance(again, Execute), again


def test_a_value_first_seen_in_a_note_is_still_an_echo() -> None:
    guard = _guard("Who carved the doors of the old mill chapel?")
    first = guard.check([_call("share_quote", ticker="ZXQ-PRIME-4471")], text_offered=True)
    assert isinstance(first, ToolErrors)
    copied = _call(
        "leave_note", "c2", to="Ines", text="ticker=ZXQ-PRIME-4471 appears in the request"
    )
    assert isinstance(guard.check([copied], text_offered=True), ToolErrors)
