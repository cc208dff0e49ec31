"""The stream gate: what of a reply may reach the client before the reply is validated."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_rt.core import (
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
)
from forge_rt.proxy._gate import GateMode, JsonStringDecoder, StreamGate, match_respond_prefix


def _text(chunks: list[StreamChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDeltaChunk))


def _feed_text(gate: StreamGate, pieces: list[str]) -> list[str]:
    """What the client sees after each piece."""
    return [_text(gate.feed(TextDeltaChunk(p))) for p in pieces]


@given(st.text(), st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=50))
def test_json_string_decoder_matches_json_for_any_split(value: str, sizes: list[int]) -> None:
    """Decoding a JSON string cut at arbitrary points gives exactly what json.loads gives."""
    encoded = json.dumps(value)[1:] + ',"more": 1}'
    decoder = JsonStringDecoder()
    out, rest, i = "", "", 0
    for size in sizes * (len(encoded) // max(1, sum(sizes)) + 2):
        piece = encoded[i : i + size]
        i += size
        decoded, after = decoder.feed(piece)
        out += decoded
        if decoder.closed:
            rest = after + encoded[i:]
            break
    assert decoder.closed
    assert out == value
    assert rest == ',"more": 1}'


def test_json_string_decoder_keeps_an_unknown_escape() -> None:
    """A sloppy escape like \\q keeps its backslash instead of failing the stream."""
    decoder = JsonStringDecoder()
    assert decoder.feed('a\\qb"') == ("a\\qb", "")


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "respond", "arguments": {"message": "',
        '```json\n{"name":"respond","arguments":{"message":"',
        '<tool_call>\n{"name": "respond", "parameters": {"message": "',
        '  {\n  "name" : "respond" ,\n "arguments": { "message": "',
        '[TOOL_CALLS][{"name": "respond", "arguments": {"message": "',
        '[\n  {"name": "respond", "arguments": {"message": "',
        '```json\n[ {"name": "respond", "arguments": {"message": "',
    ],
    ids=["bare", "fenced", "hermes", "spaced", "mistral", "listed", "fenced-list"],
)
def test_respond_prefix_found_in_each_text_form(text: str) -> None:
    """The message string's start is found in every JSON form a respond call is written in."""
    assert match_respond_prefix(text + "Hi", native=False) == len(text)


def test_respond_prefix_waits_then_refuses() -> None:
    """An unfinished opening waits (-1); another tool's call or prose is refused (None)."""
    assert match_respond_prefix('{"name": "resp', native=False) == -1
    assert match_respond_prefix('{"name": "get_weather"', native=False) is None
    assert match_respond_prefix("Sure, here it is", native=False) is None
    assert match_respond_prefix('{"message": "x', native=True) == len('{"message": "')


def test_respond_mode_streams_the_message_of_a_text_call() -> None:
    """Only the decoded message of a respond call written as text reaches the client."""
    gate = StreamGate(GateMode.RESPOND)
    seen = _feed_text(
        gate, ['{"name": "respond", ', '"arguments": {"mess', 'age": "Hel', "lo\\n wor", 'ld"}}']
    )
    assert seen == ["", "", "Hel", "lo\n wor", "ld"]
    assert gate.committed
    assert gate.message_closed


def test_respond_mode_holds_prose_and_other_calls() -> None:
    """Prose and calls of other tools release nothing before validation."""
    prose = StreamGate(GateMode.RESPOND)
    assert _feed_text(prose, ["The weather ", "is nice."]) == ["", ""]
    call = StreamGate(GateMode.RESPOND)
    assert _feed_text(call, ['{"name": "get_weather", "arguments": {"city": "Paris"}}']) == [""]
    assert not prose.committed
    assert not call.committed


def test_respond_mode_streams_native_respond_arguments() -> None:
    """A native respond call's argument deltas stream as decoded text."""
    gate = StreamGate(GateMode.RESPOND)
    out = [
        gate.feed(ToolCallDeltaChunk(index=0, call_id="c1", name="respond")),
        gate.feed(ToolCallDeltaChunk(index=0, arguments_delta='{"message": "Hi')),
        gate.feed(ToolCallDeltaChunk(index=0, arguments_delta=' there"}')),
    ]
    assert [_text(o) for o in out] == ["", "Hi", " there"]


def test_respond_mode_holds_a_native_call_of_another_tool() -> None:
    """A native call of a client tool is never streamed as text."""
    gate = StreamGate(GateMode.RESPOND)
    gate.feed(ToolCallDeltaChunk(index=0, call_id="c1", name="get_weather"))
    assert gate.feed(ToolCallDeltaChunk(index=0, arguments_delta='{"message": "x"}')) == []


def test_reasoning_waits_for_the_first_released_text() -> None:
    """Held reasoning is released just before the first text the client sees."""
    gate = StreamGate(GateMode.RESPOND)
    assert gate.feed(ReasoningDeltaChunk("thinking...")) == []
    out = gate.feed(TextDeltaChunk('{"name": "respond", "arguments": {"message": "ok'))
    assert out == [ReasoningDeltaChunk("thinking..."), TextDeltaChunk("ok")]


def test_prose_mode_streams_until_a_possible_call() -> None:
    """Prose streams; from the first character that may start a call, the rest is held."""
    gate = StreamGate(GateMode.PROSE, tool_names=["get_weather"])
    seen = _feed_text(gate, ["Let me check. ", '{"name": "get_weather"', ', "x": 1}'])
    assert seen == ["Let me check. ", "", ""]
    assert gate.prose_tail == '{"name": "get_weather", "x": 1}'


@pytest.mark.parametrize(
    ("pieces", "released"),
    [
        (["Use ", "``", "`python\nx"], "Use "),
        (["Now ", "get_wea", "ther(city='Paris')"], "Now "),
        (["See <tool", "_call>{}"], "See "),
        (["Costs [", "{", "}]"], "Costs "),
    ],
    ids=["fence", "python-call", "xml-tag", "json-array"],
)
def test_prose_mode_holds_a_marker_split_across_deltas(pieces: list[str], released: str) -> None:
    """A call marker cut between two deltas is held until it is known."""
    gate = StreamGate(GateMode.PROSE, tool_names=["get_weather"])
    assert "".join(_feed_text(gate, pieces)) == released


def test_prose_mode_releases_a_held_word_once_it_is_not_a_call() -> None:
    """A trailing word that may name a tool is held, and released once no ``(`` follows."""
    gate = StreamGate(GateMode.PROSE, tool_names=["get_weather"])
    assert _feed_text(gate, ["The get_wea", "ther ", "tool says sun."]) == [
        "The ",
        "",
        "get_weather tool says sun.",
    ]
    assert gate.release_prose_tail() == []


def test_pass_mode_streams_everything_and_hold_mode_nothing() -> None:
    """Without guardrails every delta streams; when a call is required nothing does."""
    delta = ToolCallDeltaChunk(index=0, call_id="c", name="f", arguments_delta="{}")
    passing = StreamGate(GateMode.PASS)
    assert passing.feed(TextDeltaChunk("a")) == [TextDeltaChunk("a")]
    assert passing.feed(delta) == [delta]
    holding = StreamGate(GateMode.HOLD)
    assert holding.feed(TextDeltaChunk("a")) == []
    assert holding.feed(delta) == []


def test_restart_after_reset_skips_what_the_client_already_has() -> None:
    """A restarted attempt that regenerates the same text releases only what is new."""
    gate = StreamGate(GateMode.PASS)
    assert _feed_text(gate, ["one ", "two "]) == ["one ", "two "]
    assert gate.feed(ResetChunk("preempted")) == []
    assert _feed_text(gate, ["one ", "tw", "o three"]) == ["", "", "three"]
    assert gate.released_text == "one two three"
    assert not gate.diverged


def test_restart_that_diverges_is_flagged_and_releases_nothing_more() -> None:
    """A restarted attempt that writes something else is flagged instead of spliced in."""
    gate = StreamGate(GateMode.PASS)
    _feed_text(gate, ["one ", "two "])
    gate.feed(ResetChunk("preempted"))
    assert _feed_text(gate, ["uno ", "dos"]) == ["", ""]
    assert gate.diverged
    assert gate.released_text == "one two "
