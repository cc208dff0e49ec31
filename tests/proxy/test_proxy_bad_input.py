"""Bad input gets a clear 4xx in the called API's shape, never an empty 500 or a stall:
malformed tool schemas, duplicate tools, tool results that answer nothing, too many messages,
JSON nested thousands deep; a backend that is down is a 503, and a bug is still a JSON 500."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
import trio
from proxy_support import GatedClient, client_proxy, proxy_config

from forge_rt.core import ToolCall
from forge_rt.proxy import BackendConfig, serve_proxy

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
HI = [{"role": "user", "content": "hi"}]


def _tool(params: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": params}}


def _echo() -> GatedClient:
    return GatedClient(lambda request: "ok", gated=False)


async def _post(path: str, body: Any, **config: Any) -> httpx.Response:
    with trio.fail_after(20):
        async with client_proxy(_echo(), **config) as url, httpx.AsyncClient(base_url=url) as http:
            if isinstance(body, bytes):
                headers = {"content-type": "application/json"}
                return await http.post(path, content=body, headers=headers)
            return await http.post(path, json=body)


@pytest.mark.parametrize(
    ("params", "keyword", "value"),
    [
        ({"type": "object", "properties": "nope"}, "properties", "x"),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": 5},
            "required",
            "x",
        ),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "type", "x"),
        ({"type": "object", "properties": {"a": {"enum": 5}}}, "enum", "x"),
        ({"type": "object", "properties": {"a": {"anyOf": "x"}}}, "anyOf", "x"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": "x"}}},
            "items",
            ["x"],
        ),
    ],
    ids=["properties", "required", "type", "enum", "anyOf", "items"],
)
async def test_a_malformed_tool_schema_is_served_with_the_keyword_named(
    params: dict[str, Any], keyword: str, value: Any
) -> None:
    """A structural keyword that breaks JSON Schema (it used to be a 500 with an empty body)
    is dropped from what forge_rt uses, named in ``x-forge-ignored-schema-keywords``, and the
    request is served: a call of the tool comes back."""
    client = GatedClient(lambda request: [ToolCall(tool="f", args={"a": value})], gated=False)
    body = {"model": "m", "messages": HI, "tools": [_tool(params)]}
    with trio.fail_after(20):
        async with client_proxy(client) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.post(CHAT, json=body)
    assert response.status_code == 200
    assert keyword in response.headers["x-forge-ignored-schema-keywords"].split(",")
    call = response.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "f"


async def test_two_tools_of_one_name_are_a_400() -> None:
    tools = [_tool({"type": "object"}), _tool({"type": "object"})]
    response = await _post(CHAT, {"model": "m", "messages": HI, "tools": tools})
    assert response.status_code == 400
    assert "given more than once: f" in response.json()["error"]["message"]


async def test_a_tool_result_answering_no_call_is_a_400_in_both_apis() -> None:
    openai = await _post(
        CHAT,
        {"model": "m", "messages": [*HI, {"role": "tool", "tool_call_id": "x1", "content": "r"}]},
    )
    block = {"type": "tool_result", "tool_use_id": "x2", "content": "r"}
    anthropic = await _post(
        MESSAGES,
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": [block]}]},
    )
    assert openai.status_code == anthropic.status_code == 400
    assert "'x1' answers no tool call" in openai.json()["error"]["message"]
    assert anthropic.json()["type"] == "error"
    assert "'x2' answers no tool call" in anthropic.json()["error"]["message"]


async def test_too_many_messages_are_refused_before_they_are_decoded() -> None:
    """200,000 tiny messages (under the size limit): 413 by count, in the API's shape."""
    body = b'{"model":"m","messages":[' + b",".join([b'{"role":"user","content":"x"}'] * 200_000)
    body += b"]}"
    response = await _post(CHAT, body)
    assert response.status_code == 413
    assert response.json()["error"]["param"] == "messages"
    assert "200000 messages" in response.json()["error"]["message"]


@pytest.mark.parametrize("path", [CHAT, MESSAGES, "/v1/messages/count_tokens"])
async def test_json_nested_thousands_deep_is_a_400_on_every_post_route(path: str) -> None:
    deep = '{"type":"string"}'
    for _ in range(3000):
        deep = '{"type":"object","properties":{"a":' + deep + "}}"
    if path == CHAT:
        tool = '{"type":"function","function":{"name":"f","parameters":' + deep + "}}"
    else:
        tool = '{"name":"f","input_schema":' + deep + "}"
    body = '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":['
    response = await _post(path, (body + tool + "]}").encode())
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_a_schema_deeper_than_the_limit_is_refused_by_name() -> None:
    """Within what JSON decoding takes, but past the schema depth limit: a named 400."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = {"type": "object", "properties": {"a": deep}}
    response = await _post(CHAT, {"model": "m", "messages": HI, "tools": [_tool(deep)]})
    assert response.status_code == 400
    assert "nested deeper than 64 levels" in response.json()["error"]["message"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_backend_that_is_down_is_503_not_ready_and_never_named() -> None:
    """/v1/models answers 503 in API shape without the backend's URL; /health (liveness)
    stays 200 while /ready says 503."""
    backend_url = f"http://127.0.0.1:{_closed_port()}"
    config = proxy_config(backend=BackendConfig(url=backend_url, kind="llamaserver"))
    with trio.fail_after(30):
        async with serve_proxy(config) as url, httpx.AsyncClient(base_url=url) as http:
            models = await http.get("/v1/models")
            health = await http.get("/health")
            ready = await http.get("/ready")
    assert models.status_code == 503
    assert models.json()["error"]["code"] == "backend_unavailable"
    assert models.headers["retry-after"] == "5"
    assert backend_url not in models.text
    assert (health.status_code, ready.status_code) == (200, 503)
    assert ready.json()["status"] == "unavailable"


async def test_ready_is_200_while_the_backend_answers() -> None:
    with trio.fail_after(20):
        async with client_proxy(_echo()) as url, httpx.AsyncClient(base_url=url) as http:
            ready = await http.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


async def test_a_bug_is_still_a_json_500_in_the_apis_shape() -> None:
    """An exception nobody expected (here, in the backend client) is logged and answered as a
    JSON 500 naming the request, not an empty body from the HTTP server."""

    def broken(request: Any) -> str:
        raise ZeroDivisionError("a bug")

    with trio.fail_after(20):
        async with (
            client_proxy(GatedClient(broken, gated=False)) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(
                MESSAGES, json={"model": "m", "max_tokens": 8, "messages": HI}
            )
    assert response.status_code == 500
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "ZeroDivisionError" in body["error"]["message"]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_the_body_tally_counts_patterns_split_across_chunks(size: int) -> None:
    """However the body is cut into chunks, the tally counts what the whole body holds."""
    from forge_rt.proxy._limits import BodyTally

    body = b'{"messages":[{"role":"user"},{"role":"tool","name":"f"}],"tools":[{"name":"g"}]}'
    tally = BodyTally()
    for start in range(0, len(body), size):
        tally.feed(body[start : start + size])
    assert (tally.roles, tally.names) == (body.count(b'"role"'), body.count(b'"name"'))
