"""The Anthropic Messages wire format, both directions, as pure functions."""

from __future__ import annotations

import anthropic.types as at
import msgspec
import pydantic
import pytest
from clients_support import WEATHER

from forge_rt.core import (
    FinalChunk,
    InferenceRequest,
    JsonSchemaConstraint,
    LLMResponse,
    Message,
    MessageType,
    ReasoningDeltaChunk,
    Role,
    Sampling,
    TextDeltaChunk,
    TextResponse,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
    Usage,
)
from forge_rt.errors import BackendError, FaultKind, UnsupportedRequestError
from forge_rt.wire import (
    UNANSWERED_CALL_TEXT,
    AnthropicStreamDecoder,
    AnthropicStreamEncoder,
    SSEDecoder,
    anthropic_messages_from_wire,
    anthropic_messages_to_wire,
    anthropic_request_from_wire,
    anthropic_request_to_wire,
    anthropic_response_from_wire,
    anthropic_response_to_wire,
)

A = ToolCall(tool="get_weather", args={"city": "Paris"}, call_id="toolu_a")
B = ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="toolu_b")


def test_system_is_extracted_and_results_pair_with_their_calls() -> None:
    """System turns become the system field; results join one user turn, ahead of its text."""
    history = [
        Message.system("be brief"),
        Message.user("weather?"),
        Message(role=Role.ASSISTANT, content="thinking", type=MessageType.REASONING),
        Message.assistant_calls([A, B], content="checking"),
        Message.tool_result(A, "sunny"),
        Message.tool_result(B, "rain"),
        Message(role=Role.USER, content="also summarise", type=MessageType.RETRY_NUDGE),
        Message(role=Role.SYSTEM, content="context is short", type=MessageType.CONTEXT_WARNING),
    ]
    system, messages = anthropic_messages_to_wire(history)
    assert system == "be brief\n\ncontext is short"
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "checking"},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "rain"},
                {"type": "text", "text": "also summarise"},
            ],
        },
    ]


def test_an_unanswered_call_gets_an_explicit_error_result() -> None:
    """A tool_use the history never answered is answered with an is_error result."""
    _, messages = anthropic_messages_to_wire(
        [Message.user("go"), Message.assistant_calls([A, B]), Message.tool_result(A, "ok")]
    )
    assert messages[-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": UNANSWERED_CALL_TEXT,
            "is_error": True,
        },
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "ok"},
    ]


def test_a_trailing_unanswered_call_gets_a_user_turn_with_the_error_result() -> None:
    """A history ending in calls still ends on a user turn the API accepts."""
    _, messages = anthropic_messages_to_wire([Message.user("go"), Message.assistant_calls([A])])
    assert messages[-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_a",
                "content": UNANSWERED_CALL_TEXT,
                "is_error": True,
            }
        ],
    }


def test_a_result_without_its_call_becomes_text_naming_the_call() -> None:
    """After compaction dropped a call, its orphaned result is kept as plain text."""
    _, messages = anthropic_messages_to_wire([Message.user("go"), Message.tool_result(A, "sunny")])
    assert messages[0]["content"] == [
        {"type": "text", "text": "go"},
        {"type": "text", "text": "Result of a tool (call toolu_a):\nsunny"},
    ]


def test_request_to_wire_requires_max_tokens_and_refuses_what_the_api_lacks() -> None:
    """max_tokens falls back to the client default; min_p or a schema constraint are refused."""
    request = InferenceRequest(
        messages=(Message.user("hi"),),
        tools=(WEATHER,),
        tool_choice="required",
        sampling=Sampling(temperature=0.3, stop=("x",)),
    )
    body = anthropic_request_to_wire(request, model="claude", stream=False, default_max_tokens=99)
    assert (
        body["max_tokens"],
        body["tool_choice"],
        body["stop_sequences"],
        body["temperature"],
    ) == (99, {"type": "any"}, ["x"], 0.3)
    assert "input_schema" in body["tools"][0]
    with pytest.raises(UnsupportedRequestError, match=r"^the Anthropic Messages API has no min_p"):
        anthropic_request_to_wire(
            msgspec.structs.replace(request, sampling=Sampling(min_p=0.1)),
            model="c",
            stream=False,
            default_max_tokens=1,
        )
    with pytest.raises(
        UnsupportedRequestError, match=r"takes no JSON-schema or grammar constraint"
    ):
        anthropic_request_to_wire(
            msgspec.structs.replace(request, constraint=JsonSchemaConstraint(schema={})),
            model="c",
            stream=False,
            default_max_tokens=1,
        )


def test_response_from_wire_reads_thinking_calls_and_cache_usage() -> None:
    """Thinking is reasoning; tool_use blocks are calls; prompt tokens include cache reads."""
    body = {
        "type": "message",
        "model": "claude",
        "content": [
            {"type": "thinking", "thinking": "plan", "signature": "s"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 10},
    }
    response = anthropic_response_from_wire(msgspec.json.encode(body))
    assert [
        ToolCall(tool="get_weather", args={"city": "Oslo"}, call_id="toolu_1", reasoning="plan")
    ] == response.result
    assert Usage(prompt_tokens=15, completion_tokens=2, cached_tokens=10) == response.usage


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
            FaultKind.SERVER_ERROR,
        ),
        (b'{"object": "chat.completion", "choices": []}', FaultKind.MALFORMED_RESPONSE),
        (b"not json", FaultKind.MALFORMED_RESPONSE),
    ],
    ids=["error-object", "openai-shape", "not-json"],
)
def test_response_from_wire_rejects_bad_shapes(body: bytes, kind: FaultKind) -> None:
    """An error object or a foreign shape is a typed BackendError."""
    with pytest.raises(BackendError) as info:
        anthropic_response_from_wire(body)
    assert kind is info.value.kind


def test_inverse_request_reads_blocks_into_messages() -> None:
    """System blocks, thinking, tool_use and tool_result come back as forge_rt messages."""
    body = {
        "model": "claude",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "need a tool", "signature": "x"},
                    {
                        "type": "tool_use",
                        "id": "toolu_a",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_a",
                        "content": [{"type": "text", "text": "sunny"}],
                    },
                    {"type": "text", "text": "thanks"},
                ],
            },
        ],
        "tools": [
            {"name": "get_weather", "description": "d", "input_schema": WEATHER.json_schema()}
        ],
        "tool_choice": {"type": "tool", "name": "get_weather"},
        "stream": True,
        "top_k": 3,
    }
    wire = anthropic_request_from_wire(msgspec.json.encode(body))
    assert [
        Message.system("be brief"),
        Message.user("weather?"),
        Message(role=Role.ASSISTANT, content="need a tool", type=MessageType.REASONING),
        Message.assistant_calls([A]),
        Message.tool_result(A, "sunny"),
        Message.user("thanks"),
    ] == list(wire.request.messages)
    assert ("claude", True, "get_weather", Sampling(top_k=3, max_tokens=100)) == (
        wire.model,
        wire.stream,
        wire.request.tool_choice,
        wire.request.sampling,
    )


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        (
            [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            r"a 'image' block is not supported in a user message - at `\$\.messages\[0\]\.content\[0\]\.type`",
        ),
        ([{"role": "system", "content": "x"}], r"role 'system' is not user or assistant"),
        (
            [{"role": "user", "content": [{"type": "tool_result"}]}],
            r"a tool_result block needs tool_use_id",
        ),
    ],
    ids=["image", "system-role", "result-without-id"],
)
def test_inverse_messages_say_what_is_wrong_and_where(
    messages: list[dict[str, object]], match: str
) -> None:
    """Unsupported input is a ValidationError with its JSON path."""
    with pytest.raises(msgspec.ValidationError, match=match):
        anthropic_messages_from_wire(messages)


def test_response_to_wire_is_a_valid_anthropic_message() -> None:
    """The body validates against the official SDK's Message type."""
    response = LLMResponse(
        result=[
            ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="toolu_1", reasoning="r")
        ],
        usage=Usage(prompt_tokens=9, completion_tokens=2, cached_tokens=4),
    )
    message = at.Message.model_validate(
        anthropic_response_to_wire(response, model="m", message_id="msg_1")
    )
    assert (
        message.stop_reason,
        [b.type for b in message.content],
        message.usage.input_tokens,
        message.usage.cache_read_input_tokens,
    ) == ("tool_use", ["thinking", "tool_use"], 5, 4)
    text = anthropic_response_to_wire(
        LLMResponse(result=TextResponse(content="hi"), finish_reason="length"),
        model="m",
        message_id="x",
    )
    assert (
        text["stop_reason"],
        text["content"],
    ) == ("max_tokens", [{"type": "text", "text": "hi"}])


def test_stream_encoder_output_is_valid_and_decodes_back() -> None:
    """Every event validates against the SDK; decoding the stream gives the same reply."""
    call = ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="toolu_9")
    final = LLMResponse(result=[call], usage=Usage(completion_tokens=4))
    encoder = AnthropicStreamEncoder(model="m", message_id="msg_1")
    data = encoder.encode(ReasoningDeltaChunk("hm"))
    data += encoder.encode(TextDeltaChunk("Checking. "))
    data += encoder.encode(
        ToolCallDeltaChunk(
            index=0, call_id="toolu_9", name="get_weather", arguments_delta='{"city"'
        )
    )
    data += encoder.encode(ToolCallDeltaChunk(index=0, arguments_delta=':"Rome"}'))
    data += encoder.encode(FinalChunk(final))
    sse = SSEDecoder()
    events = [e for line in data.decode().split("\n") if (e := sse.feed_line(line))]
    adapter = pydantic.TypeAdapter(at.RawMessageStreamEvent)
    for event in events:
        assert event.event == adapter.validate_json(event.data).type
    decoder = AnthropicStreamDecoder()
    for event in events:
        decoder.feed(event.data)
    assert decoder.complete
    _, response = decoder.finish(Timings(total_s=0.0))
    assert (
        [ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="toolu_9", reasoning="hm")],
        "Checking. ",
        "tool_use",
        4,
    ) == (
        response.result,
        response.raw_text,
        response.finish_reason,
        response.usage.completion_tokens,
    )


def test_stream_decoder_rejects_json_for_a_block_that_is_not_a_tool_call() -> None:
    """An input_json_delta aimed at a text block is a broken stream, not silently dropped."""
    from forge_rt.errors import StreamError

    decoder = AnthropicStreamDecoder()
    decoder.feed(
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}'
    )
    with pytest.raises(StreamError, match=r"content block 0, which is not an open tool_use block"):
        decoder.feed(
            '{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}'
        )
