"""The OpenAI chat-completions wire format, both directions, as pure functions."""

from __future__ import annotations

import msgspec
import openai.types.chat as oa
import pytest
from clients_support import WEATHER

from forge_rt.core import (
    FinalChunk,
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    LLMResponse,
    Message,
    MessageType,
    ResetChunk,
    Role,
    Sampling,
    TextDeltaChunk,
    TextResponse,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
    Usage,
)
from forge_rt.errors import BackendError, FaultKind, StreamError, UnsupportedRequestError
from forge_rt.wire import (
    OpenAIStreamDecoder,
    OpenAIStreamEncoder,
    SSEDecoder,
    openai_messages_from_wire,
    openai_messages_to_wire,
    openai_request_from_wire,
    openai_request_to_wire,
    openai_response_from_wire,
    openai_response_to_wire,
)

CALL = ToolCall(tool="get_weather", args={"city": "Paris"}, call_id="call_1")
REASONING = Message(role=Role.ASSISTANT, content="need weather", type=MessageType.REASONING)
HISTORY = (
    Message.system("be brief"),
    Message.user("Weather in Paris?"),
    REASONING,
    Message.assistant_calls([CALL]),
    Message.tool_result(CALL, "sunny", transient=True, step_index=2),
    Message.assistant_text("It is sunny."),
)


def _chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> str:
    body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return msgspec.json.encode(body).decode()


def test_messages_to_wire_folds_reasoning_and_strips_metadata() -> None:
    """Compaction tags, transient flags and step indices never reach the wire."""
    assert openai_messages_to_wire(HISTORY) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
            "reasoning_content": "need weather",
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is sunny."},
    ]


def test_messages_to_wire_without_replay_drops_reasoning() -> None:
    """With ``reasoning_replay=False`` no message carries ``reasoning_content``."""
    wire = openai_messages_to_wire(HISTORY, reasoning_replay=False)
    assert all("reasoning_content" not in m for m in wire)
    assert len(wire) == 5


def test_request_to_wire_maps_sampling_per_dialect() -> None:
    """llama.cpp says repeat_penalty, vLLM repetition_penalty; stop becomes a list."""
    request = InferenceRequest(
        messages=HISTORY[:2],
        sampling=Sampling(
            temperature=0.7, top_k=20, repeat_penalty=1.05, stop=("x",), max_tokens=9
        ),
    )
    llama = openai_request_to_wire(request, model=None, stream=False, dialect="llamacpp")
    vllm = openai_request_to_wire(request, model="m", stream=True, dialect="vllm")
    assert {
        k: llama[k] for k in ("temperature", "top_k", "repeat_penalty", "stop", "max_tokens")
    } == {
        "temperature": 0.7,
        "top_k": 20,
        "repeat_penalty": 1.05,
        "stop": ["x"],
        "max_tokens": 9,
    }
    assert "model" not in llama
    assert (
        vllm["repetition_penalty"],
        vllm["model"],
        vllm["stream_options"],
    ) == (1.05, "m", {"include_usage": True})


def test_request_to_wire_refuses_fields_the_openai_api_lacks() -> None:
    """Strict OpenAI dialect: a top_k would be a 400 upstream, so it is refused here."""
    request = InferenceRequest(messages=HISTORY[:2], sampling=Sampling(top_k=20))
    with pytest.raises(
        UnsupportedRequestError, match=r"^sampling field top_k=20 is not part of the OpenAI API"
    ):
        openai_request_to_wire(request, model="m", stream=False)


def test_request_to_wire_sends_constraints_tools_and_choice() -> None:
    """Schema -> response_format; grammar only on llama.cpp; a named choice is an object."""
    schema = {"type": "object"}
    request = InferenceRequest(
        messages=HISTORY[:2],
        tools=(WEATHER,),
        tool_choice="get_weather",
        constraint=JsonSchemaConstraint(schema=schema),
    )
    body = openai_request_to_wire(request, model="m", stream=False)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert schema == body["response_format"]["json_schema"]["schema"]
    assert body["tools"][0]["function"]["name"] == "get_weather"
    grammar = InferenceRequest(
        messages=HISTORY[:2], constraint=GrammarConstraint(gbnf='root ::= "a"')
    )
    assert (
        openai_request_to_wire(grammar, model=None, stream=False, dialect="llamacpp")["grammar"]
        == 'root ::= "a"'
    )
    with pytest.raises(UnsupportedRequestError, match=r"needs llama-server"):
        openai_request_to_wire(grammar, model=None, stream=False, dialect="vllm")


def test_request_to_wire_sends_prefill_only_to_llamacpp() -> None:
    """A prefill is a trailing assistant message; other dialects refuse it."""
    request = InferenceRequest(messages=HISTORY[:2], assistant_prefill='{"name": "')
    body = openai_request_to_wire(request, model=None, stream=False, dialect="llamacpp")
    assert body["messages"][-1] == {"role": "assistant", "content": '{"name": "'}
    with pytest.raises(UnsupportedRequestError, match=r"assistant_prefill needs a backend"):
        openai_request_to_wire(request, model=None, stream=False)


def test_response_from_wire_reads_calls_reasoning_and_usage() -> None:
    """Structured calls, reasoning_content and llama.cpp's cache_n all land in the response."""
    body = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "thinking",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
        "timings": {"cache_n": 7},
    }
    response = openai_response_from_wire(msgspec.json.encode(body))
    assert [
        ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="c", reasoning="thinking")
    ] == response.result
    assert (Usage(prompt_tokens=10, completion_tokens=3, cached_tokens=7), "tool_calls", "m") == (
        response.usage,
        response.finish_reason,
        response.model,
    )


def test_response_from_wire_splits_think_tags_and_keeps_raw_text() -> None:
    """Think tags move to reasoning; ``raw_text`` keeps exactly what the model sent."""
    raw = '<think>hmm</think>\n{"name": "x"}'
    body = {
        "choices": [{"message": {"role": "assistant", "content": raw}, "finish_reason": "stop"}]
    }
    response = openai_response_from_wire(msgspec.json.encode(body))
    assert TextResponse(content='{"name": "x"}', reasoning="hmm") == response.result
    assert raw == response.raw_text


@pytest.mark.parametrize(
    ("body", "kind", "match"),
    [
        (
            b"<html>bad gateway</html>",
            FaultKind.MALFORMED_RESPONSE,
            r"not a valid reply: JSON is malformed",
        ),
        (b'{"object": "list"}', FaultKind.MALFORMED_RESPONSE, r"it has no choices\[0\]\.message"),
        (
            b'{"choices": [{"message": {"content": 5}}]}',
            FaultKind.MALFORMED_RESPONSE,
            r"Expected `str \| array \| null`, got `int`",
        ),
        (
            b'{"error": {"code": 500, "message": "oom", "type": "server_error"}}',
            FaultKind.SERVER_ERROR,
            r"reported an error inside its reply \(code 500\)",
        ),
    ],
    ids=["not-json", "no-choices", "wrong-type", "error-object"],
)
def test_response_from_wire_rejects_bad_shapes_with_typed_errors(
    body: bytes, kind: FaultKind, match: str
) -> None:
    """Every bad body becomes a BackendError of the right kind, keeping the body off the message."""
    with pytest.raises(BackendError, match=match) as info:
        openai_response_from_wire(body, url="http://x/v1/chat/completions")
    expected_body = "oom" if kind is FaultKind.SERVER_ERROR else body.decode()
    assert (kind, expected_body) == (info.value.kind, info.value.body)
    assert expected_body not in str(info.value)


def test_stream_decoder_assembles_llama_server_deltas_by_index() -> None:
    """Repeated ids and names per delta (llama.cpp) give one clean call and clean deltas."""
    decoder = OpenAIStreamDecoder()
    chunks = []
    for args in ["", '{"city"', ': "Oslo"}']:
        delta = {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": args},
                }
            ]
        }
        chunks += decoder.feed(_chunk(delta))
    chunks += decoder.feed(
        _chunk({}, "tool_calls", usage={"prompt_tokens": 4, "completion_tokens": 2})
    )
    chunks += decoder.feed("[DONE]")
    assert decoder.complete
    _, response = decoder.finish(Timings(total_s=0.0))
    assert [ToolCall(tool="get_weather", args={"city": "Oslo"}, call_id="c1")] == response.result
    assert [c.name for c in chunks if isinstance(c, ToolCallDeltaChunk)] == [
        "get_weather",
        None,
        None,
    ]


def test_stream_decoder_reports_a_broken_chunk_with_the_text_so_far() -> None:
    """A chunk that is not JSON raises StreamError carrying the partial text."""
    decoder = OpenAIStreamDecoder()
    decoder.feed(_chunk({"content": "Hel"}))
    with pytest.raises(StreamError, match=r"not a valid chat-completion chunk") as info:
        decoder.feed('{"choices": [{"delta": {"content": "lo')
    assert info.value.partial == "Hel"


def test_stream_decoder_raises_an_in_band_error_as_server_error() -> None:
    """An error object inside the stream is the server's error; retry-safe only before output."""
    decoder = OpenAIStreamDecoder()
    with pytest.raises(BackendError) as info:
        decoder.feed('{"error": {"code": 500, "message": "kv cache full"}}', delivered=True)
    assert (
        info.value.kind,
        info.value.retry_safe,
        info.value.body,
    ) == (FaultKind.SERVER_ERROR, False, "kv cache full")


def test_inverse_request_round_trips_a_full_history() -> None:
    """What the clients send, the proxy reads back into the same messages, tools and settings."""
    request = InferenceRequest(
        messages=tuple(m for m in HISTORY),
        tools=(WEATHER,),
        tool_choice="required",
        sampling=Sampling(
            temperature=0.2, top_k=5, repeat_penalty=1.1, max_tokens=50, stop=("END",)
        ),
        constraint=JsonSchemaConstraint(schema={"type": "object"}),
    )
    body = openai_request_to_wire(request, model="m", stream=True, dialect="llamacpp")
    wire = openai_request_from_wire(msgspec.json.encode(body))
    expected = [msgspec.structs.replace(m, transient=False, step_index=None) for m in HISTORY]
    assert (wire.model, wire.stream, wire.include_usage) == ("m", True, True)
    assert expected == list(wire.request.messages)
    assert (request.sampling, "required", request.constraint) == (
        wire.request.sampling,
        wire.request.tool_choice,
        wire.request.constraint,
    )
    assert [WEATHER.json_schema()] == [t.json_schema() for t in wire.request.tools]


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        (
            [{"role": "tool", "content": "x"}],
            r"a tool message must name the call it answers - at `\$\.messages\[0\]\.tool_call_id`",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url"}]}],
            r"content parts of type 'image_url' are not supported \(text only\) - at `\$\.messages\[0\]\.content\[0\]\.type`",
        ),
        ([{"role": "function", "content": "x"}], r"role 'function' is not supported"),
        (
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}],
                }
            ],
            r"must be a JSON object .* - at `\$\.messages\[0\]\.tool_calls\[0\]\.function\.arguments`",
        ),
    ],
    ids=["tool-without-id", "image", "function-role", "array-arguments"],
)
def test_inverse_messages_say_what_is_wrong_and_where(
    messages: list[dict[str, object]], match: str
) -> None:
    """Unsupported or broken input is a ValidationError with a JSON path, ready for a 400."""
    with pytest.raises(msgspec.ValidationError, match=match):
        openai_messages_from_wire(messages)


def test_inverse_tool_message_takes_its_name_from_the_call() -> None:
    """A tool result learns its tool's name from the assistant call it answers."""
    messages = openai_messages_from_wire(
        [
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "a", "content": "ok"},
        ]
    )
    assert messages[1].tool_name == "f"


def test_response_to_wire_is_a_valid_openai_completion() -> None:
    """The body validates against the official SDK's type, with calls and usage in place."""
    response = LLMResponse(
        result=[ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="c", reasoning="r")],
        usage=Usage(prompt_tokens=5, completion_tokens=2, cached_tokens=1),
    )
    body = openai_response_to_wire(response, model="m", response_id="chatcmpl-1", created=1)
    parsed = oa.ChatCompletion.model_validate(body)
    assert (
        parsed.choices[0].finish_reason,
        parsed.choices[0].message.tool_calls[0].function.arguments,  # type: ignore[index,union-attr]
        parsed.usage.total_tokens,  # type: ignore[union-attr]
    ) == ("tool_calls", '{"city":"Rome"}', 7)
    text = LLMResponse(result=TextResponse(content="hi"), finish_reason="length")
    body = openai_response_to_wire(text, model="m", response_id="x", created=1)
    assert (
        body["choices"][0]["message"]["content"],
        body["choices"][0]["finish_reason"],
        body.get("usage"),
    ) == ("hi", "length", None)


def _decode_sse(data: bytes) -> list[str]:
    decoder = SSEDecoder()
    return [e.data for line in data.decode().split("\n") if (e := decoder.feed_line(line))]


def test_stream_encoder_output_decodes_back_to_the_same_response() -> None:
    """Encoder then decoder: text, reasoning and calls survive, and every frame is a valid chunk."""
    call = ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="c9")
    final = LLMResponse(result=[call], usage=Usage(prompt_tokens=3, completion_tokens=1))
    encoder = OpenAIStreamEncoder(model="m", response_id="id", created=1, include_usage=True)
    data = encoder.encode(TextDeltaChunk("Let me check. "))
    data += encoder.encode(
        ToolCallDeltaChunk(index=0, call_id="c9", name="get_weather", arguments_delta='{"city":')
    )
    data += encoder.encode(ToolCallDeltaChunk(index=0, arguments_delta='"Rome"}'))
    data += encoder.encode(FinalChunk(final)) + encoder.done()
    payloads = _decode_sse(data)
    for p in payloads[:-1]:
        oa.ChatCompletionChunk.model_validate_json(p)
    decoder = OpenAIStreamDecoder()
    for p in payloads:
        decoder.feed(p)
    _, response = decoder.finish(final.timings)
    assert ([call], "Let me check. ", Usage(prompt_tokens=3, completion_tokens=1)) == (
        response.result,
        response.raw_text,
        response.usage,
    )


def test_stream_encoder_sends_calls_no_delta_carried_at_the_end() -> None:
    """Calls found after the fact (rescued from text) still reach the client, whole."""
    call = ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="c9")
    encoder = OpenAIStreamEncoder(model="m", response_id="id", created=1)
    decoder = OpenAIStreamDecoder()
    for p in _decode_sse(encoder.encode(FinalChunk(LLMResponse(result=[call]))) + encoder.done()):
        decoder.feed(p)
    assert [call] == decoder.finish(LLMResponse(result=[call]).timings)[1].result


def test_stream_encoder_refuses_to_retract_output() -> None:
    """SSE cannot take back what was sent: a reset chunk is a programming error here."""
    encoder = OpenAIStreamEncoder(model="m", response_id="id", created=1)
    with pytest.raises(ValueError, match=r"^cannot retract streamed output \(preempted\)"):
        encoder.encode(ResetChunk("preempted"))
