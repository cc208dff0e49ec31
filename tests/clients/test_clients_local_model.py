"""OpenAICompatClient and LlamaServerClient end to end against the embedded real model.

Qwen2.5-Coder-0.5B on llama.cpp (the ``local_model_url`` session fixture). These tests pin what
forge_rt does with a real server's replies -- parsing, streaming, endpoints, constraints, stale
connections -- never whether the model answers well.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath

import msgspec
import pytest
import trio
from clients_support import WEATHER

from forge_rt.clients import Generation, LlamaServerClient, OpenAICompatClient, sampling_defaults
from forge_rt.core import (
    BackendChunk,
    FinalChunk,
    InferenceRequest,
    JsonSchemaConstraint,
    LLMResponse,
    Message,
    PromptProgressChunk,
    Sampling,
    TextDeltaChunk,
    TextResponse,
)
from forge_rt.guardrails import rescue_tool_calls

pytestmark = pytest.mark.slow

SHORT = Sampling(max_tokens=32, temperature=0.0, seed=1)
ASK = InferenceRequest(
    messages=(Message.user("What is the weather in Paris? Use the tool."),),
    tools=(WEATHER,),
    sampling=SHORT,
)
CHAT = InferenceRequest(messages=(Message.user("Say hello in three words."),), sampling=SHORT)
# A hang guard, not a speed bound: on a 2-core CPU shared with other work a cold prefill of the
# 0.5B has taken over a minute.
DEADLINE = 300


async def _stream(client: OpenAICompatClient, request: InferenceRequest) -> list[BackendChunk]:
    async with client.stream(request) as chunks:
        return [c async for c in chunks]


def _final(chunks: list[BackendChunk]) -> LLMResponse:
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    return final.response


@pytest.mark.parametrize("kind", ["openai", "llamaserver"])
async def test_send_and_stream_agree_on_a_deterministic_reply(
    local_model_url: str, kind: str
) -> None:
    """At temperature 0 the streamed deltas add up to the text ``send`` returns."""
    cls = OpenAICompatClient if kind == "openai" else LlamaServerClient
    with trio.fail_after(DEADLINE):
        async with cls(local_model_url) as client:
            sent = await client.send(CHAT)
            chunks = await _stream(client, CHAT)
    streamed = _final(chunks)
    assert isinstance(sent.result, TextResponse)
    assert sent.result == streamed.result
    assert sent.raw_text == "".join(c.text for c in chunks if isinstance(c, TextDeltaChunk))
    assert sent.usage.completion_tokens is not None
    assert sent.usage.completion_tokens > 0
    assert streamed.timings.first_token_s is not None


@pytest.mark.parametrize("generation", ["chat", "raw"])
async def test_the_real_server_reports_the_prompt_batch_by_batch_before_the_reply(
    local_model_url: str, generation: Generation
) -> None:
    """``return_progress`` on both endpoints: reports come before any reply chunk, one as
    prefill starts and one per batch of the embedded server's 128 tokens, the last with the
    whole prompt read -- what the SlotWorker's stall watch reads as a live prefill."""
    story = " ".join(f"Sentence {i} of the {generation} story is here." for i in range(60))
    request = InferenceRequest(
        messages=(Message.user(f"Summarise in one line: {story}"),),
        sampling=Sampling(max_tokens=4, temperature=0.0, seed=1),
    )
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url, generation=generation) as client:
            chunks = await _stream(client, request)
    reports = [c for c in chunks if isinstance(c, PromptProgressChunk)]
    first_reply = next(i for i, c in enumerate(chunks) if not isinstance(c, PromptProgressChunk))
    assert chunks[:first_reply] == reports
    assert len(reports) >= 4  # a prompt of over 400 tokens, read 128 at a time
    assert reports[0].processed == reports[0].cached
    assert reports[-1].processed == reports[-1].total
    assert [r.processed for r in reports] == sorted(r.processed for r in reports)
    assert isinstance(_final(chunks).result, TextResponse)


@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_native_mode_returns_text_calls_unrescued(
    local_model_url: str, streamed: bool
) -> None:
    """This model writes calls as text: native mode hands back exactly that text, or real calls."""
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url) as client:
            response = _final(await _stream(client, ASK)) if streamed else await client.send(ASK)
    if isinstance(response.result, TextResponse):
        assert response.raw_text == response.result.content
    else:
        assert all(c.tool == "get_weather" for c in response.result)


@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_prompt_mode_reads_calls_out_of_the_text(
    local_model_url: str, streamed: bool
) -> None:
    """Prompt mode returns exactly the calls the rescue parser finds in the reply, else the text."""
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url, mode="prompt") as client:
            response = _final(await _stream(client, ASK)) if streamed else await client.send(ASK)
    rescued = rescue_tool_calls(response.raw_text, (WEATHER,))
    if rescued:
        assert [(c.tool, c.args) for c in rescued] == [
            (c.tool, c.args) for c in response.tool_calls
        ]
    else:
        assert TextResponse(content=response.raw_text) == response.result


async def test_props_tokenize_slots_metrics_and_context(local_model_url: str) -> None:
    """The server's own endpoints read back typed; the context is the fixture's 4096."""
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url) as client:
            props = await client.props()
            tokens = await client.tokenize("hello world")
            slots = await client.slots()
            metrics = await client.metrics()
            context = await client.context_length()
            health = await client.health()
    assert (props.n_ctx_per_slot, props.total_slots, context, health) == (4096, 1, 4096, "ok")
    assert len(tokens) == 2
    assert [s.id for s in slots] == [0]
    assert "llamacpp:prompt_tokens_total" in metrics
    assert PurePosixPath(props.model_path or "").name == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert sampling_defaults(PurePosixPath(props.model_path or "").name).top_k == 20


async def test_a_json_schema_constraint_is_enforced(local_model_url: str) -> None:
    """A schema-constrained reply parses as JSON and fits the schema."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    request = InferenceRequest(
        messages=(Message.user("Which city is the capital of France? Answer in JSON."),),
        constraint=JsonSchemaConstraint(schema=schema),
        sampling=SHORT,
    )
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url) as client:
            response = await client.send(request)
    assert isinstance(response.result, TextResponse)
    value = json.loads(response.result.content)
    assert isinstance(value["city"], str)


async def test_prefill_is_continued_and_only_the_continuation_returned(
    local_model_url: str,
) -> None:
    """send() and stream() both return only the continuation of a prefilled assistant turn."""
    request = InferenceRequest(
        messages=(Message.user("Count from one to ten in words, comma separated."),),
        assistant_prefill="one, two, three,",
        sampling=Sampling(max_tokens=12, temperature=0.0),
    )
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url) as client:
            sent = await client.send(request)
            streamed = _final(await _stream(client, request))
    assert not sent.raw_text.startswith("one, two")
    assert sent.raw_text == streamed.raw_text
    assert "four" in sent.raw_text


async def test_alternating_streamed_and_plain_calls_survive_stale_connections(
    local_model_url: str,
) -> None:
    """A streamed call then a plain one on the pooled connection never surfaces a reset."""
    tiny = msgspec.structs.replace(CHAT, sampling=Sampling(max_tokens=6))
    with trio.fail_after(DEADLINE):
        async with LlamaServerClient(local_model_url, recommended_sampling=True) as client:
            for _ in range(3):
                _final(await _stream(client, tiny))
                await client.send(tiny)
