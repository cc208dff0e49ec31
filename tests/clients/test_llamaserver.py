"""LlamaServerClient: request extras, server endpoints, prompt-injected tools, stale connections."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
from clients_support import WEATHER
from scripted_server import Reply, scripted_server, sse

from forge_rt.backends.sim import SimBackend, SimConfig, SimReply
from forge_rt.clients import LlamaServerClient, SlotState
from forge_rt.core import (
    FinalChunk,
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    Message,
    Sampling,
    TextResponse,
    ToolCall,
)
from forge_rt.errors import BackendError, FaultKind, StreamError, UnsupportedModelError

REQUEST = InferenceRequest(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))
COMPLETION = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ]
}


def _body(captured: Any) -> dict[str, Any]:
    body = captured.json()
    assert isinstance(body, dict)
    return body


async def test_native_requests_carry_cache_prompt_slot_and_tools() -> None:
    """Native mode sends tools, cache_prompt and the pinned slot as id_slot."""
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(COMPLETION)) as server,
            LlamaServerClient(server.url) as client,
        ):
            await client.send(msgspec.structs.replace(REQUEST, slot_id=1))
    body = _body(server.requests[0])
    assert (
        body["cache_prompt"],
        body["id_slot"],
        body["tools"][0]["function"]["name"],
    ) == (True, 1, "get_weather")
    assert server.requests[0].path == "/v1/chat/completions"


async def test_prompt_mode_describes_tools_in_the_system_prompt_and_hides_tool_roles() -> None:
    """Prompt mode sends no tools; the system prompt shows the format, an example and each tool."""
    call = ToolCall(tool="get_weather", args={"city": "Rome"}, call_id="c1")
    history = (
        Message.system("You are terse."),
        Message.user("Weather in Rome?"),
        Message.assistant_calls([call]),
        Message.tool_result(call, "rain"),
    )
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(COMPLETION)) as server,
            LlamaServerClient(server.url, mode="prompt") as client,
        ):
            await client.send(InferenceRequest(messages=history, tools=(WEATHER,)))
    body = _body(server.requests[0])
    assert "tools" not in body
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    system = body["messages"][0]["content"]
    assert system.startswith("You are terse.\n\nYou can call tools.")
    assert '{"name":"get_weather","arguments":{"city":"<city>"}}' in system
    assert "- get_weather: Current weather for a city" in system
    assert body["messages"][2]["content"] == '{"name":"get_weather","arguments":{"city":"Rome"}}'
    assert body["messages"][3]["content"] == "Result of get_weather (call c1):\nrain"


@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_prompt_mode_reads_calls_out_of_the_reply_text(streamed: bool) -> None:
    """The reply's text is parsed with the guardrails' rescue parser into tool calls."""
    text = 'Sure.\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(script={"*": [SimReply(text=text)]})) as sim,
            LlamaServerClient(sim.url, mode="prompt") as client,
        ):
            if streamed:
                async with client.stream(REQUEST) as chunks:
                    final = [c async for c in chunks][-1]
                assert isinstance(final, FinalChunk)
                response = final.response
            else:
                response = await client.send(REQUEST)
    assert [(c.tool, c.args) for c in response.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert text == response.raw_text


async def test_prompt_mode_reply_without_a_call_stays_text() -> None:
    """Prose with no call in it comes back as text for the guardrails to nudge."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(script={"*": [SimReply(text="It is sunny.")]})) as sim,
            LlamaServerClient(sim.url, mode="prompt") as client,
        ):
            response = await client.send(REQUEST)
    assert TextResponse(content="It is sunny.") == response.result


async def test_server_endpoints_report_props_slots_metrics_tokens_and_health() -> None:
    """/props, /slots, /metrics, /tokenize and /health come back typed."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(n_ctx=2048, n_slots=2, model="tiny")) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            props = await client.props()
            slots = await client.slots()
            metrics = await client.metrics()
            tokens = await client.tokenize("hello world")
            health = await client.health()
            context = await client.context_length()
    assert (
        props.n_ctx_per_slot,
        props.total_slots,
        props.model_path,
    ) == (2048, 2, "/sim/tiny.gguf")
    assert [
        SlotState(id=0, n_ctx=2048, is_processing=False),
        SlotState(id=1, n_ctx=2048, is_processing=False),
    ] == slots
    assert "llamacpp:prompt_tokens_total" in metrics
    assert tokens
    assert all(isinstance(t, int) for t in tokens)
    assert (health, context) == ("ok", 2048)


async def test_context_length_is_the_per_slot_n_ctx_not_divided_again() -> None:
    """llama-server's /props n_ctx is already per slot (-c 4096 --parallel 2 reports 2048)."""
    props = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 2}
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(props)) as server,
            LlamaServerClient(server.url) as client,
        ):
            assert await client.context_length() == 2048
            assert await client.context_length() == 2048
    assert len(server.requests) == 1


async def test_props_of_another_shape_is_a_malformed_response() -> None:
    """A /props without default_generation_settings.n_ctx is refused, naming the missing field."""
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json({"total_slots": 1})) as server,
            LlamaServerClient(server.url) as client,
        ):
            with pytest.raises(
                BackendError, match=r"missing required field `default_generation_settings`"
            ) as info:
                await client.props()
    assert FaultKind.MALFORMED_RESPONSE is info.value.kind


async def test_a_slot_that_does_not_exist_is_a_client_error() -> None:
    """Pinning slot 5 on a one-slot server is a 400: CLIENT_ERROR, not retried."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(script={"*": ["hi"]})) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            with pytest.raises(BackendError) as info:
                await client.send(msgspec.structs.replace(REQUEST, slot_id=5))
    assert (
        info.value.kind,
        info.value.retry_safe,
        info.value.status,
    ) == (FaultKind.CLIENT_ERROR, False, 400)
    assert "id_slot 5 does not exist" in (info.value.body or "")


@pytest.mark.parametrize(
    ("constraint", "seen_as"),
    [
        (
            JsonSchemaConstraint(
                schema={
                    "type": "object",
                    "properties": {"a": {"type": "integer"}},
                    "required": ["a"],
                }
            ),
            "response_format",
        ),
        (GrammarConstraint(gbnf='root ::= "yes" | "no"'), "grammar"),
    ],
    ids=["json-schema", "grammar"],
)
async def test_constraints_reach_the_server(constraint: Any, seen_as: str) -> None:
    """A JSON schema goes out as response_format, a grammar as grammar."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig()) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            await client.send(InferenceRequest(messages=REQUEST.messages, constraint=constraint))
            assert {seen_as: 1} == dict(sim.stats.constraints)


@pytest.mark.parametrize(
    ("constraint", "tool_choice"),
    [
        (GrammarConstraint(gbnf='root ::= "yes" | "no"'), "none"),
        (JsonSchemaConstraint(schema={"type": "object"}), None),
        (None, None),
    ],
    ids=["grammar", "json-schema", "free"],
)
async def test_a_grammar_beside_native_tools_goes_with_tool_choice_none(
    constraint: Any, tool_choice: str | None
) -> None:
    """llama-server refuses a grammar beside tools unless tool_choice is "none" (which renders
    the same prompt): the grammar path sends that, the others leave tool_choice alone."""
    request = InferenceRequest(messages=REQUEST.messages, tools=(WEATHER,), constraint=constraint)
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(COMPLETION)) as server,
            LlamaServerClient(server.url) as client,
        ):
            await client.send(request)
    body = _body(server.requests[0])
    assert body.get("tool_choice") == tool_choice
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]


async def test_prefill_is_sent_as_a_trailing_assistant_message() -> None:
    """assistant_prefill is continued by the server from a trailing assistant turn."""
    with trio.fail_after(10):
        async with (
            scripted_server(Reply.json(COMPLETION)) as server,
            LlamaServerClient(server.url) as client,
        ):
            await client.send(msgspec.structs.replace(REQUEST, assistant_prefill='{"name": "'))
    assert _body(server.requests[0])["messages"][-1] == {
        "role": "assistant",
        "content": '{"name": "',
    }


async def test_recommended_sampling_is_discovered_from_props_and_caller_values_win() -> None:
    """Without model=, the GGUF stem in /props picks the card; explicit values still win."""
    props = {
        "default_generation_settings": {"n_ctx": 4096},
        "model_path": "/c/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    }
    with trio.fail_after(10):
        async with (
            scripted_server(
                Reply.json(props), Reply.json(COMPLETION), Reply.json(COMPLETION)
            ) as server,
            LlamaServerClient(server.url, recommended_sampling=True) as client,
        ):
            await client.send(msgspec.structs.replace(REQUEST, sampling=Sampling(temperature=0.1)))
            await client.send(REQUEST)
    first, second = _body(server.requests[1]), _body(server.requests[2])
    assert (
        first["temperature"],
        first["top_p"],
        first["top_k"],
        first["repeat_penalty"],
    ) == (0.1, 0.8, 20, 1.05)
    assert second["temperature"] == 0.7
    assert [r.path for r in server.requests] == [
        "/props",
        "/v1/chat/completions",
        "/v1/chat/completions",
    ]


async def test_recommended_sampling_for_an_unknown_served_model_raises_before_inference() -> None:
    """The sim serves 'sim-model', which has no card: UnsupportedModelError, no inference sent."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(script={"*": ["hi"]})) as sim,
            LlamaServerClient(sim.url, recommended_sampling=True) as client,
        ):
            with pytest.raises(UnsupportedModelError, match=r"'sim-model.gguf'"):
                await client.send(REQUEST)
            assert sim.stats.requests["/v1/chat/completions"] == 0


@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_a_stale_kept_alive_connection_is_retried_on_a_fresh_one(streamed: bool) -> None:
    """The server dropping a pooled connection without answering costs one silent retry."""
    done = sse(
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}, "[DONE]"
    )
    reply = (
        Reply(parts=done, content_type="text/event-stream") if streamed else Reply.json(COMPLETION)
    )
    with trio.fail_after(10):
        async with (
            scripted_server(reply, Reply(fault="close_before"), reply) as server,
            LlamaServerClient(server.url) as client,
        ):
            for _ in range(2):
                if streamed:
                    async with client.stream(REQUEST) as chunks:
                        final = [c async for c in chunks][-1]
                    assert isinstance(final, FinalChunk)
                else:
                    assert TextResponse(content="ok") == (await client.send(REQUEST)).result
    assert len(server.requests) == 3


async def test_an_error_line_inside_the_stream_is_the_servers_error() -> None:
    """llama-server's ``error: {...}`` line mid-stream raises SERVER_ERROR with its text."""
    parts = [
        *sse({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        b'error: {"code":500,"message":"slot lost"}\n\n',
    ]
    with trio.fail_after(10):
        async with (
            scripted_server(Reply(parts=parts, content_type="text/event-stream")) as server,
            LlamaServerClient(server.url) as client,
        ):
            with pytest.raises(BackendError, match=r"reported an error inside the stream") as info:
                async with client.stream(REQUEST) as chunks:
                    [c async for c in chunks]
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.SERVER_ERROR, True)
    assert "slot lost" in (info.value.body or "")


async def test_a_stream_that_stops_without_a_finish_is_a_stream_error() -> None:
    """A body that ends cleanly after some deltas but with no finish is reported, with the text."""
    parts = sse({"choices": [{"index": 0, "delta": {"content": "Hello"}}]})
    with trio.fail_after(10):
        async with (
            scripted_server(Reply(parts=parts, content_type="text/event-stream")) as server,
            LlamaServerClient(server.url) as client,
        ):
            with pytest.raises(
                StreamError, match=r"the stream ended before its final chunk"
            ) as info:
                async with client.stream(REQUEST) as chunks:
                    [c async for c in chunks]
    assert info.value.partial == "Hello"
