"""Nudge texts: tiered, specific, and always showing a call the model can copy."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import BaseModel, Field

from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ArgumentError,
    MessageType,
    Prerequisite,
    Role,
    ToolSpec,
)
from forge_rt.guardrails import (
    Nudge,
    RetryCause,
    bad_args_nudge,
    example_call,
    loop_nudge,
    premature_terminal_nudge,
    prerequisite_nudge,
    respond_spec,
    retry_nudge,
    unknown_tool_nudge,
)
from forge_rt.guardrails._nudges import next_step_text


class SalesArgs(BaseModel):
    year: int = Field(ge=2000)
    quarter: int = Field(ge=1, le=4)


SALES = ToolSpec(name="fetch_rainfall_data", description="Rainfall figures", parameters=SalesArgs)
REPORT = ToolSpec(
    name="report",
    parameters={
        "type": "object",
        "properties": {"findings": {"type": "string"}},
        "required": ["findings"],
    },
)
RESPOND = ToolSpec(
    name=RESPOND_TOOL_NAME,
    parameters={
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
)
TOOLS = [SALES, REPORT]


def test_tool_channel_nudge_needs_call_id() -> None:
    """A nudge on the tool channel must name the call it answers."""
    with pytest.raises(ValueError, match=r"^a tool-channel nudge must name the call"):
        Nudge(kind=MessageType.STEP_NUDGE, role=Role.TOOL, content="x")


@pytest.mark.parametrize("tier", [0, 4])
def test_nudge_tier_out_of_range_is_rejected(tier: int) -> None:
    """Nudge tiers run 1..3."""
    with pytest.raises(ValueError, match=r"^nudge tier must be 1\.\.3"):
        Nudge(kind=MessageType.RETRY_NUDGE, role=Role.USER, content="x", tier=tier)


def test_tool_nudge_renders_transient_tool_message() -> None:
    """A tool-channel nudge becomes a transient tool message paired with its call."""
    nudge = Nudge(
        kind=MessageType.PREREQUISITE_NUDGE,
        role=Role.TOOL,
        content="[PrereqError] x",
        call_id="call_1",
        tool="report",
    )
    msg = nudge.message()
    assert (msg.role, msg.type, msg.tool_call_id, msg.tool_name, msg.transient) == (
        Role.TOOL,
        MessageType.PREREQUISITE_NUDGE,
        "call_1",
        "report",
        True,
    )


def test_user_nudge_renders_without_call_id() -> None:
    """A user-channel nudge becomes a transient user message with no tool pairing."""
    msg = Nudge(kind=MessageType.RETRY_NUDGE, role=Role.USER, content="call a tool").message()
    assert (msg.role, msg.type, msg.tool_call_id, msg.transient) == (
        Role.USER,
        MessageType.RETRY_NUDGE,
        None,
        True,
    )


def test_example_call_is_a_valid_call_of_the_tool() -> None:
    """The example call parses as JSON and its arguments pass the tool's schema."""
    shown = json.loads(example_call(SALES))
    assert shown["name"] == "fetch_rainfall_data"
    assert SALES.validate_args(shown["arguments"]) == {"year": 2000, "quarter": 1}


def test_retry_nudge_tiers_escalate() -> None:
    """Tier 1 is polite, tier 2 direct, tier 3 insistent; all three differ."""
    texts = [retry_nudge(t, TOOLS) for t in (1, 2, 3)]
    assert texts[0].startswith("Please call one of the tools")
    assert texts[1].startswith("Your next reply must be exactly one tool call")
    assert "last attempt" in texts[2]
    assert len(set(texts)) == 3


def test_retry_nudge_tier_above_three_stays_insistent() -> None:
    """Tiers past 3 reuse the insistent text instead of failing."""
    assert retry_nudge(7, TOOLS) == retry_nudge(3, TOOLS)


def test_retry_nudge_tier_zero_is_a_bug() -> None:
    """Tier counting starts at 1."""
    with pytest.raises(ValueError, match=r"^nudge tier starts at 1, got 0$"):
        retry_nudge(0, TOOLS)


def test_retry_nudge_lists_tools_and_shows_an_example() -> None:
    """The retry nudge names every tool and shows a copyable call of an ordinary tool."""
    text = retry_nudge(1, [RESPOND, *TOOLS])
    assert "`fetch_rainfall_data`, `report`" in text
    assert example_call(SALES) in text
    assert "To answer the user, call `respond`" in text


def test_retry_nudge_without_respond_tool_does_not_mention_it() -> None:
    """No respond hint when the respond tool is not offered."""
    assert "respond" not in retry_nudge(1, TOOLS)


@pytest.mark.parametrize(
    ("cause", "phrase"),
    [
        (RetryCause.EMPTY, "Your reply was empty."),
        (RetryCause.PROSE, "Your reply was text, not a tool call."),
        (RetryCause.ECHO, "Do not write <tool_response> blocks"),
        (RetryCause.BROKEN_CALL, "Your tool call could not be parsed"),
        (RetryCause.TRUNCATED, "Your reply was cut off at the length limit."),
    ],
    ids=lambda v: v.name if isinstance(v, RetryCause) else "",
)
def test_retry_nudge_names_the_cause(cause: RetryCause, phrase: str) -> None:
    """The retry nudge opens with what was wrong with the reply."""
    assert retry_nudge(2, TOOLS, cause=cause).startswith(phrase)


def test_unknown_tool_nudge_lists_real_tools_and_suggests_close_name() -> None:
    """An unknown tool gets the real tool list and the closest real name."""
    assert unknown_tool_nudge("reprot", TOOLS) == (
        "[ToolError] Unknown tool `reprot`. Did you mean `report`? Available tools: "
        "`fetch_rainfall_data`, `report`. Call one of them by its exact name."
    )


def test_unknown_tool_nudge_without_close_match_makes_no_guess() -> None:
    """A name unlike any tool gets no suggestion."""
    assert "Did you mean" not in unknown_tool_nudge("weather", TOOLS)


def test_bad_args_nudge_lists_errors_and_the_call_to_send() -> None:
    """The first line names the field; each error is listed msgspec-style; a value the model
    meant is corrected in the call shown, and a field with no inferable value is described."""
    text = bad_args_nudge(
        SALES,
        [
            ArgumentError("$.year", "Expected `int`, got `str`"),
            ArgumentError("$.quarter", "Expected `int`, got `str`"),
        ],
        args={"year": "last year", "quarter": "Q4"},
    )
    assert text == (
        "[ArgumentError] `fetch_rainfall_data` was not run: fix `year`, `quarter`.\n"
        "- Expected `int`, got `str` - at `$.year`\n"
        "- Expected `int`, got `str` - at `$.quarter`\n"
        '- `quarter`: "Q4" is read as 4\n'
        "- `year` needs a real value: an integer >= 2000.\n"
        "Send the call again with a real value for `year`, the rest as shown: "
        '{"name": "fetch_rainfall_data", "arguments": {"quarter": 4}}'
    )


def test_bad_args_nudge_with_every_value_recoverable_shows_a_valid_call() -> None:
    """When every wrong value says what it meant, the call shown passes the schema."""
    text = bad_args_nudge(
        SALES,
        [ArgumentError("$.quarter", "Expected `int`, got `str`")],
        args={"year": 2031, "quarter": "4th"},
    )
    shown = json.loads(text.rsplit("Send this corrected call: ", 1)[1])
    assert SALES.validate_args(shown["arguments"]) == {"year": 2031, "quarter": 4}


def test_bad_args_nudge_needs_errors() -> None:
    """An argument error nudge with nothing to report is a bug."""
    with pytest.raises(ValueError, match=r"^bad_args_nudge needs at least one"):
        bad_args_nudge(SALES, [])


def test_premature_terminal_nudge_names_pending_steps_per_tier() -> None:
    """Every tier carries the [StepEnforcementError] prefix and names the first pending step."""
    for tier in (1, 2, 3):
        text = premature_terminal_nudge(tier, "report", ["fetch_rainfall_data", "analyze"])
        assert text.startswith("[StepEnforcementError] ")
        assert "`fetch_rainfall_data`" in text
    assert "STOP" in premature_terminal_nudge(3, "report", ["fetch_rainfall_data"])


def test_prerequisite_nudge_shows_the_matching_value() -> None:
    """An argument-matched prerequisite is shown with the concrete value it needs."""
    text = prerequisite_nudge(
        1,
        "read_document",
        [Prerequisite(tool="open_document", match_arg="path")],
        args={"path": "a.txt"},
    )
    assert text == (
        '[PrereqError] `read_document` needs `open_document` with path="a.txt" to succeed first. '
        'Please call `open_document` with path="a.txt" on its own, then call `read_document` again.'
    )


def test_prerequisite_nudge_tiers_escalate() -> None:
    """Prerequisite nudges get more insistent with the tier."""
    texts = [prerequisite_nudge(t, "b", [Prerequisite(tool="a")]) for t in (1, 2, 3)]
    assert all(t.startswith("[PrereqError] ") for t in texts)
    assert len(set(texts)) == 3
    assert "MUST" in texts[2]


def test_loop_nudge_names_call_and_repeats() -> None:
    """The loop nudge names the tool, its exact arguments and how often it was repeated."""
    text = loop_nudge("search", {"q": "x"}, 3)
    assert re.match(r'^\[LoopError\] You called `search` with \{"q": "x"\} 3 times in a row;', text)
    assert "ends the task" in text


def test_the_answer_note_names_the_respond_tools_own_field() -> None:
    """A caller's own ``respond`` tool whose field is not ``message`` is described with its
    field: the model copies what the note says into its answer."""
    own = ToolSpec(
        name="respond",
        parameters={
            "type": "object",
            "properties": {"reply_text": {"type": "string"}},
            "required": ["reply_text"],
        },
    )
    note = next_step_text(own, finish=True)
    assert "`reply_text`" in note
    assert "`message`" not in note
    assert "`message`" in next_step_text(respond_spec(), finish=True)


def test_a_correction_never_shows_a_call_its_tool_would_refuse() -> None:
    """With every argument unusable, no example call is shown: it would hold no arguments, a
    call the tool refuses, which the model copies."""
    kiln = ToolSpec(
        name="fire_kiln",
        parameters={
            "type": "object",
            "properties": {"kiln_id": {"type": "string", "description": "The kiln's id."}},
            "required": ["kiln_id"],
        },
    )
    text = bad_args_nudge(
        kiln,
        [ArgumentError("$.kiln_id", "Expected a real value, got a placeholder")],
        args={"kiln_id": "<kiln_id>"},
        unusable=["kiln_id"],
    )
    assert '"arguments": {}' not in text
    assert text.endswith("Send the call again with a real value for `kiln_id`.")
