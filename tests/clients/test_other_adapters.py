"""What is particular to the OpenAI-compatible, vLLM, Ollama and Anthropic adapters."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import structlog
from clients_support import WEATHER
from scripted_server import Reply, scripted_server

from forge_rt.backends.sim import Fault, SimBackend, SimConfig, SimReply, SimToolCall
from forge_rt.clients import AnthropicClient, OllamaClient, OpenAICompatClient, VLLMClient
from forge_rt.core import InferenceRequest, JsonSchemaConstraint, Message, Sampling, ToolCall
from forge_rt.errors import BackendError, FaultKind, UnsupportedRequestError

REQUEST = InferenceRequest(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))
COMPLETION = {
    "choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]
}
MODELS = {
    "object": "list",
    "data": [{"id": "Qwen/Qwen2.5-Coder-0.5B-Instruct", "max_model_len": 32768}],
}
SECRET = "sk-ant-very-secret-key"


def _body(captured: Any) -> dict[str, Any]:
    body = captured.json()
    assert isinstance(body, dict)
    return body


# -- OpenAI-compatible ----------------------------------------------------------------------


async def test_openai_sends_the_key_as_a_bearer_token_and_the_model() -> None:
    """``api_key`` becomes ``Authorization: Bearer``; ``model`` is sent as given."""
    async with (
        scripted_server(Reply.json(COMPLETION)) as server,
        OpenAICompatClient(server.url, model="gpt-x", api_key="sk-1") as client,
    ):
        await client.send(REQUEST)
    captured = server.requests[0]
    assert (captured.headers["authorization"], _body(captured)["model"]) == ("Bearer sk-1", "gpt-x")


async def test_openai_refuses_a_non_openai_field_before_sending_anything() -> None:
    """The strict dialect raises on top_k locally; the server never sees the request."""
    async with scripted_server() as server, OpenAICompatClient(server.url) as client:
        with pytest.raises(
            UnsupportedRequestError, match=r"top_k=20 is not part of the OpenAI API"
        ):
            await client.send(msgspec.structs.replace(REQUEST, sampling=Sampling(top_k=20)))
    assert server.requests == []


async def test_openai_declared_without_schema_support_refuses_a_schema_constraint() -> None:
    """``json_schema=False``: a schema constraint would be ignored upstream, so it is refused."""
    client = OpenAICompatClient("http://127.0.0.1:9", json_schema=False)
    request = InferenceRequest(
        messages=REQUEST.messages, constraint=JsonSchemaConstraint(schema={})
    )
    with pytest.raises(ValueError, match=r"json_schema=False"):
        await client.send(request)
    assert not client.capabilities.json_schema
    await client.aclose()


async def test_openai_context_length_is_none_when_the_server_has_no_model_list() -> None:
    """A 404 on /v1/models means the server does not say: None, not a guess."""
    async with (
        scripted_server(Reply.json({"error": "no"}, status=404)) as server,
        OpenAICompatClient(server.url) as client,
    ):
        assert await client.context_length() is None


async def test_openai_lists_served_models() -> None:
    """``models()`` returns the ids of /v1/models."""
    async with (
        SimBackend.serve(SimConfig(model="m1")) as sim,
        OpenAICompatClient(sim.url) as client,
    ):
        assert await client.models() == ["m1"]


# -- vLLM -------------------------------------------------------------------------------------


async def test_vllm_discovers_its_served_model_and_sends_vllm_fields() -> None:
    """No model given: the served name from /v1/models goes out, with priority and tool_choice."""
    request = msgspec.structs.replace(REQUEST, priority=3, sampling=Sampling(repeat_penalty=1.05))
    async with (
        scripted_server(Reply.json(MODELS), Reply.json(COMPLETION)) as server,
        VLLMClient(server.url) as client,
    ):
        await client.send(request)
        assert await client.context_length() == 32768
    body = _body(server.requests[1])
    assert (
        body["model"],
        body["priority"],
        body["tool_choice"],
        body["repetition_penalty"],
    ) == ("Qwen/Qwen2.5-Coder-0.5B-Instruct", 3, "auto", 1.05)
    assert len(server.requests) == 2
    assert client.model == "Qwen/Qwen2.5-Coder-0.5B-Instruct"


async def test_vllm_recommended_sampling_uses_the_served_model() -> None:
    """Opt-in defaults are looked up under the served HF id."""
    async with (
        scripted_server(Reply.json(MODELS), Reply.json(COMPLETION)) as server,
        VLLMClient(server.url, recommended_sampling=True) as client,
    ):
        await client.send(REQUEST)
    assert (
        _body(server.requests[1])["temperature"],
        _body(server.requests[1])["top_k"],
    ) == (0.7, 20)


@pytest.mark.parametrize(
    ("model", "listing", "match"),
    [
        (
            None,
            {"data": [{"id": "a"}, {"id": "b"}]},
            r"vLLM serves \['a', 'b'\]; pass model=\.\.\. to choose",
        ),
        ("c", {"data": [{"id": "a"}]}, r"vLLM does not serve 'c' \(it serves \['a'\]\)"),
    ],
    ids=["ambiguous", "not-served"],
)
async def test_vllm_refuses_a_model_it_cannot_pin_down(
    model: str | None, listing: dict[str, Any], match: str
) -> None:
    """Several models and no choice, or a model not served: a clear CLIENT_ERROR before inference."""
    async with (
        scripted_server(Reply.json(listing)) as server,
        VLLMClient(server.url, model=model) as client,
    ):
        with pytest.raises(BackendError, match=match) as info:
            await client.send(REQUEST)
    assert (info.value.kind, len(server.requests)) == (FaultKind.CLIENT_ERROR, 1)


async def test_vllm_priority_reaches_the_server() -> None:
    """The sim records the priority field of each request."""
    async with (
        SimBackend.serve(SimConfig(script={"*": ["a", "b"]})) as sim,
        VLLMClient(sim.url) as client,
    ):
        await client.send(msgspec.structs.replace(REQUEST, priority=7))
        await client.send(REQUEST)
        assert sim.stats.priorities == [7]


# -- Ollama -----------------------------------------------------------------------------------


async def test_ollama_num_ctx_is_sent_unchanged_on_every_call() -> None:
    """A fixed num_ctx never flaps between calls, so Ollama never reloads the model."""
    async with (
        SimBackend.serve(SimConfig(script={"*": ["a", "b", "c"]})) as sim,
        OllamaClient(sim.url, model="sim-model", num_ctx=2048) as client,
    ):
        for _ in range(3):
            await client.send(REQUEST)
        assert (sim.stats.ollama_num_ctx, sim.stats.ollama_num_ctx_changes) == (2048, 0)
        assert await client.context_length() == 2048
        assert sim.stats.requests["/api/show"] == 0


async def test_ollama_context_length_without_num_ctx_is_the_models_setting_or_none() -> None:
    """Unset num_ctx: the model's configured num_ctx from /api/show, else None (no guess)."""
    show_with = {
        "parameters": "temperature 0.7\nnum_ctx 8192",
        "model_info": {"llama.context_length": 131072},
    }
    show_without = {"parameters": "temperature 0.7", "model_info": {"llama.context_length": 131072}}
    async with (
        scripted_server(Reply.json(show_with), Reply.json(show_without)) as server,
        OllamaClient(server.url, model="m") as client,
    ):
        assert await client.context_length() == 8192
        assert await client.context_length() is None
    assert server.requests[0].json() == {"model": "m"}


async def test_ollama_sends_think_and_keep_alive_when_given() -> None:
    """``think`` and ``keep_alive`` are top-level request fields."""
    reply = {"message": {"role": "assistant", "content": "ok"}, "done": True}
    async with (
        scripted_server(Reply.json(reply)) as server,
        OllamaClient(server.url, model="m", think=True, keep_alive="10m") as client,
    ):
        await client.send(REQUEST)
    assert (
        _body(server.requests[0])["think"],
        _body(server.requests[0])["keep_alive"],
    ) == (True, "10m")


# -- Anthropic --------------------------------------------------------------------------------


async def test_anthropic_sends_key_version_system_and_paired_results() -> None:
    """The key goes in x-api-key, the system prompt in ``system``; an open call gets an error result."""
    reply = {
        "type": "message",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
    }
    history = (
        Message.system("be brief"),
        Message.user("go"),
        Message.assistant_calls(
            [ToolCall(tool="get_weather", args={"city": "x"}, call_id="toolu_1")]
        ),
    )
    async with (
        scripted_server(Reply.json(reply)) as server,
        AnthropicClient(server.url, api_key=SECRET, model="claude-x", max_tokens=321) as client,
    ):
        await client.send(InferenceRequest(messages=history, tools=(WEATHER,)))
    captured = server.requests[0]
    body = _body(captured)
    assert (
        captured.headers["x-api-key"],
        captured.headers["anthropic-version"],
    ) == (SECRET, "2023-06-01")
    assert (body["system"], body["max_tokens"], body["model"]) == ("be brief", 321, "claude-x")
    assert body["messages"][-1]["content"][0]["is_error"] is True


async def test_the_api_key_never_appears_in_logs_or_errors() -> None:
    """Across a retried call, a failing call and a streamed one, the key is in no log event or message."""
    script = {
        "*": [
            SimReply(text="hi"),
            SimReply(tool_calls=(SimToolCall(name="get_weather", arguments={"city": "x"}),)),
        ]
    }
    with structlog.testing.capture_logs() as logs:
        async with (
            SimBackend.serve(SimConfig(script=script, api_key=SECRET)) as sim,
            AnthropicClient(sim.url, api_key=SECRET, model="sim-model") as client,
        ):
            sim.inject(Fault.RESET_BEFORE_FIRST_BYTE)
            await client.send(REQUEST)
            async with client.stream(REQUEST) as chunks:
                [c async for c in chunks]
            with pytest.raises(BackendError) as info:
                await client.send(
                    msgspec.structs.replace(REQUEST, headers={"x-sim-fault": "http_500"})
                )
    assert any(e["event"] == "backend_retry" for e in logs)
    assert all(SECRET not in repr(e) for e in logs)
    assert SECRET not in str(info.value)
    assert SECRET not in (info.value.body or "")
