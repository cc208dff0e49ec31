"""Tool-call assembly by index and the calls-or-text decision shared by every wire format."""

from __future__ import annotations

from forge_rt.core import Message, MessageType, Role, TextResponse, ToolCall, ToolCallDeltaChunk
from forge_rt.wire import ToolCallAssembler
from forge_rt.wire._reply import RawCall, build_result
from forge_rt.wire._request import fold_reasoning


def test_assembler_ignores_ids_and_names_repeated_in_every_delta() -> None:
    """llama-server repeats id and name per delta; the name must not become get_weatherget_weather."""
    asm = ToolCallAssembler()
    chunks = [
        asm.add(0, "call_1", "get_weather", ""),
        asm.add(0, "call_1", "get_weather", '{"city":'),
        asm.add(0, "call_1", "get_weather", ' "Paris"}'),
    ]
    assert [RawCall(call_id="call_1", name="get_weather", arguments='{"city": "Paris"}')] == (
        asm.raw_calls()
    )
    assert [
        ToolCallDeltaChunk(index=0, call_id="call_1", name="get_weather", arguments_delta=""),
        ToolCallDeltaChunk(index=0, arguments_delta='{"city":'),
        ToolCallDeltaChunk(index=0, arguments_delta=' "Paris"}'),
    ] == chunks


def test_assembler_keeps_interleaved_calls_apart_by_index() -> None:
    """Deltas for two calls arriving interleaved end up in their own calls, in index order."""
    asm = ToolCallAssembler()
    asm.add(1, "b", "second", '{"x"')
    asm.add(0, "a", "first", "{}")
    asm.add(1, None, None, ": 1}")
    assert [c.name for c in asm.raw_calls()] == ["first", "second"]
    assert asm.raw_calls()[1].arguments == '{"x": 1}'


def test_assembler_appends_a_name_split_across_deltas() -> None:
    """A server that sends the name in pieces still gets the whole name."""
    asm = ToolCallAssembler()
    asm.add(0, "c", "get_", "")
    asm.add(0, None, "weather", "{}")
    assert asm.raw_calls()[0].name == "get_weather"


def test_assembler_without_index_starts_a_new_call_on_a_new_id() -> None:
    """Index-less deltas extend the last call unless they bring a different id."""
    asm = ToolCallAssembler()
    asm.add(None, "a", "one", "{")
    asm.add(None, None, None, "}")
    asm.add(None, "b", "two", "{}")
    assert [(c.call_id, c.name, c.arguments) for c in asm.raw_calls()] == [
        ("a", "one", "{}"),
        ("b", "two", "{}"),
    ]


def test_build_result_turns_well_formed_calls_into_tool_calls_with_reasoning_on_the_first() -> None:
    """Every call parses: a list of ToolCall, reasoning attached once; empty args are {}."""
    result = build_result(
        "",
        "why",
        [
            RawCall(call_id="a", name="f", arguments=""),
            RawCall(call_id=None, name="g", arguments={"k": 1}),
        ],
    )
    assert isinstance(result, list)
    assert [(c.tool, c.args, c.reasoning) for c in result] == [
        ("f", {}, "why"),
        ("g", {"k": 1}, None),
    ]
    assert result[0].call_id == "a"
    assert result[1].call_id.startswith("call_")


def test_build_result_hands_unparseable_arguments_to_the_rescue_path_as_text() -> None:
    """Arguments that are not a JSON object make the reply text, with every call rendered."""
    result = build_result(
        "I will call it",
        None,
        [RawCall(call_id="a", name="f", arguments='{"x": 1,')],
    )
    assert TextResponse(content='I will call it\n{"name": "f", "arguments": {"x": 1,}') == result


def test_fold_reasoning_attaches_reasoning_to_the_next_assistant_message_only() -> None:
    """A REASONING message is folded into the following assistant turn and never stands alone."""
    call = ToolCall(tool="f", call_id="c1")
    reasoning = Message(role=Role.ASSISTANT, content="think", type=MessageType.REASONING)
    stray = Message(role=Role.ASSISTANT, content="lost", type=MessageType.REASONING)
    history = [
        Message.user("u"),
        reasoning,
        Message.assistant_calls([call]),
        Message.tool_result(call, "r"),
        stray,
        Message.user("u2"),
    ]
    folded = fold_reasoning(history)
    assert [r for _, r in folded] == [None, "think", None, None]
    assert [m.type for m, _ in folded] == [
        MessageType.USER_INPUT,
        MessageType.TOOL_CALL,
        MessageType.TOOL_RESULT,
        MessageType.USER_INPUT,
    ]
