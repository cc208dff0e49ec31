"""Messages and tool calls: construction invariants and named constructors."""

import pytest

from forge_rt.core import Message, MessageType, Role, TextResponse, ToolCall


def test_tool_call_gets_unique_ids() -> None:
    """Two calls built without ids get distinct, non-empty ids."""
    a, b = ToolCall(tool="t"), ToolCall(tool="t")
    assert a.call_id != b.call_id
    assert a.call_id.startswith("call_")


def test_tool_call_rejects_empty_name() -> None:
    """A tool call must name a tool."""
    with pytest.raises(ValueError, match=r"^ToolCall.tool must be a non-empty tool name$"):
        ToolCall(tool="")


def test_role_must_fit_type() -> None:
    """A tool_result spoken by the user is rejected with a message naming the allowed role."""
    with pytest.raises(ValueError, match=r"^a tool_result message must have role tool, got user$"):
        Message(role=Role.USER, content="x", type=MessageType.TOOL_RESULT, tool_call_id="c")


def test_tool_message_needs_call_id() -> None:
    """A tool message must say which call it answers."""
    with pytest.raises(ValueError, match="tool_call_id"):
        Message(role=Role.TOOL, content="x", type=MessageType.STEP_NUDGE)


def test_only_assistant_carries_tool_calls() -> None:
    """tool_calls on a user message is rejected."""
    with pytest.raises(ValueError, match="only assistant"):
        Message(
            role=Role.USER,
            content="",
            type=MessageType.USER_INPUT,
            tool_calls=(ToolCall(tool="t"),),
        )


def test_tool_call_message_needs_calls() -> None:
    """A TOOL_CALL message without calls is rejected."""
    with pytest.raises(ValueError, match="at least one ToolCall"):
        Message(role=Role.ASSISTANT, content="", type=MessageType.TOOL_CALL)


def test_named_constructors_pair_result_with_call() -> None:
    """tool_result() copies the call's id and tool name."""
    call = ToolCall(tool="get_weather", args={"city": "Paris"})
    asked = Message.assistant_calls([call])
    answer = Message.tool_result(call, "sunny")
    assert asked.tool_calls == (call,)
    assert (answer.tool_call_id, answer.tool_name, answer.type) == (
        call.call_id,
        "get_weather",
        MessageType.TOOL_RESULT,
    )


def test_with_content_resets_estimate() -> None:
    """with_content() replaces the text and forgets a stale token estimate."""
    msg = Message(role=Role.USER, content="long", type=MessageType.USER_INPUT, token_estimate=9)
    short = msg.with_content("s")
    assert (short.content, short.token_estimate, short.type) == ("s", None, MessageType.USER_INPUT)


def test_text_response_holds_reasoning() -> None:
    """A text response keeps its split-off reasoning beside the content."""
    assert TextResponse(content="hi", reasoning="think").reasoning == "think"
