"""Security and bad input: auth, priorities per key, limits, timeouts, CORS, error shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
import trio
from proxy_support import GatedClient, client_proxy, sim_proxy

from forge_rt.backends.sim import SimConfig
from forge_rt.proxy import KeyProfile, ProxyConfig, load_key_file

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
JSON_TYPE = {"content-type": "application/json"}
OPENAI_BODY: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANTHROPIC_BODY: dict[str, Any] = {**OPENAI_BODY, "max_tokens": 16}
KEYS = (
    KeyProfile(key="sk-voice-0123456789", name="voice", priority=0),
    KeyProfile(key="sk-batch-0123456789", name="batch", priority=20),
)


def _echo() -> GatedClient:
    return GatedClient(lambda request: "ok", gated=False)


def _is_openai_error(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)


def _is_anthropic_error(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        body.get("type") == "error"
        and isinstance(error, dict)
        and isinstance(error.get("type"), str)
        and isinstance(error.get("message"), str)
    )


def test_binds_loopback_by_default() -> None:
    """An unconfigured proxy listens on 127.0.0.1 only; exposing it is a deliberate act."""
    assert ProxyConfig().host == "127.0.0.1"


async def test_served_url_is_loopback() -> None:
    """serve_proxy's URL is on the loopback address."""
    with trio.fail_after(20):
        async with client_proxy(_echo()) as url:
            assert url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"authorization": "Bearer sk-wrong-0123456789"}, 401),
        ({"authorization": "Bearer sk-voice-0123456789"}, 200),
        ({"x-api-key": "sk-batch-0123456789"}, 200),
        ({"authorization": "bearer   sk-voice-0123456789"}, 200),
    ],
    ids=["missing", "wrong", "bearer", "x-api-key", "loose-bearer"],
)
async def test_inbound_keys(headers: dict[str, str], status: int) -> None:
    """With keys configured only a listed key gets through, as a bearer or an x-api-key."""
    with trio.fail_after(20):
        async with (
            client_proxy(_echo(), api_keys=KEYS) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=OPENAI_BODY, headers=headers)
    assert response.status_code == status
    if status == 401:
        assert _is_openai_error(response.json())
        assert response.json()["error"]["type"] == "authentication_error"


async def test_auth_errors_on_messages_are_anthropic_shaped() -> None:
    """A rejected Anthropic request gets an Anthropic-shaped 401."""
    with trio.fail_after(20):
        async with (
            client_proxy(_echo(), api_keys=KEYS) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(MESSAGES, json=ANTHROPIC_BODY)
    assert response.status_code == 401
    assert _is_anthropic_error(response.json())


async def test_health_is_open_and_metrics_need_a_key() -> None:
    """Probes reach /health without a key; /metrics and /forge/usage need one."""
    with trio.fail_after(20):
        async with (
            client_proxy(_echo(), api_keys=KEYS) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            health = await http.get("/health")
            metrics = await http.get("/metrics")
            usage = await http.get("/forge/usage")
            allowed = await http.get("/metrics", headers={"x-api-key": "sk-voice-0123456789"})
    assert (health.status_code, metrics.status_code, usage.status_code) == (200, 401, 401)
    assert allowed.status_code == 200
    assert allowed.headers["content-type"].startswith("text/plain")


def test_key_file_gives_names_and_priorities(tmp_path: Path) -> None:
    """A TOML key file lists keys with names and (named or numeric) priorities."""
    path = tmp_path / "keys.toml"
    path.write_text(
        '[[keys]]\nname = "voice"\nkey = "sk-voice-0123456789"\npriority = "high"\n\n'
        '[[keys]]\nname = "batch"\nkey = "sk-batch-0123456789"\npriority = 30\n'
        "max_priority = 5\n"
    )
    keys = load_key_file(path)
    assert [(k.name, k.priority, k.most_urgent) for k in keys] == [
        ("voice", 0, 0),
        ("batch", 30, 5),
    ]
    assert "sk-voice" not in repr(keys)


def test_key_file_errors_name_the_file(tmp_path: Path) -> None:
    """A broken key file fails with a message naming the file."""
    path = tmp_path / "keys.toml"
    path.write_text('[[keys]]\nname = "x"\nkey = "short"\n')
    with pytest.raises(ValueError, match=r"^API key file .*keys\.toml: "):
        load_key_file(path)


@pytest.mark.parametrize(
    ("key", "header", "status"),
    [
        ("sk-batch-0123456789", "high", 403),
        ("sk-batch-0123456789", "low", 200),
        ("sk-batch-0123456789", "25", 200),
        ("sk-voice-0123456789", "high", 200),
        ("sk-voice-0123456789", "urgent!", 400),
    ],
    ids=["batch-asks-high", "batch-asks-low", "batch-asks-lower", "voice-asks-high", "garbage"],
)
async def test_priority_header_is_bounded_by_the_key(key: str, header: str, status: int) -> None:
    """A key may lower its priority with x-forge-priority, never raise it above its profile."""
    with trio.fail_after(20):
        async with (
            client_proxy(_echo(), api_keys=KEYS) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(
                CHAT, json=OPENAI_BODY, headers={"x-api-key": key, "x-forge-priority": header}
            )
    assert response.status_code == status
    if status != 200:
        assert _is_openai_error(response.json())


async def test_body_over_the_limit_is_413() -> None:
    """A declared or streamed body over max_body_bytes is refused with 413, in API shape."""
    big = {**ANTHROPIC_BODY, "messages": [{"role": "user", "content": "x" * 5000}]}

    async def chunks() -> Any:
        for _ in range(10):
            yield b" " * 1000

    with trio.fail_after(20):
        async with (
            client_proxy(_echo(), max_body_bytes=4096) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            declared = await http.post(MESSAGES, json=big)
            streamed = await http.post(CHAT, content=chunks(), headers=JSON_TYPE)
    assert declared.status_code == 413
    assert _is_anthropic_error(declared.json())
    assert declared.json()["error"]["type"] == "request_too_large"
    assert streamed.status_code == 413
    assert _is_openai_error(streamed.json())


async def test_a_body_that_never_finishes_is_408() -> None:
    """A client that stalls mid-body gets 408 after the body timeout, not a held connection."""
    with trio.fail_after(20):
        async with client_proxy(_echo(), body_timeout_s=0.2) as url:
            host, port = url.removeprefix("http://").split(":")
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                b"content-type: application/json\r\ncontent-length: 100\r\n\r\n{"
            )
            received = b""
            while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
                received += await stream.receive_some(65536)
            await stream.aclose()
    assert received.startswith(b"HTTP/1.1 408")
    assert b'"code":"body_timeout"' in received


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        (CHAT, b"{not json", "not valid JSON"),
        (CHAT, b'{"messages": 3}', "Expected `array`, got `int` - at `$.messages`"),
        (CHAT, b'{"messages": [], "temperture": 1}', "unknown field `temperture`"),
        (CHAT, b'{"messages": []}', "at least one message"),
        (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "n": 3}', "only n=1"),
        (
            CHAT,
            b'{"messages": [{"role": "tool", "content": "x"}]}',
            "missing required field `tool_call_id`",
        ),
        (MESSAGES, b"[]", "Expected `object`, got `array`"),
        (MESSAGES, b'{"messages": [{"role": "user", "content": "x"}]}', "max_tokens"),
        (
            MESSAGES,
            b'{"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]}',
            "Invalid value 'video'",
        ),
        (
            MESSAGES,
            b'{"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], '
            b'"tools": [{"name": "f", "input_schema": {}, "colour": "red"}]}',
            "unknown field `colour`",
        ),
    ],
    ids=[
        "not-json",
        "wrong-type",
        "unknown-field",
        "no-messages",
        "n-choices",
        "tool-without-id",
        "not-object",
        "no-max-tokens",
        "unknown-block",
        "bad-custom-tool",
    ],
)
async def test_bad_bodies_are_400_in_the_api_shape(path: str, body: bytes, fragment: str) -> None:
    """Every malformed body is a 400 whose message says what is wrong, in the API's shape."""
    with trio.fail_after(20):
        async with client_proxy(_echo()) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.post(path, content=body, headers=JSON_TYPE)
    assert response.status_code == 400
    data = response.json()
    if path == MESSAGES:
        assert _is_anthropic_error(data)
    else:
        assert _is_openai_error(data)
    assert fragment in data["error"]["message"]


async def test_unknown_path_and_wrong_method() -> None:
    """An unknown path is a 404 and a wrong method a 405, both with error bodies."""
    with trio.fail_after(20):
        async with client_proxy(_echo()) as url, httpx.AsyncClient(base_url=url) as http:
            missing = await http.get("/v1/embeddings")
            wrong = await http.get(CHAT)
    assert missing.status_code == 404
    assert _is_openai_error(missing.json())
    assert wrong.status_code == 405
    assert _is_openai_error(wrong.json())


async def test_cors_is_off_unless_configured() -> None:
    """Without --cors-origin no CORS header is sent, preflights are refused, and so is a
    cross-origin request (403: a web page cannot drive the local model)."""
    headers = {"origin": "http://evil.example", "access-control-request-method": "POST"}
    with trio.fail_after(20):
        async with client_proxy(_echo()) as url, httpx.AsyncClient(base_url=url) as http:
            preflight = await http.options(CHAT, headers=headers)
            simple = await http.post(CHAT, json=OPENAI_BODY, headers={"origin": "http://x.example"})
    assert preflight.status_code == 403
    assert simple.status_code == 403
    assert simple.json()["error"]["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in simple.headers


async def test_cors_allows_only_the_configured_origin() -> None:
    """With an origin configured, it (and only it) gets CORS headers and preflight answers."""
    origin = "http://app.example"
    preflight_headers = {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    with trio.fail_after(20):
        async with (
            client_proxy(_echo(), cors_origins=(origin,)) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            preflight = await http.options(CHAT, headers=preflight_headers)
            allowed = await http.post(CHAT, json=OPENAI_BODY, headers={"origin": origin})
            other = await http.post(
                CHAT, json=OPENAI_BODY, headers={"origin": "http://evil.example"}
            )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["access-control-allow-headers"] == "authorization, content-type"
    assert allowed.headers["access-control-allow-origin"] == origin
    assert "access-control-allow-origin" not in other.headers


async def test_backend_credentials_never_reach_logs_or_errors() -> None:
    """The backend API key appears in no log event, config repr or client-facing error."""
    secret = "sk-backend-very-secret-42"
    with trio.fail_after(20), structlog.testing.capture_logs() as events:
        async with (
            sim_proxy(
                SimConfig(api_key=secret, script={"*": ["fine"]}), backend_api_key=secret
            ) as (sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            ok = await http.post(CHAT, json=OPENAI_BODY)
            sim.config = SimConfig(api_key="another-key-entirely", script={"*": ["x"]})
            rejected = await http.post(CHAT, json=OPENAI_BODY)
    assert ok.status_code == 200
    assert rejected.status_code == 502  # the proxy's own credentials: the operator's problem
    assert rejected.json()["error"]["code"] == "backend_auth_failed"
    assert secret not in rejected.text
    assert events  # logging happened: startup, the backend, the failure
    assert not [e for e in events if secret in repr(e)]
