"""The Ollama ``/api/chat`` wire format, as pure functions."""

from __future__ import annotations

import msgspec
import pytest
from clients_support import WEATHER

from forge_rt.core import (
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    Message,
    MessageType,
    Role,
    Sampling,
    Timings,
    ToolCall,
    Usage,
)
from forge_rt.errors import BackendError, FaultKind, UnsupportedRequestError
from forge_rt.wire import (
    OllamaStreamDecoder,
    ollama_messages_to_wire,
    ollama_request_to_wire,
    ollama_response_from_wire,
)

CALL = ToolCall(tool="get_weather", args={"city": "Paris"}, call_id="c1")


def test_messages_carry_object_arguments_tool_names_and_thinking() -> None:
    """Arguments stay objects, results name their tool, reasoning rides along as thinking."""
    wire = ollama_messages_to_wire(
        [
            Message.user("weather?"),
            Message(role=Role.ASSISTANT, content="need it", type=MessageType.REASONING),
            Message.assistant_calls([CALL]),
            Message.tool_result(CALL, "sunny"),
        ]
    )
    assert wire == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
            "thinking": "need it",
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]


def test_request_puts_sampling_and_num_ctx_in_options_and_schema_in_format() -> None:
    """Sampling and the fixed num_ctx go in options; a schema constraint is ``format``."""
    request = InferenceRequest(
        messages=(Message.user("hi"),),
        tools=(WEATHER,),
        sampling=Sampling(temperature=0.7, top_k=20, repeat_penalty=1.05, max_tokens=64),
        constraint=JsonSchemaConstraint(schema={"type": "object"}),
    )
    body = ollama_request_to_wire(
        request, model="qwen2.5-coder:0.5b", stream=True, num_ctx=8192, think=False
    )
    assert body["options"] == {
        "temperature": 0.7,
        "top_k": 20,
        "repeat_penalty": 1.05,
        "num_predict": 64,
        "num_ctx": 8192,
    }
    assert (body["format"], body["think"], body["stream"]) == ({"type": "object"}, False, True)
    with pytest.raises(UnsupportedRequestError, match=r"^Ollama takes no GBNF grammar"):
        ollama_request_to_wire(
            msgspec.structs.replace(request, constraint=GrammarConstraint(gbnf="x")),
            model="m",
            stream=False,
        )


def test_response_reads_object_arguments_and_counts() -> None:
    """Object arguments become calls with fresh ids; eval counts become usage."""
    body = {
        "model": "m",
        "message": {
            "role": "assistant",
            "content": "",
            "thinking": "t",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
        },
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 12,
        "eval_count": 4,
    }
    response = ollama_response_from_wire(msgspec.json.encode(body))
    assert [(c.tool, c.args, c.reasoning) for c in response.tool_calls] == [
        ("get_weather", {"city": "Oslo"}, "t")
    ]
    assert Usage(prompt_tokens=12, completion_tokens=4) == response.usage


def test_response_error_object_is_a_server_error() -> None:
    """``{"error": ...}`` is Ollama's own error, typed."""
    with pytest.raises(BackendError) as info:
        ollama_response_from_wire(b'{"error": "model not found"}')
    assert (info.value.kind, info.value.body) == (FaultKind.SERVER_ERROR, "model not found")


def test_stream_decoder_gives_each_whole_call_its_own_index() -> None:
    """Two calls in two lines stay two calls; the done line ends the stream."""
    decoder = OllamaStreamDecoder()
    for name in ("a", "b"):
        decoder.feed(
            msgspec.json.encode(
                {
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"function": {"name": name, "arguments": {}}}],
                    },
                    "done": False,
                }
            ).decode()
        )
    assert not decoder.complete
    decoder.feed(
        '{"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", "eval_count": 2}'
    )
    _, response = decoder.finish(Timings(total_s=0.0))
    assert (
        [c.tool for c in response.tool_calls],
        decoder.complete,
        response.usage.completion_tokens,
    ) == (["a", "b"], True, 2)
