"""Injected faults produce exactly the bytes (or silence) documented for them; restarts."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest
import trio
from sim_helpers import RawClient, sse_payloads, user

from forge_rt.backends.sim import Fault, SimBackend, SimConfig

TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
STREAM = {"messages": user("q"), "stream": True}
PLAIN = {"messages": user("q")}


@pytest.fixture
async def sim() -> Any:
    async with SimBackend.serve(SimConfig(script={"*": [TEXT]})) as backend:
        yield backend


def _body(raw: bytes) -> bytes:
    """The body of a raw HTTP response (chunked framing removed)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return body
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, body = out + rest[:size], rest[size + 2 :]
    return out


async def test_http_500_is_an_openai_error_body(sim: SimBackend, http: httpx.AsyncClient) -> None:
    """``http_500`` answers 500 with an OpenAI-shaped error naming the fault."""
    sim.inject(Fault.HTTP_500)
    response = await http.post("/v1/chat/completions", json=PLAIN)
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "code": 500,
            "message": "simulated internal server error (fault http_500)",
            "type": "server_error",
        }
    }
    assert sim.stats.faults == {"http_500": 1}


async def test_http_503_by_header_carries_retry_after(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """The ``x-sim-fault`` header injects a fault into that request only."""
    response = await http.post(
        "/v1/chat/completions", json=PLAIN, headers={"x-sim-fault": "http_503"}
    )
    assert (response.status_code, response.headers["retry-after"]) == (503, "1")
    assert response.json()["error"]["type"] == "unavailable_error"
    assert (await http.post("/v1/chat/completions", json=PLAIN)).status_code == 200


async def test_unknown_fault_header_is_a_400_listing_the_faults(
    http: httpx.AsyncClient,
) -> None:
    """A misspelt fault name is rejected with the list of valid names."""
    response = await http.post(
        "/v1/chat/completions", json=PLAIN, headers={"x-sim-fault": "explode"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(
        "unknown x-sim-fault value 'explode'; use one of: http_500, http_503,"
    )


async def test_inject_count_covers_that_many_requests(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``inject(fault, count=n)`` fails the next n inference requests, then stops."""
    sim.inject(Fault.HTTP_503, count=2)
    statuses = [(await http.post("/v1/chat/completions", json=PLAIN)).status_code for _ in "abc"]
    assert statuses == [503, 503, 200]


async def test_fault_rates_inject_at_random() -> None:
    """``fault_rates`` draws faults per request; a rate of 1 hits every request."""
    config = SimConfig(script={"*": ["x"]}, fault_rates={Fault.HTTP_500: 1.0})
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            statuses = [
                (await http.post("/v1/chat/completions", json=PLAIN)).status_code for _ in "ab"
            ]
    assert statuses == [500, 500]


async def test_reset_before_first_byte_sends_nothing(sim: SimBackend) -> None:
    """``reset_before_first_byte`` reads the request, then resets without a response byte."""
    sim.inject(Fault.RESET_BEFORE_FIRST_BYTE)
    client = await RawClient.connect(sim.url)
    await client.send("/v1/chat/completions", PLAIN)
    with pytest.raises(trio.BrokenResourceError):
        await client.read_to_end()
    assert client.received == b""
    await client.aclose()


async def test_reset_before_first_byte_is_a_read_error_for_httpx(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """An httpx client sees the reset as a transport error, not a response."""
    sim.inject(Fault.RESET_BEFORE_FIRST_BYTE)
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        await http.post("/v1/chat/completions", json=PLAIN)


async def test_reset_mid_stream_cuts_after_some_events(sim: SimBackend) -> None:
    """``reset_mid_stream`` sends the head and some SSE events, then resets before [DONE]."""
    sim.inject(Fault.RESET_MID_STREAM)
    client = await RawClient.connect(sim.url)
    await client.send("/v1/chat/completions", STREAM)
    with pytest.raises(trio.BrokenResourceError):
        await client.read_to_end()
    payloads = sse_payloads(_body(client.received).decode())
    assert client.received.startswith(b"HTTP/1.1 200 ")
    assert len(payloads) >= 2
    assert "[DONE]" not in payloads
    await client.aclose()


async def test_reset_mid_body_sends_part_of_the_announced_body(sim: SimBackend) -> None:
    """Without streaming, ``reset_mid_stream`` sends half the announced body, then resets."""
    sim.inject(Fault.RESET_MID_STREAM)
    client = await RawClient.connect(sim.url)
    await client.send("/v1/chat/completions", PLAIN)
    with pytest.raises(trio.BrokenResourceError):
        await client.read_to_end()
    head, _, body = client.received.partition(b"\r\n\r\n")
    announced = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    assert 0 < len(body) < announced
    await client.aclose()


async def test_malformed_sse_has_one_non_json_line_then_carries_on(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``malformed_sse`` puts one ``data:`` line that is not JSON into an otherwise whole stream."""
    sim.inject(Fault.MALFORMED_SSE)
    response = await http.post("/v1/chat/completions", json=STREAM)
    payloads = sse_payloads(response.text)
    broken = []
    for payload in payloads[:-1]:
        try:
            msgspec.json.decode(payload)
        except msgspec.DecodeError:
            broken.append(payload)
    assert len(broken) == 1
    assert payloads[-1] == "[DONE]"


async def test_truncated_json_body_is_cut_with_valid_framing(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``truncated_json`` answers 200 with a complete HTTP body that is half a JSON document."""
    sim.inject(Fault.TRUNCATED_JSON)
    response = await http.post("/v1/chat/completions", json=PLAIN)
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    assert response.content.startswith(b'{"id":"chatcmpl-sim-')
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(response.content)


async def test_truncated_json_stream_ends_on_a_cut_event(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """In a stream, ``truncated_json`` ends cleanly after a cut final event, without [DONE]."""
    sim.inject(Fault.TRUNCATED_JSON)
    payloads = sse_payloads((await http.post("/v1/chat/completions", json=STREAM)).text)
    assert "[DONE]" not in payloads
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(payloads[-1])
    assert msgspec.json.decode(payloads[-2])["choices"][0]["delta"]


async def test_hang_never_answers_and_ends_when_the_client_leaves(sim: SimBackend) -> None:
    """``hang`` sends nothing, holds no slot, and stops as soon as the client gives up."""
    sim.inject(Fault.HANG)
    async with httpx.AsyncClient(base_url=sim.url, timeout=0.2) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/v1/chat/completions", json=PLAIN)
    with trio.fail_after(10):
        await sim.wait_until(lambda s: s.in_flight == 0)
    assert sim.stats.slots[0].requests == 0
    assert sim.stats.faults == {"hang": 1}


async def test_slow_drip_sends_the_response_a_byte_at_a_time(sim: SimBackend) -> None:
    """``slow_drip`` delivers the usual response, split into many tiny writes."""
    sim.inject(Fault.SLOW_DRIP)
    client = await RawClient.connect(sim.url)
    await client.send("/v1/chat/completions", PLAIN, headers={"connection": "close"})
    reads = 0
    with trio.fail_after(20):
        while True:
            data = await client.stream.receive_some(65536)
            if not data:
                break
            client.received += data
            reads += 1
    await client.aclose()
    body = msgspec.json.decode(_body(client.received))
    assert body["choices"][0]["message"]["content"] == TEXT
    assert reads > 20


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        (
            "/v1/messages",
            {"messages": user("q"), "max_tokens": 10},
            {
                "type": "error",
                "error": {
                    "type": "overloaded_error",
                    "message": "simulated overload: the server is busy (fault http_503)",
                },
            },
        ),
        (
            "/api/chat",
            {"messages": user("q")},
            {"error": "simulated overload: the server is busy (fault http_503)"},
        ),
    ],
    ids=["anthropic", "ollama"],
)
async def test_error_bodies_follow_each_api(
    sim: SimBackend, http: httpx.AsyncClient, path: str, body: dict[str, Any], expected: Any
) -> None:
    """Errors are shaped like each API's own (Anthropic error object, Ollama ``error`` string)."""
    sim.inject(Fault.HTTP_503)
    response = await http.post(path, json=body)
    assert (response.status_code, response.json()) == (503, expected)


async def test_restart_refuses_connections_while_down_then_serves_on_the_same_port(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """While restarting nothing listens; afterwards the same URL answers and caches are empty."""
    assert (await http.post("/v1/chat/completions", json=PLAIN)).status_code == 200
    assert sim.stats.slots[0].cache_tokens > 0
    url, back = sim.url, trio.Event()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: sim.restart(until=back))
            await sim.wait_until(lambda s: s.restarts == 1)
            async with httpx.AsyncClient(base_url=url) as fresh:
                with pytest.raises(httpx.ConnectError):
                    await fresh.get("/health")
            assert sim.stats.slots[0].cache_tokens == 0
            back.set()
        async with httpx.AsyncClient(base_url=url) as fresh:
            assert (await fresh.get("/health")).json() == {"status": "ok"}
    assert sim.url == url


async def test_restart_drops_in_flight_streams() -> None:
    """A stream in progress when the sim restarts is cut off without its end."""
    config = SimConfig(decode_tps=50, script={"*": [TEXT * 20]})
    with trio.fail_after(10):
        async with SimBackend.serve(config) as sim:
            client = await RawClient.connect(sim.url)
            await client.send("/v1/chat/completions", STREAM)
            await client.read_until(b'"content":"')
            await sim.restart()
            with pytest.raises((trio.BrokenResourceError, EOFError)):
                await client.read_until(b"[DONE]")
            await client.aclose()
    assert b"[DONE]" not in client.received
    assert sim.stats.completed == 0
