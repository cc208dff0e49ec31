"""A turn's first call to a tool that shares no word with the request, where text was open, is
sent back once a turn (the rule ``unrelated_tools``)."""

from __future__ import annotations

from typing import Any

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    ToolErrors,
    ToolResult,
)
from forge_rt.guardrails._relevance import related, tool_words

KILN = ToolSpec(
    name="kiln_schedule",
    description="Set the firing curve of a pottery kiln.",
    parameters={
        "type": "object",
        "properties": {
            "peak_celsius": {"type": "integer", "description": "Hottest point of the firing."},
            "hold": {"type": "string", "enum": ["short", "long"]},
        },
        "required": ["peak_celsius"],
    },
)
VAN = ToolSpec(
    name="find_van",
    description="",
    parameters={
        "type": "object",
        "properties": {"plate": {"type": "string"}},
        "required": ["plate"],
    },
)
LEDGER = ToolSpec(
    name="ledger_entry",
    description="Look up one entry of the shop ledger by its number.",
    parameters={
        "type": "object",
        "properties": {"entry": {"type": "string"}},
        "required": ["entry"],
    },
)
TOOLS = [KILN, VAN, LEDGER]
ON = GuardrailOptions(unrelated_tools=True, unfounded_calls=True, prose_answers=True)
UNRELATED = "Which river runs past the old mill at Wendle?"


def _guard(request: str, options: GuardrailOptions = ON) -> Guardrails:
    guard = Guardrails(TOOLS, respond_tool=True, options=options)
    guard.new_turn(request)
    return guard


def _call(tool: str, call_id: str = "c1", **args: Any) -> ToolCall:
    return ToolCall(tool=tool, args=args, call_id=call_id)


def test_a_call_to_a_tool_the_request_shares_no_word_with_is_sent_back_once() -> None:
    guard = _guard(UNRELATED)
    call = _call("kiln_schedule", peak_celsius=1200)
    action = guard.check([call], text_offered=True)
    assert isinstance(action, ToolErrors)
    assert action.rule == "unrelated_tools"
    [note] = action.errors
    assert "kiln_schedule" in note.content
    assert "Set the firing curve of a pottery kiln." in note.content  # the tool's own words
    assert "plain text" in note.content
    # Another tool is left to call (respond): the reply is drawn again, the note unshown.
    assert action.redraw
    assert action.messages() == []
    # The next constraint leaves the tool out; the rule is spent for the turn.
    assert "kiln_schedule" not in {t.name for t in guard.callable_now()}
    assert isinstance(guard.check([call], text_offered=True), Execute)


def test_every_unrelated_tool_is_left_out_until_a_batch_runs() -> None:
    guard = _guard("Which van carries the river mill's flour?")
    assert isinstance(
        guard.check([_call("kiln_schedule", peak_celsius=9)], text_offered=True), ToolErrors
    )
    # find_van shares "van" with the request; the kiln and the ledger share nothing.
    assert {t.name for t in guard.callable_now()} == {"find_van", "respond"}
    assert guard.left_out_tools == frozenset({"kiln_schedule", "ledger_entry"})
    action = guard.check([_call("find_van", plate="FL-1")], text_offered=True)
    assert isinstance(action, Execute)
    guard.record([ToolResult(call=action.calls[0], output="FL-1: the blue van")])
    assert "kiln_schedule" in {t.name for t in guard.callable_now()}
    assert guard.left_out_tools == frozenset()


def test_the_values_of_the_request_do_not_make_the_tool_fit() -> None:
    """The call is filled with the request's own words: the value reading founds it, the
    tool's words still share none with the request."""
    guard = _guard(UNRELATED)
    action = guard.check([_call("ledger_entry", entry="Wendle")], text_offered=True)
    assert isinstance(action, ToolErrors)
    assert action.rule == "unrelated_tools"


def test_a_tool_described_by_the_request_s_words_runs() -> None:
    guard = _guard("Fire the kiln up to 1100 degrees.")
    assert isinstance(
        guard.check([_call("kiln_schedule", peak_celsius=1100)], text_offered=True), Execute
    )


def test_a_word_and_its_inflection_are_one_word() -> None:
    """ "vans" names ``find_van`` (a tool with no description, named by its parts)."""
    guard = _guard("Where are the two vans with plates KT-19 and KT-20?")
    assert isinstance(guard.check([_call("find_van", plate="KT-19")], text_offered=True), Execute)
    assert related(frozenset({"booking"}), ToolSpec(name="book_room", parameters={}))
    assert not related(frozenset({"bo"}), ToolSpec(name="book_room", parameters={}))


def test_parameter_names_descriptions_and_enum_members_describe_a_tool() -> None:
    assert {"peak", "celsius", "hottest", "firing", "short", "long", "kiln"} <= tool_words(KILN)


def test_one_related_call_makes_the_reply_an_attempt() -> None:
    guard = _guard("Fire the kiln up to 1100 degrees, then read ledger entry 7.")
    calls = [_call("kiln_schedule", peak_celsius=1100), _call("find_van", "c2", plate="Q")]
    action = guard.check(calls, text_offered=True)
    assert isinstance(action, Execute)
    assert len(action.calls) == 2


def test_a_call_after_a_result_of_the_turn_may_follow_the_result() -> None:
    """The request names a ledger entry; the entry names a van: the van's call follows it."""
    guard = _guard("Who drove the delivery in ledger entry 31?")
    action = guard.check([_call("ledger_entry", entry="31")], text_offered=True)
    assert isinstance(action, Execute)
    guard.record([ToolResult(call=action.calls[0], output="entry 31: delivered by plate HX-4")])
    assert isinstance(
        guard.check([_call("find_van", "c2", plate="HX-4")], text_offered=True), Execute
    )


def test_the_turn_s_one_refusal_is_shared_with_the_value_reading() -> None:
    guard = _guard(UNRELATED)
    assert isinstance(
        guard.check([_call("kiln_schedule", peak_celsius=1200)], text_offered=True), ToolErrors
    )
    # Values from nowhere now: the turn's refusal of a call from nowhere is spent.
    assert isinstance(
        guard.check([_call("ledger_entry", entry="ZZ-0")], text_offered=True), Execute
    )


def test_a_new_turn_may_send_one_back_again() -> None:
    guard = _guard(UNRELATED)
    call = _call("kiln_schedule", peak_celsius=1200)
    assert isinstance(guard.check([call], text_offered=True), ToolErrors)
    guard.new_turn("And who owns the mill now?")
    assert isinstance(guard.check([call], text_offered=True), ToolErrors)


def test_where_only_the_synthetic_respond_was_open_nothing_is_judged() -> None:
    """A workflow's turn under a constraint offers ``respond``, not text: not judged there."""
    guard = _guard(UNRELATED)
    assert isinstance(guard.check([_call("kiln_schedule", peak_celsius=1200)]), Execute)


def test_nothing_is_judged_where_no_answer_was_open() -> None:
    guard = Guardrails(TOOLS, respond_tool=False, options=ON)
    guard.new_turn(UNRELATED)
    assert isinstance(guard.check([_call("kiln_schedule", peak_celsius=1200)]), Execute)


def test_a_workflow_s_own_step_is_what_its_request_is_about() -> None:
    guard = Guardrails(TOOLS, required_steps=["kiln_schedule"], respond_tool=True, options=ON)
    guard.new_turn(UNRELATED)
    assert isinstance(guard.check([_call("kiln_schedule", peak_celsius=1200)]), Execute)


def test_on_by_default_switched_by_its_name_and_an_answer_is_never_judged() -> None:
    assert GuardrailOptions().unrelated_tools
    assert not GuardrailOptions.off().unrelated_tools
    guard = _guard(UNRELATED, GuardrailOptions(prose_answers=True).without("unrelated_tools"))
    assert isinstance(
        guard.check([_call("kiln_schedule", peak_celsius=1200)], text_offered=True), Execute
    )
    guard = _guard(UNRELATED)
    answer = _call("respond", message="The Wendle brook, by the old maps.")
    assert isinstance(guard.check([answer], text_offered=True), Execute)


def test_a_tool_that_says_too_little_about_itself_is_not_judged() -> None:
    """A bare ``get_readings(site)`` shares no word with "is it frosty at the pier?" and is
    the tool for it: without a description there is nothing to judge it by."""
    bare = ToolSpec(
        name="get_readings",
        parameters={"type": "object", "properties": {"site": {"type": "string"}}},
    )
    guard = Guardrails([bare], respond_tool=True, options=ON)
    guard.new_turn("Is it frosty at the pier?")
    assert isinstance(guard.check([_call("get_readings", site="pier")], text_offered=True), Execute)


def test_a_follow_up_is_about_what_the_turns_before_asked() -> None:
    guard = _guard("Set the kiln to 1200 for the glaze firing.")
    action = guard.check([_call("kiln_schedule", peak_celsius=1200)], text_offered=True)
    assert isinstance(action, Execute)
    guard.record([ToolResult(call=action.calls[0], output="set")])
    guard.new_turn("And 1100 for Tuesday's?")
    assert isinstance(
        guard.check([_call("kiln_schedule", "c2", peak_celsius=1100)], text_offered=True), Execute
    )


def test_a_call_made_only_of_given_values_is_not_judged() -> None:
    """ "What is 17 + 25?" shares no word with a tool that adds two numbers; its numbers do."""
    adder = ToolSpec(
        name="sum_pair",
        description="Sum two numbers and return the total.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        },
    )
    guard = Guardrails([adder], respond_tool=True, options=ON)
    guard.new_turn("What is 17 + 25?")
    assert isinstance(guard.check([_call("sum_pair", a=17, b=25)], text_offered=True), Execute)
    guard.new_turn("What is 17 + 25?")
    assert isinstance(
        guard.check([_call("sum_pair", "c2", a=17, b=9)], text_offered=True), ToolErrors
    )


def test_a_fan_out_of_one_unrelated_tool_is_told_why_once() -> None:
    """Three calls of one unrelated tool: the first carries the note, the others point to it,
    so the model is not shown the same correction three times over."""
    guard = _guard(UNRELATED)
    calls = [_call("kiln_schedule", f"c{n}", peak_celsius=900 + n) for n in range(3)]
    action = guard.check(calls, text_offered=True)
    assert isinstance(action, ToolErrors)
    assert [e.call_id for e in action.errors] == ["c0", "c1", "c2"]
    first, *others = (e.content for e in action.errors)
    assert "Set the firing curve of a pottery kiln." in first
    assert others == ["Not run, as the call of kiln_schedule before it."] * 2


def test_with_no_tool_left_to_call_the_note_is_shown() -> None:
    """Every offered tool unrelated and no ``respond``: the constraint leaves nothing to call
    instead, so a redraw could only repeat the reply; the model is told why, in the history."""
    guard = Guardrails([KILN, LEDGER], respond_tool=False, options=ON)
    guard.new_turn(UNRELATED)
    call = _call("kiln_schedule", peak_celsius=1200)
    action = guard.check([call], text_offered=True)
    assert isinstance(action, ToolErrors)
    assert not action.redraw
    refused, note = action.messages()
    assert refused.tool_calls is not None
    assert [c.tool for c in refused.tool_calls] == ["kiln_schedule"]
    assert "plain text" in (note.content or "")


def test_a_redrawn_reply_s_note_is_not_a_correction_the_model_was_shown() -> None:
    """The next answer may use the words of a note it never saw: the copy check of
    ``placeholders`` reads only what the model was shown."""
    guard = _guard(UNRELATED)
    action = guard.check([_call("kiln_schedule", peak_celsius=1200)], text_offered=True)
    assert isinstance(action, ToolErrors)
    assert action.redraw
    answer = _call(
        "respond", "c2", message="Nothing in the request matches what kiln_schedule does."
    )
    assert isinstance(guard.check([answer], text_offered=True), Execute)
