"""Guardrail text is found wherever a reply carries it, and the stream gate never releases it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_rt.core import ArgumentError, Prerequisite, TextDeltaChunk, ToolCallDeltaChunk, ToolSpec
from forge_rt.guardrails import (
    RetryCause,
    bad_args_nudge,
    held_back_nudge,
    loop_nudge,
    premature_terminal_nudge,
    prerequisite_nudge,
    respond_spec,
    retry_nudge,
    unknown_tool_nudge,
)
from forge_rt.guardrails._nudges import (
    markup_answer_nudge,
    repeat_note,
    resolution_text,
    superseded_answer_nudge,
    tool_error_text,
    uncovered_item_nudge,
    ungrounded_answer_nudge,
)
from forge_rt.proxy._gate import GateMode, StreamGate
from forge_rt.proxy._leaks import GUARDRAIL_MARKERS, LeakFilter, cut, find_marker, marked_argument
from forge_rt.wire import UNANSWERED_CALL_TEXT

WEATHER = ToolSpec(
    name="get_weather",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TOOLS = [WEATHER, respond_spec()]


def _corrections() -> dict[str, str]:
    """Every text the guardrails and the codecs write into a history the model reads."""
    texts = {
        f"retry-{cause.name}-{tier}": retry_nudge(tier, TOOLS, cause=cause)
        for cause in RetryCause
        for tier in (1, 2, 3)
    }
    texts |= {
        f"premature-{tier}": premature_terminal_nudge(tier, "respond", ["get_weather"])
        for tier in (1, 2, 3)
    }
    texts |= {
        f"prereq-{tier}": prerequisite_nudge(tier, "respond", [Prerequisite(tool="get_weather")])
        for tier in (1, 2, 3)
    }
    texts |= {
        "unknown-tool": unknown_tool_nudge("weather", TOOLS),
        "bad-args": bad_args_nudge(WEATHER, [ArgumentError("$.city", "Expected `str`")]),
        "held-back": held_back_nudge("get_weather", ["respond"]),
        "loop": loop_nudge("get_weather", {"city": "Paris"}, 3),
        "repeat": repeat_note("get_weather", ""),
        "tool-error": tool_error_text("get_weather", RuntimeError("down")),
        "resolution": resolution_text("get_weather", RuntimeError("use Paris")),
        "ungrounded": ungrounded_answer_nudge("Weather in Rome: 24C"),
        "markup-answer": markup_answer_nudge("Weather in Rome: 24C"),
        "superseded": superseded_answer_nudge(
            ["get_weather"],
            ["Weather in Rome: 24C"],
            respond_spec(),
            {"message": "x y z"},
            "message",
        ),
        "uncovered": uncovered_item_nudge(
            "your request", "Oslo", "Cairo", "get_weather", WEATHER, {"city": "Cairo"}
        ),
        "unanswered": UNANSWERED_CALL_TEXT,
        "tool-response": "<tool_response>21 C</tool_response>",
    }
    return texts


CORRECTIONS = _corrections()


@pytest.mark.parametrize("name", sorted(CORRECTIONS))
def test_every_correction_carries_a_marker(name: str) -> None:
    """Each correction the model may copy back is recognised as guardrail text."""
    assert find_marker(CORRECTIONS[name]) is not None


@pytest.mark.parametrize(
    "answer",
    [
        "It is 21 C and clear in Paris.",
        "Please note: the forecast says rain. Your reply was kind.",
        "Now, the weather: [sunny] with a [Note] of caution.",
        "Call `get_weather` with a city; see <tool> docs.",
    ],
)
def test_ordinary_answers_carry_no_marker(answer: str) -> None:
    """Answers that merely resemble corrections are not taken for them."""
    assert cut(answer) == (answer, False)


def test_cut_keeps_what_comes_before_the_first_marker() -> None:
    """The text before the first marker is kept; the marker and all after it are not."""
    text = "It is 21 C. [Note] You already called `get_weather` ... [LoopError] x"
    assert cut(text) == ("It is 21 C. ", True)


@given(
    st.lists(
        st.sampled_from(["It is ", "21 C", ". ", "[", "Note", "] You ", "already called", "P"])
        | st.sampled_from(GUARDRAIL_MARKERS).map(lambda m: m[: len(m) // 2]),
        max_size=12,
    )
)
def test_the_filter_releases_exactly_what_cut_keeps(pieces: list[str]) -> None:
    """Fed in any pieces, the filter releases the same text as cutting the whole."""
    leak = LeakFilter()
    released = "".join(leak.feed(p) for p in pieces) + leak.flush()
    assert released == cut("".join(pieces))[0]


def test_a_marked_argument_is_found_by_its_path() -> None:
    """The path of the first argument string holding guardrail text is reported."""
    args = {"city": "Paris", "notes": ["ok", {"text": "[NotExecuted] `x` was not run"}]}
    assert marked_argument(args) == "$.notes[1].text"
    assert marked_argument({"city": "Paris", "n": 3}) is None


def _texts(gate: StreamGate, chunks: list[TextDeltaChunk | ToolCallDeltaChunk]) -> str:
    out = [c for chunk in chunks for c in gate.feed(chunk)]
    return "".join(c.text for c in out if isinstance(c, TextDeltaChunk))


def test_respond_mode_stops_streaming_at_guardrail_text() -> None:
    """A streamed respond message ends where copied guardrail text begins."""
    gate = StreamGate(GateMode.RESPOND)
    pieces = ['{"name": "respond", "arguments": {"message": "It is 21 C. [No', "te] You alr"]
    pieces += ['eady called `get_weather`"}}']
    assert _texts(gate, [TextDeltaChunk(p) for p in pieces]) == "It is 21 C. "
    assert gate.attempt_text == "It is 21 C. "


def test_respond_mode_releases_a_held_word_at_the_end_of_the_message() -> None:
    """A word that could start a marker is released when the message closes."""
    gate = StreamGate(GateMode.RESPOND)
    deltas = [
        ToolCallDeltaChunk(index=0, call_id="c1", name="respond"),
        ToolCallDeltaChunk(index=0, arguments_delta='{"message": "Thanks. Please'),
        ToolCallDeltaChunk(index=0, arguments_delta='"}'),
    ]
    assert _texts(gate, deltas) == "Thanks. Please"


def test_prose_mode_holds_guardrail_text_from_its_first_character() -> None:
    """Prose that turns into an echoed nudge is released only up to the nudge."""
    gate = StreamGate(GateMode.PROSE, tool_names=["get_weather"])
    pieces = ["Sunny. ", "Please call one ", "of the tools: `get_weather`"]
    assert _texts(gate, [TextDeltaChunk(p) for p in pieces]) == "Sunny. "
    assert [c.text for c in gate.release_prose_tail() if isinstance(c, TextDeltaChunk)] == []
