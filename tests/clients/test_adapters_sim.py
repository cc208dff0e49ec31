"""Every adapter against the simulated backend over real HTTP: replies, streams, every fault.

Each test runs once per adapter (OpenAI-compatible, llama-server, vLLM, Ollama, Anthropic), so
the same fault reads the same way whatever the protocol.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from clients_support import WEATHER

from forge_rt.backends.sim import Fault, SimBackend, SimConfig, SimReply, SimToolCall
from forge_rt.clients import HTTPClient, make_client
from forge_rt.core import (
    BackendChunk,
    FinalChunk,
    InferenceRequest,
    LLMResponse,
    Message,
    PromptProgressChunk,
    ReasoningDeltaChunk,
    TextDeltaChunk,
    TextResponse,
    ToolCallDeltaChunk,
)
from forge_rt.errors import BackendError, FaultKind, StreamError

KINDS = ["openai", "llamaserver", "vllm", "ollama", "anthropic"]
LONG_TEXT = "The weather in Paris is mild today with a light breeze from the west and clouds."
REQUEST = InferenceRequest(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))


def client_for(kind: str, url: str, **opts: Any) -> HTTPClient:
    """An adapter of ``kind`` for the sim at ``url``."""
    base: dict[str, Any] = {"model": "sim-model"}
    if kind == "anthropic":
        base["api_key"] = "sk-test-secret"
    return make_client(kind, url, **{**base, **opts})  # type: ignore[arg-type]


@asynccontextmanager
async def sim_and_client(
    kind: str, replies: list[SimReply], config: dict[str, Any] | None = None, **opts: Any
) -> AsyncIterator[tuple[SimBackend, HTTPClient]]:
    """A sim scripted with ``replies`` for every conversation, and a client pointed at it."""
    config_ = SimConfig(script={"*": replies}, **(config or {}))
    async with SimBackend.serve(config_) as sim, client_for(kind, sim.url, **opts) as client:
        yield sim, client


async def collect(client: HTTPClient, request: InferenceRequest) -> list[BackendChunk]:
    """Every chunk of one streamed call."""
    async with client.stream(request) as chunks:
        return [chunk async for chunk in chunks]


async def reply_of(client: HTTPClient, request: InferenceRequest, *, streamed: bool) -> LLMResponse:
    """The response of one call, sent whole or streamed (then taken from the final chunk)."""
    if not streamed:
        return await client.send(request)
    final = (await collect(client, request))[-1]
    assert isinstance(final, FinalChunk)
    return final.response


def with_fault(fault: Fault) -> InferenceRequest:
    """The standard request, asking the sim for ``fault`` through a per-call header."""
    return InferenceRequest(
        messages=REQUEST.messages, tools=REQUEST.tools, headers={"x-sim-fault": fault.value}
    )


CALL_REPLY = SimReply(
    tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_7"),)
)


# -- replies ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_send_returns_structured_calls(kind: str) -> None:
    """A native tool call comes back as a ToolCall with object arguments and usage."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY]) as (_, client):
            response = await client.send(REQUEST)
    assert [(c.tool, c.args) for c in response.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert (response.usage.prompt_tokens or 0) > 0
    assert (response.usage.completion_tokens or 0) > 0


@pytest.mark.parametrize("kind", KINDS)
async def test_stream_yields_clean_deltas_then_the_assembled_calls(kind: str) -> None:
    """Tool-call deltas name the tool once, arguments add up, the final chunk holds the call."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY]) as (_, client):
            chunks = await collect(client, REQUEST)
    deltas = [c for c in chunks if isinstance(c, ToolCallDeltaChunk)]
    assert [d.name for d in deltas if d.name is not None] == ["get_weather"]
    assert __import__("json").loads("".join(d.arguments_delta for d in deltas)) == {"city": "Paris"}
    final = chunks[-1]
    assert isinstance(final, FinalChunk)
    assert [(c.tool, c.args) for c in final.response.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert final.response.timings.first_token_s is not None
    assert sum(isinstance(c, FinalChunk) for c in chunks) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_reasoning_and_think_tags_become_reasoning_in_both_modes(kind: str) -> None:
    """Structured reasoning and <think> text both land in ``reasoning``; send and stream agree."""
    replies = [
        SimReply(
            text="<think>check the sky</think>\n\nIt is sunny.", reasoning="user wants weather"
        )
    ] * 2
    with trio.fail_after(10):
        async with sim_and_client(kind, replies) as (_, client):
            sent = await client.send(REQUEST)
            chunks = await collect(client, REQUEST)
    streamed = chunks[-1]
    assert isinstance(streamed, FinalChunk)
    assert sent.result == streamed.response.result
    assert isinstance(sent.result, TextResponse)
    assert sent.result.content == "It is sunny."
    assert sent.result.reasoning == "user wants weather\ncheck the sky"
    assert "".join(c.text for c in chunks if isinstance(c, TextDeltaChunk)) == "It is sunny."
    assert any(isinstance(c, ReasoningDeltaChunk) for c in chunks)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_call_written_as_text_is_returned_as_text_for_the_guardrails(kind: str) -> None:
    """Native mode never rescues: a JSON call in the content is a TextResponse with that text."""
    raw = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=raw)]) as (_, client):
            response = await client.send(REQUEST)
    assert TextResponse(content=raw) == response.result
    assert raw == response.raw_text


# Ollama and Anthropic carry arguments as JSON objects: a broken string cannot be sent there.
@pytest.mark.parametrize("kind", ["openai", "llamaserver", "vllm"])
async def test_unparseable_native_arguments_go_to_the_rescue_path_as_text(kind: str) -> None:
    """Arguments that are not a JSON object make the reply text, with the call rendered in it."""
    reply = SimReply(tool_calls=(SimToolCall(name="get_weather", arguments='{"city": "Par'),))
    with trio.fail_after(10):
        async with sim_and_client(kind, [reply]) as (_, client):
            response = await client.send(REQUEST)
    assert (
        TextResponse(content='{"name": "get_weather", "arguments": {"city": "Par}')
        == response.result
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_leaving_a_stream_early_closes_the_connection(kind: str) -> None:
    """Breaking out after the first delta disconnects; the sim stops generating."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=LONG_TEXT * 5)], {"decode_tps": 200.0}) as (
            sim,
            client,
        ):
            async with client.stream(REQUEST) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, PromptProgressChunk):
                        continue  # llama-server's reports on the prompt come first
                    assert isinstance(chunk, TextDeltaChunk)
                    break
            await sim.wait_until(lambda s: s.disconnects == 1)
            assert sim.stats.completed == 0


@pytest.mark.parametrize("kind", KINDS)
async def test_only_llama_server_reports_progress_on_the_prompt_and_before_the_reply(
    kind: str,
) -> None:
    """The llama-server adapter asks for ``return_progress``: the reports come before any
    reply chunk and end with the whole prompt read. No other API has them."""
    config = {"prefill_tps": 100.0, "prefill_batch": 8}
    with trio.fail_after(30):
        async with sim_and_client(kind, [SimReply(text="done")], config) as (_, client):
            chunks = await collect(client, REQUEST)
    reports = [c for c in chunks if isinstance(c, PromptProgressChunk)]
    if kind != "llamaserver":
        assert reports == []
        return
    assert len(reports) >= 3  # one as prefill starts, one after each batch of 8
    first_reply = next(i for i, c in enumerate(chunks) if not isinstance(c, PromptProgressChunk))
    assert all(isinstance(c, PromptProgressChunk) for c in chunks[:first_reply])
    assert [r.processed for r in reports] == sorted(r.processed for r in reports)
    assert reports[0].processed == 0
    assert reports[-1].processed == reports[-1].total
    assert reports[-1].remaining == 0


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelling_a_stream_propagates_cancellation_untouched(kind: str) -> None:
    """A caller's cancel scope cancels the stream; no error is made of it, the sim sees a disconnect."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=LONG_TEXT * 5)], {"decode_tps": 200.0}) as (
            sim,
            client,
        ):
            with trio.CancelScope() as scope:
                async with client.stream(REQUEST) as chunks:
                    async for _ in chunks:
                        scope.cancel()
            assert scope.cancelled_caught
            await sim.wait_until(lambda s: s.disconnects == 1)


# -- faults -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fault", [Fault.HTTP_500, Fault.HTTP_503], ids=["500", "503"])
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_5xx_is_a_retry_safe_server_error_with_the_body_kept_aside(
    kind: str, fault: Fault, streamed: bool
) -> None:
    """An error status is SERVER_ERROR, retry-safe, with the body on .body and not in the message."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY]) as (_, client):
            with pytest.raises(BackendError) as info:
                await reply_of(client, with_fault(fault), streamed=streamed)
    error = info.value
    assert (FaultKind.SERVER_ERROR, True, int(fault.value[-3:])) == (
        error.kind,
        error.retry_safe,
        error.status,
    )
    assert "simulated" in (error.body or "")
    assert "simulated" not in str(error)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_one_reset_before_the_first_byte_is_retried_once_invisibly(
    kind: str, streamed: bool
) -> None:
    """A connection reset before any byte is retried once; the caller just gets the reply."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY]) as (sim, client):
            sim.inject(Fault.RESET_BEFORE_FIRST_BYTE)
            response = await reply_of(client, REQUEST, streamed=streamed)
            assert sim.stats.faults[Fault.RESET_BEFORE_FIRST_BYTE] == 1
    assert [c.tool for c in response.tool_calls] == ["get_weather"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_a_second_reset_before_the_first_byte_is_raised_as_retry_safe(
    kind: str, streamed: bool
) -> None:
    """Only one automatic retry: a persistent reset reaches the caller, marked safe to retry."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY]) as (sim, client):
            sim.inject(Fault.RESET_BEFORE_FIRST_BYTE, count=3)
            with pytest.raises(BackendError) as info:
                await reply_of(client, REQUEST, streamed=streamed)
            assert sim.stats.faults[Fault.RESET_BEFORE_FIRST_BYTE] == 2
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.RESET_BEFORE_FIRST_BYTE, True)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_reset_mid_stream_after_output_is_not_retry_safe(kind: str) -> None:
    """Output was delivered, then the connection died: RESET_MID_STREAM, not safe to resend."""
    seen: list[BackendChunk] = []
    with trio.fail_after(10):
        async with (
            sim_and_client(kind, [SimReply(text=LONG_TEXT)]) as (_, client),
            client.stream(with_fault(Fault.RESET_MID_STREAM)) as chunks,
        ):
            with pytest.raises(BackendError) as info:  # noqa: PT012 -- the error ends the loop
                async for chunk in chunks:
                    seen.append(chunk)
    reply = [c for c in seen if not isinstance(c, PromptProgressChunk)]
    assert reply
    assert all(isinstance(c, TextDeltaChunk) for c in reply)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.RESET_MID_STREAM, False)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_body_cut_mid_way_on_send_is_a_reset_safe_to_retry(kind: str) -> None:
    """A non-streamed body cut off: nothing reached the caller, so a retry is safe."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=LONG_TEXT)]) as (_, client):
            with pytest.raises(BackendError) as info:
                await client.send(with_fault(Fault.RESET_MID_STREAM))
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.RESET_MID_STREAM, True)


@pytest.mark.parametrize("kind", KINDS)
async def test_malformed_sse_is_a_stream_error_with_the_partial_text(kind: str) -> None:
    """A non-JSON event inside a stream raises StreamError, carrying what came before it."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=LONG_TEXT)]) as (_, client):
            with pytest.raises(StreamError) as info:
                await collect(client, with_fault(Fault.MALFORMED_SSE))
    assert LONG_TEXT.startswith(info.value.partial)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "fault", [Fault.MALFORMED_SSE, Fault.TRUNCATED_JSON], ids=["sse-framed", "truncated"]
)
async def test_a_bad_non_streamed_body_is_a_malformed_response(kind: str, fault: Fault) -> None:
    """A body that is not the API's JSON reply is MALFORMED_RESPONSE with the body kept."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=LONG_TEXT)]) as (_, client):
            with pytest.raises(BackendError) as info:
                await client.send(with_fault(fault))
    assert FaultKind.MALFORMED_RESPONSE is info.value.kind
    assert info.value.body


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_cut_before_its_final_chunk_is_a_stream_error(kind: str) -> None:
    """A stream that ends cleanly but without its final chunk never passes for complete."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [SimReply(text=LONG_TEXT)]) as (_, client):
            with pytest.raises(StreamError):
                await collect(client, with_fault(Fault.TRUNCATED_JSON))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_a_hung_server_is_a_read_timeout(kind: str, streamed: bool) -> None:
    """No byte within read_timeout: READ_TIMEOUT, safe to retry; nothing hangs."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY], read_timeout=0.2) as (_, client):
            with pytest.raises(BackendError) as info:
                await reply_of(client, with_fault(Fault.HANG), streamed=streamed)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.READ_TIMEOUT, True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_a_slow_drip_is_caught_by_the_whole_call_deadline(kind: str, streamed: bool) -> None:
    """Bytes arrive just fast enough to dodge read_timeout; the deadline still ends the call."""
    config = {"slow_drip_interval_s": 0.01}
    with trio.fail_after(10):
        async with sim_and_client(
            kind, [SimReply(text=LONG_TEXT * 4)], config, read_timeout=5.0, deadline=0.3
        ) as (_, client):
            with pytest.raises(
                BackendError, match=r"did not finish within its 0\.3 s deadline"
            ) as info:
                await reply_of(client, with_fault(Fault.SLOW_DRIP), streamed=streamed)
    assert FaultKind.DEADLINE is info.value.kind


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_nothing_listening_is_connect_refused(kind: str, streamed: bool) -> None:
    """A backend that is not running: CONNECT_REFUSED, retry-safe, with a hint in the message."""
    with trio.fail_after(10):
        async with client_for(kind, f"http://127.0.0.1:{_closed_port()}") as client:
            with pytest.raises(BackendError, match=r"is the backend running") as info:
                await reply_of(client, REQUEST, streamed=streamed)
    assert (info.value.kind, info.value.retry_safe) == (FaultKind.CONNECT_REFUSED, True)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_wrong_api_key_is_a_client_error_not_worth_retrying(kind: str) -> None:
    """401 is CLIENT_ERROR, not retry-safe: resending the same key cannot help."""
    with trio.fail_after(10):
        async with SimBackend.serve(SimConfig(script={"*": [CALL_REPLY]}, api_key="right")) as sim:
            async with client_for(kind, sim.url, api_key="wrong") as client:
                with pytest.raises(BackendError) as info:
                    await client.send(REQUEST)
            async with client_for(kind, sim.url, api_key="right") as client:
                assert (await client.send(REQUEST)).tool_calls
    assert (
        info.value.kind,
        info.value.retry_safe,
        info.value.status,
    ) == (FaultKind.CLIENT_ERROR, False, 401)


# -- identity and context -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("openai", 4096),
        ("llamaserver", 4096),
        ("vllm", 4096),
        ("ollama", 4096),
        ("anthropic", None),
    ],
)
async def test_context_length_is_what_the_server_reports(kind: str, expected: int | None) -> None:
    """Each adapter reads its server's own figure; Anthropic reports none and says None."""
    with trio.fail_after(10):
        async with sim_and_client(kind, [CALL_REPLY], {"n_ctx": 4096}) as (_, client):
            assert expected == await client.context_length()
