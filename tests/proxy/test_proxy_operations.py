"""What an operator meets: credentials in a backend URL never logged, a backend's 503 passed on
with its Retry-After, /metrics not counting its own scrapes, a stream the client left early
counted as a stream, and an empty x-api-key beside a valid Bearer token not refusing it."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import pytest
import structlog
import trio
import trio.testing
from proxy_support import GatedClient, client_proxy, proxy_config

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients._faults import status_error
from forge_rt.errors import BackendError, FaultKind
from forge_rt.proxy import BackendConfig, KeyProfile, serve_proxy
from forge_rt.proxy._errors import from_forge_error

CHAT = "/v1/chat/completions"
BODY: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def test_credentials_in_the_backend_url_are_never_logged() -> None:
    with trio.fail_after(20), structlog.testing.capture_logs() as events:
        async with SimBackend.serve(SimConfig(script={"*": ["fine"]})) as sim:
            url = sim.url.replace("http://", "http://admin:hunter2secret@")
            config = proxy_config(backend=BackendConfig(url=url, kind="llamaserver"))
            async with serve_proxy(config) as proxy, httpx.AsyncClient(base_url=proxy) as http:
                assert (await http.post(CHAT, json=BODY)).status_code == 200
    started = [e for e in events if e.get("event") == "proxy.backend"]
    assert started
    assert "***@" in started[0]["url"]
    assert not [e for e in events if "hunter2secret" in repr(e)]


def test_a_backends_503_reaches_the_client_as_503_with_its_retry_after() -> None:
    error = status_error(503, "Service Unavailable", "{}", method="POST", url="u", retry_after="7")
    assert error.retry_after_s == 7.0
    answer = from_forge_error(error)
    assert answer.status == 503
    assert (b"retry-after", b"7") in answer.headers()
    bare = BackendError("down", kind=FaultKind.SERVER_ERROR, retry_safe=True, status=503)
    assert (b"retry-after", b"5") in from_forge_error(bare).headers()  # none given: a default
    dated = status_error(503, "x", "{}", method="POST", url="u", retry_after="Wed, 21 Oct")
    assert dated.retry_after_s is None  # an HTTP date is not guessed at


async def test_metrics_do_not_count_their_own_scrapes_and_an_early_left_stream_is_a_stream() -> (
    None
):
    client = GatedClient(["never streamed"])  # gated: no token comes until released
    with trio.fail_after(20):
        async with client_proxy(client) as url, httpx.AsyncClient(base_url=url) as http:
            for _ in range(3):
                await http.get("/metrics")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: http.post(CHAT, json={**BODY, "stream": True}))
                await client.started.receive()  # the call is running: leave before any byte
                nursery.cancel_scope.cancel()
            record = client.calls[0]
            await record.ended.wait()  # the proxy saw the client go and stopped the call
            await trio.testing.wait_all_tasks_blocked()  # ... and finished the request
            text = (await http.get("/metrics")).text
    requests = [line for line in text.splitlines() if line.startswith("forge_proxy_requests_total")]
    assert not [line for line in requests if 'endpoint="/metrics"' in line]
    assert [line for line in requests if 'stream="true"' in line and "disconnected" in line]


async def test_an_empty_x_api_key_beside_a_valid_bearer_token_is_accepted() -> None:
    keys = (KeyProfile(key="sk-valid-key-0123", name="k"),)
    with trio.fail_after(20):
        async with (
            client_proxy(GatedClient(lambda r: "ok", gated=False), api_keys=keys) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            headers = {"x-api-key": "", "authorization": "Bearer sk-valid-key-0123"}
            response = await http.post(CHAT, json=BODY, headers=headers)
    assert response.status_code == 200


async def test_pipelined_requests_are_all_answered() -> None:
    """HTTP/1.1 pipelining: two requests sent back to back on one connection, two answers."""
    body = b'{"model":"m","messages":[{"role":"user","content":"x"}]}'
    post = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )
    health = b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    with trio.fail_after(20):
        async with client_proxy(GatedClient(lambda r: "ok", gated=False)) as url:
            host, port = url.removeprefix("http://").split(":")
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(post + health)
            received = b""
            while received.count(b"HTTP/1.1 200") < 2:
                received += await stream.receive_some(65536)
            await stream.aclose()
    assert received.index(b'"chat.completion"') < received.rindex(b"HTTP/1.1 200")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nZZ\r\n",
            400,
        ),
        (
            b"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 5\r\n"
            b"content-length: 6\r\n\r\nhello",
            400,
        ),
        (b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * 100_000 + b"\r\n\r\n", 431),
    ],
    ids=["bad-chunk-size", "two-content-lengths", "headers-too-large"],
)
async def test_errors_of_the_http_layer_are_json_too(raw: bytes, status: int) -> None:
    """What h11 cannot parse is answered by the server itself: still JSON, in a shape both
    SDKs read (the Anthropic envelope around an OpenAI-style error object)."""
    with trio.fail_after(20):
        async with client_proxy(GatedClient(lambda r: "ok", gated=False)) as url:
            host, port = url.removeprefix("http://").split(":")
            stream = await trio.open_tcp_stream(host, int(port))
            with contextlib.suppress(trio.BrokenResourceError):  # it may close mid-send
                await stream.send_all(raw)
            received = b""
            while chunk := await stream.receive_some(65536):
                received += chunk
            await stream.aclose()
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status)
    assert b"content-type: application/json" in head
    error = json.loads(body)
    assert error["type"] == "error"
    assert {"type", "message", "param", "code"} <= set(error["error"])
