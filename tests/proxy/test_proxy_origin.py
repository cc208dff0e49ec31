"""Safe defaults for a local server: the Host allowlist, cross-origin refusal, JSON-only POST
bodies and the priority ceiling of requests without a key -- so a web page the user opens can
neither drive the local model (CSRF, DNS rebinding) nor outrank real clients."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from proxy_support import GatedClient, client_proxy

from forge_rt.proxy._origin import OriginGuard, host_name

CHAT = "/v1/chat/completions"
BODY: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _echo() -> GatedClient:
    return GatedClient(lambda request: "ok", gated=False)


async def _send(config: dict[str, Any], *requests: dict[str, Any]) -> list[httpx.Response]:
    with trio.fail_after(20):
        async with client_proxy(_echo(), **config) as url, httpx.AsyncClient(base_url=url) as http:
            return [await http.request(**r) for r in requests]


async def test_a_web_pages_text_plain_post_is_refused() -> None:
    """The CSRF shape: a cross-origin "simple request" (text/plain, no preflight) gets 403;
    the same body without an Origin but as text/plain gets 415. Neither reaches the model."""
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    plain = {"content-type": "text/plain"}
    csrf, untyped = await _send(
        {},
        {
            "method": "POST",
            "url": CHAT,
            "content": body,
            "headers": {**plain, "origin": "http://evil.example"},
        },
        {"method": "POST", "url": CHAT, "content": body, "headers": plain},
    )
    assert (csrf.status_code, csrf.json()["error"]["code"]) == (403, "origin_not_allowed")
    assert (untyped.status_code, untyped.json()["error"]["code"]) == (
        415,
        "unsupported_media_type",
    )


async def test_dns_rebinding_is_refused_on_every_route() -> None:
    """``Host: attacker.example`` is refused, /health included; loopback names are answered."""
    responses = await _send(
        {},
        {"method": "POST", "url": CHAT, "json": BODY, "headers": {"host": "attacker.example"}},
        {"method": "GET", "url": "/health", "headers": {"host": "attacker.example:8081"}},
        {"method": "GET", "url": "/health", "headers": {"host": "localhost:8081"}},
        {"method": "POST", "url": CHAT, "json": BODY, "headers": {"host": "[::1]:8081"}},
    )
    assert [r.status_code for r in responses] == [403, 403, 200, 200]
    assert responses[0].json()["error"]["code"] == "host_not_allowed"


async def test_an_allowed_host_and_the_proxys_own_origin_are_answered() -> None:
    """--allowed-host adds a name; a page served from the proxy's own origin is same-origin."""
    lan, same = await _send(
        {"allowed_hosts": ("forge.lan",)},
        {"method": "POST", "url": CHAT, "json": BODY, "headers": {"host": "forge.lan"}},
        {
            "method": "POST",
            "url": CHAT,
            "json": BODY,
            "headers": {"host": "forge.lan:8081", "origin": "http://forge.lan:8081"},
        },
    )
    assert (lan.status_code, same.status_code) == (200, 200)


async def test_without_a_key_a_client_cannot_make_itself_urgent() -> None:
    """The anonymous ceiling is "normal": "high" or an absurd number is refused, "low" runs."""
    high, absurd, low = await _send(
        {},
        {"method": "POST", "url": CHAT, "json": BODY, "headers": {"x-forge-priority": "high"}},
        {
            "method": "POST",
            "url": CHAT,
            "json": BODY,
            "headers": {"x-forge-priority": "-1000000000000000000"},
        },
        {"method": "POST", "url": CHAT, "json": BODY, "headers": {"x-forge-priority": "low"}},
    )
    assert (high.status_code, high.json()["error"]["code"]) == (403, "priority_not_allowed")
    assert (absurd.status_code, absurd.json()["error"]["code"]) == (400, "invalid_priority")
    assert low.status_code == 200


async def test_the_ceiling_can_be_raised_by_the_operator() -> None:
    (high,) = await _send(
        {"anonymous_max_priority": 0},
        {"method": "POST", "url": CHAT, "json": BODY, "headers": {"x-forge-priority": "high"}},
    )
    assert high.status_code == 200


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("127.0.0.1:8081", "127.0.0.1"),
        ("LOCALHOST", "localhost"),
        ("[::1]:8081", "::1"),
        ("::1", "::1"),
        ("forge.lan", "forge.lan"),
    ],
)
def test_host_names_are_read_without_port_or_brackets(value: str, name: str) -> None:
    assert host_name(value) == name


def test_the_bound_address_is_allowed_unless_it_is_a_wildcard() -> None:
    """Bound to a LAN address, that address is a valid Host; bound to 0.0.0.0, only the
    loopback names and --allowed-host ones are (0.0.0.0 is not a name clients use)."""
    lan = OriginGuard(bind_host="192.168.1.5", allowed_hosts=(), cors_origins=())
    wildcard = OriginGuard(bind_host="0.0.0.0", allowed_hosts=("box",), cors_origins=())
    assert "192.168.1.5" in lan.allowed_hosts
    assert wildcard.allowed_hosts == {"localhost", "127.0.0.1", "::1", "box"}


async def test_a_request_refused_before_its_body_is_read_does_not_break_the_next_one() -> None:
    """Refused before its body is read (a bad Host, a GET with a body), the answer says
    ``connection: close``, so a pooling client opens a new connection for its next request
    instead of finding the old one dropped."""
    with trio.fail_after(30):
        async with client_proxy(_echo()) as url, httpx.AsyncClient(base_url=url) as http:
            for _ in range(20):
                refused = await http.post(CHAT, json=BODY, headers={"host": "attacker.example"})
                assert refused.status_code == 403
                assert refused.headers["connection"] == "close"
                with_body = await http.request("GET", "/ready", content=b'{"a": 1}')
                assert with_body.status_code == 200
                assert (await http.post(CHAT, json=BODY)).status_code == 200
