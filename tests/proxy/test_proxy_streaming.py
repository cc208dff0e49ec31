"""Live streaming, client disconnects, and the shared slot's priorities, seen through the proxy.

The backend is a GatedClient: each token is generated only when the test releases it, so what
the client has received at each step is observed exactly, over real sockets, without sleeps.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
import trio
from proxy_support import WEATHER_TOOL, Deltas, GatedClient, client_proxy, in_thread

from forge_rt.core import ToolCall
from forge_rt.proxy import KeyProfile

USER: list[Any] = [{"role": "user", "content": "hello"}]


def _stream_text(
    sdk: openai.OpenAI, deltas: Deltas, *, priority: str | None = None, **kw: Any
) -> tuple[str, str | None]:
    """Stream one completion in a worker thread, pushing each content delta to ``deltas``."""
    headers = {"x-forge-priority": priority} if priority else {}
    text, finish = "", None
    for chunk in sdk.chat.completions.create(
        model="m", messages=USER, stream=True, extra_headers=headers, **kw
    ):
        if not chunk.choices:
            continue
        piece = chunk.choices[0].delta.content or ""
        if piece:
            text += piece
            deltas.push(piece)
        finish = chunk.choices[0].finish_reason or finish
    return text, finish


def _sdk(url: str, key: str = "x") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=20)


async def test_text_reaches_the_client_while_still_generating() -> None:
    """Each token is on the client's screen before the next one is even generated."""
    client = GatedClient(["alpha beta gamma"])
    deltas = Deltas()
    with trio.fail_after(20):
        async with client_proxy(client) as url, trio.open_nursery() as nursery:
            sdk = _sdk(url)
            result: list[tuple[str, str | None]] = []

            async def consume() -> None:
                result.append(await in_thread(lambda: _stream_text(sdk, deltas)))

            nursery.start_soon(consume)
            call = await client.started.receive()
            client.release()
            assert await deltas.next() == "alpha "
            assert (call.outcome, call.tokens_sent) == ("running", 1)
            client.release()
            assert await deltas.next() == "beta "
            client.release()
            assert await deltas.next() == "gamma"
        sdk.close()
    assert result == [("alpha beta gamma", "stop")]


async def test_respond_message_streams_live_from_a_call_written_as_text() -> None:
    """The message of a respond call the model writes as JSON text streams token by token."""
    reply = '{"name": "respond", "arguments": {"message": "Hello there dear friend"}}'
    client = GatedClient([reply])
    deltas = Deltas()
    with trio.fail_after(20):
        async with client_proxy(client) as url, trio.open_nursery() as nursery:
            sdk = _sdk(url)
            result: list[tuple[str, str | None]] = []

            async def consume() -> None:
                result.append(
                    await in_thread(lambda: _stream_text(sdk, deltas, tools=[WEATHER_TOOL]))
                )

            nursery.start_soon(consume)
            call = await client.started.receive()
            client.release(5)  # up to and including `"Hello `
            assert await deltas.next() == "Hello "
            assert call.outcome == "running"
            client.release()
            assert await deltas.next() == "there "
            client.release(10)
        sdk.close()
    assert result == [("Hello there dear friend", "stop")]


async def test_a_tool_call_written_as_text_is_held_and_sent_structured() -> None:
    """Text that is a tool call never streams as content; the client gets the validated call."""
    reply = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    client = GatedClient([reply], gated=False)
    with trio.fail_after(20):
        async with client_proxy(client) as url, httpx.AsyncClient(base_url=url) as http:
            asked = [{"role": "user", "content": "What is the weather in Paris?"}]
            body = {"model": "m", "messages": asked, "tools": [WEATHER_TOOL], "stream": True}
            async with http.stream("POST", "/v1/chat/completions", json=body) as response:
                frames = [line async for line in response.aiter_lines() if line]
    assert not any('"content"' in f for f in frames)
    calls = [f for f in frames if '"tool_calls":[' in f]
    assert len(calls) == 1
    assert '"name":"get_weather"' in calls[0]
    assert '\\"city\\":\\"Paris\\"' in calls[0]
    assert frames[-1] == "data: [DONE]"


async def test_native_respond_arguments_stream_as_content() -> None:
    """A native respond call's message streams as content, not as tool-call deltas."""
    call = ToolCall(tool="respond", args={"message": "Native and streamed."})
    client = GatedClient([[call]], gated=False)
    with trio.fail_after(20):
        async with client_proxy(client) as url:
            with _sdk(url) as sdk:
                deltas = Deltas()
                text, finish = await in_thread(
                    lambda: _stream_text(sdk, deltas, tools=[WEATHER_TOOL])
                )
    assert (text, finish) == ("Native and streamed.", "stop")


async def test_client_disconnect_cancels_the_inference_and_frees_the_slot() -> None:
    """Closing the connection mid-stream cancels the backend call; the next request runs."""
    client = GatedClient(["one two three four", "next"])
    body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    with trio.fail_after(20):
        async with client_proxy(client) as url:
            stream = await _post_raw(url, body)
            call = await client.started.receive()
            client.release()
            received = b""
            while b'"one "' not in received:
                received += await stream.receive_some(65536)
            await stream.aclose()
            await call.ended.wait()
            assert call.outcome == "cancelled"
            client.release(1)
            async with httpx.AsyncClient(base_url=url) as http:
                second = await http.post(
                    "/v1/chat/completions", json={"model": "m", "messages": USER}
                )
                metrics = (await http.get("/metrics")).text
    assert received.startswith(b"HTTP/1.1 200")
    assert second.json()["choices"][0]["message"]["content"] == "next"
    assert "forge_proxy_client_disconnects_total 1.0" in metrics


async def _post_raw(url: str, body: bytes) -> trio.SocketStream:
    """Send a chat request on a raw socket (so the test decides when the connection closes)."""
    host, port = url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    return stream


async def test_disconnect_before_any_output_cancels_a_whole_reply_request() -> None:
    """A non-streamed request whose client leaves is cancelled at the backend too."""
    client = GatedClient(["never finished"])
    with trio.fail_after(20):
        async with client_proxy(client) as url:
            body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
            stream = await _post_raw(url, body)
            call = await client.started.receive()
            await stream.aclose()
            await call.ended.wait()
    assert call.outcome == "cancelled"
    assert call.tokens_sent == 0


KEYS = (
    KeyProfile(key="sk-voice-0123456789", name="voice", priority=0),
    KeyProfile(key="sk-batch-0123456789", name="batch", priority=20),
)


@pytest.mark.parametrize(
    ("prefill", "by_key"),
    [(True, False), (False, False), (True, True)],
    ids=["continued", "restarted", "key-profiles"],
)
async def test_high_priority_preempts_a_low_stream_which_only_pauses(
    prefill: bool, by_key: bool
) -> None:
    """A high-priority request interrupts a low one mid-stream; the low client sees a pause.

    Priority comes from the x-forge-priority header or from the API key's profile. With
    assistant prefill the low call continues where it stopped; without, it restarts and the
    proxy skips what the client already has. Either way its text arrives once, complete.
    """
    client = GatedClient(["alpha beta gamma delta", "urgent answer"], prefill=prefill)
    low_deltas = Deltas()
    # Without keys the operator must allow anonymous "high" requests (the default ceiling is
    # "normal": an unauthenticated client cannot make itself urgent).
    options: dict[str, Any] = {"api_keys": KEYS} if by_key else {"anonymous_max_priority": 0}
    low_priority, high_priority = (None, None) if by_key else ("low", "high")
    with trio.fail_after(20):
        async with client_proxy(client, **options) as url, trio.open_nursery() as nursery:
            low_sdk = _sdk(url, "sk-batch-0123456789" if by_key else "x")
            high_sdk = _sdk(url, "sk-voice-0123456789" if by_key else "x")
            low: list[tuple[str, str | None]] = []
            high: list[str | None] = []

            async def low_client() -> None:
                low.append(
                    await in_thread(
                        lambda: _stream_text(low_sdk, low_deltas, priority=low_priority)
                    )
                )

            async def high_client() -> None:
                reply = await in_thread(
                    lambda: high_sdk.chat.completions.create(
                        model="m",
                        messages=[{"role": "user", "content": "urgent"}],
                        extra_headers={"x-forge-priority": high_priority} if high_priority else {},
                    )
                )
                high.append(reply.choices[0].message.content)

            nursery.start_soon(low_client)
            first = await client.started.receive()
            client.release(2)
            assert await low_deltas.collect(2) == "alpha beta "
            nursery.start_soon(high_client)
            urgent = await client.started.receive()
            await first.ended.wait()
            assert first.outcome == "cancelled"
            client.release(2)
            await urgent.ended.wait()
            resumed = await client.started.receive()
            client.release(4)
        low_sdk.close()
        high_sdk.close()
    assert high == ["urgent answer"]
    assert low == [("alpha beta gamma delta", "stop")]
    assert resumed.request.assistant_prefill == ("alpha beta " if prefill else None)


async def test_a_full_queue_answers_429_with_retry_after() -> None:
    """With the slot busy and the queue at its limit, one more request is a 429."""
    client = GatedClient(["first", "second"])
    with trio.fail_after(20):
        async with (
            client_proxy(client, max_queue=1) as url,
            httpx.AsyncClient(base_url=url, timeout=20) as http,
            trio.open_nursery() as nursery,
        ):
            body = {"model": "m", "messages": USER}
            answers: list[int] = []

            async def post() -> None:
                answers.append((await http.post("/v1/chat/completions", json=body)).status_code)

            nursery.start_soon(post)
            await client.started.receive()  # the first runs
            nursery.start_soon(post)  # the second waits in the queue
            while (await http.get("/health")).json()["slot"]["queue_depth"] < 1:
                await trio.lowlevel.checkpoint()
            third = await http.post("/v1/chat/completions", json=body)
            client.release(2)
    assert third.status_code == 429
    assert third.headers["retry-after"] == "1"
    assert third.json()["error"]["type"] == "rate_limit_error"
    assert answers == [200, 200]


async def test_a_streamed_message_that_breaks_off_ends_with_an_error_event() -> None:
    """A respond message already streaming that never closes ends with a visible error."""
    broken = '{"name": "respond", "arguments": {"message": "Hello wor'
    client = GatedClient([broken], gated=False)
    deltas = Deltas()
    with trio.fail_after(20):
        async with client_proxy(client) as url:
            with _sdk(url) as sdk:

                def run() -> Exception:
                    with pytest.raises(openai.APIError) as info:
                        _stream_text(sdk, deltas, tools=[WEATHER_TOOL])
                    return info.value

                error = await in_thread(run)
            assert await deltas.collect(2) == "Hello wor"
    assert isinstance(error.body, dict)
    assert error.body["code"] == "reply_incomplete"


async def test_an_anthropic_stream_that_fails_after_content_ends_with_an_error_event() -> None:
    """The Anthropic stream carries the failure as an `error` event the SDK raises."""
    broken = '{"name": "respond", "arguments": {"message": "Partial ans'
    client = GatedClient([broken], gated=False)
    body = {
        "model": "m",
        "max_tokens": 64,
        "stream": True,
        "messages": USER,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
    }
    with trio.fail_after(20):
        async with client_proxy(client) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.post("/v1/messages", json=body)
    events = [line for line in response.text.splitlines() if line.startswith("event: ")]
    assert response.status_code == 200
    assert events[0] == "event: message_start"
    assert events[-1] == "event: error"
    assert '"type":"error"' in response.text.splitlines()[-2]
    texts = [
        json.loads(line[6:])["delta"]["text"]
        for line in response.text.splitlines()
        if line.startswith("data: ") and '"text_delta"' in line
    ]
    assert "".join(texts) == "Partial ans"


async def test_a_stream_that_fails_before_any_content_is_a_plain_error_status() -> None:
    """Exhausted retries with nothing sent yet give a real HTTP status, even for a stream."""
    client = GatedClient(["no call", "still no call"], gated=False)
    with trio.fail_after(20):
        async with (
            client_proxy(client, max_retries=1) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(
                "/v1/chat/completions",
                json={"model": "m", "stream": True, "messages": USER, "tools": [WEATHER_TOOL]},
            )
    assert response.status_code == 502
    assert response.headers["x-should-retry"] == "false"
    assert response.json()["error"]["code"] == "tool_call_retries_exhausted"
    # What the request did before it failed, as an answer's headers say it.
    assert response.headers["x-forge-attempts"] == "2"
    assert response.headers["x-forge-rules"] == "retry_nudges=1"
