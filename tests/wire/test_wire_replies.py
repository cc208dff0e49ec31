"""A server writing its answer: prose that came with tool calls is a parameter, not a patch."""

from __future__ import annotations

import anthropic.types as at
import openai.types.chat as oa

from forge_rt.core import LLMResponse, TextResponse, ToolCall
from forge_rt.wire import anthropic_response_to_wire, openai_response_to_wire

CALL = ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="c1", reasoning="need it")
CALLS = LLMResponse(result=[CALL])


def test_openai_prose_with_calls_is_the_message_content() -> None:
    """The completion carries the prose as ``content`` beside ``tool_calls``."""
    body = openai_response_to_wire(
        CALLS, model="m", response_id="chatcmpl-1", created=1, text_with_calls="Checking."
    )
    message = oa.ChatCompletion.model_validate(body).choices[0].message
    assert (message.content, [c.id for c in message.tool_calls or ()]) == ("Checking.", ["c1"])


def test_openai_calls_without_prose_have_null_content() -> None:
    """No prose means ``content: null``, as the API writes a calls-only reply."""
    body = openai_response_to_wire(CALLS, model="m", response_id="chatcmpl-1", created=1)
    assert body["choices"][0]["message"]["content"] is None


def test_anthropic_prose_with_calls_is_a_text_block_before_them() -> None:
    """The reply's blocks are thinking, then the prose, then the tool_use blocks."""
    body = anthropic_response_to_wire(
        CALLS, model="m", message_id="msg_1", text_with_calls="Checking."
    )
    message = at.Message.model_validate(body)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[1].text == "Checking."  # type: ignore[union-attr]


def test_prose_with_calls_leaves_a_text_reply_alone() -> None:
    """A text reply is its own content whatever ``text_with_calls`` says (it has no calls)."""
    text = LLMResponse(result=TextResponse(content="hi"))
    openai = openai_response_to_wire(
        text, model="m", response_id="x", created=1, text_with_calls="no"
    )
    anthropic = anthropic_response_to_wire(text, model="m", message_id="y", text_with_calls="no")
    assert (openai["choices"][0]["message"]["content"], anthropic["content"]) == (
        "hi",
        [{"type": "text", "text": "hi"}],
    )
