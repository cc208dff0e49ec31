"""Hypothesis-generated malformed requests: never a 5xx, always an error body in the API's shape."""

from __future__ import annotations

import json
from typing import Any

import httpx
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxy_support import GatedClient, client_proxy

from forge_rt.core import ToolCall
from forge_rt.wire import AnthropicRequest, OpenAIRequest

OPENAI_FIELDS = frozenset(OpenAIRequest.__struct_fields__)
ANTHROPIC_FIELDS = frozenset(AnthropicRequest.__struct_fields__)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
not_an_object = json_values.filter(lambda v: not isinstance(v, dict))
not_a_list = json_values.filter(lambda v: not isinstance(v, list))
# Optional fields may be null (that means "not given"), so null is no error for them.
not_a_list_nor_null = not_a_list.filter(lambda v: v is not None)


def _base(anthropic: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if anthropic:
        body["max_tokens"] = 16
    return body


def _unknown_field(anthropic: bool) -> st.SearchStrategy[dict[str, Any]]:
    known = ANTHROPIC_FIELDS if anthropic else OPENAI_FIELDS
    names = st.text(min_size=1, max_size=12).filter(lambda n: n not in known)
    return st.builds(lambda n, v: {**_base(anthropic), n: v}, names, json_values)


def _wrong_messages(anthropic: bool) -> st.SearchStrategy[dict[str, Any]]:
    bad_message = st.one_of(
        not_an_object,
        st.builds(
            lambda role: {"role": role, "content": "x"},
            st.text(max_size=10).filter(
                lambda r: r not in ("system", "developer", "user", "assistant", "tool", "function")
            ),
        ),
        st.builds(lambda c: {"role": "user", "content": c}, st.integers() | st.booleans()),
        st.builds(
            lambda extra, v: {"role": "user", "content": "x", extra: v},
            st.text(min_size=1, max_size=8).filter(lambda k: k not in ("role", "content", "name")),
            json_values,
        ),
    )
    return st.builds(
        lambda bad, good: {**_base(anthropic), "messages": [*good, bad]},
        bad_message,
        st.lists(st.just({"role": "user", "content": "ok"}), max_size=2),
    )


def _wrong_types(anthropic: bool) -> st.SearchStrategy[dict[str, Any]]:
    fields = {
        "messages": not_a_list,
        "temperature": st.text(min_size=1) | st.lists(st.integers(), min_size=1),
        "stream": st.text(min_size=1) | st.integers(min_value=2),
        "tools": not_a_list_nor_null | st.lists(not_an_object, min_size=1),
        "max_tokens": st.text(min_size=1)
        | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != int(f)),
        "stop_sequences" if anthropic else "stop": st.integers()
        | st.dictionaries(st.text(max_size=3), st.integers(), min_size=1),
    }
    return st.sampled_from(sorted(fields)).flatmap(
        lambda name: fields[name].map(lambda value: {**_base(anthropic), name: value})
    )


def _bodies(anthropic: bool) -> st.SearchStrategy[bytes]:
    encoded = st.one_of(
        not_an_object,
        _unknown_field(anthropic),
        _wrong_messages(anthropic),
        _wrong_types(anthropic),
        st.just({k: v for k, v in _base(anthropic).items() if k != "messages"}),
    ).map(lambda v: json.dumps(v).encode())
    garbage = st.binary(max_size=64).filter(lambda b: _not_json(b))
    return encoded | garbage


def _not_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return True
    return False


def _check_error(response: httpx.Response, anthropic: bool) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    error = body["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["type"], str)
    if anthropic:
        assert body["type"] == "error"
    else:
        assert {"param", "code"} <= set(error)


def _reply(request: Any) -> Any:
    if request.tools:
        return [ToolCall(tool="respond", args={"message": "ok"})]
    return "ok"


async def test_malformed_requests_are_always_4xx_with_an_error_body() -> None:
    """Whatever is wrong with a body, the answer is a 4xx in the called API's error shape."""
    with trio.fail_after(120):
        async with client_proxy(GatedClient(_reply, gated=False)) as url:

            def fuzz() -> None:
                with httpx.Client(base_url=url, timeout=20) as http:

                    @settings(
                        max_examples=150,
                        deadline=None,
                        suppress_health_check=[HealthCheck.too_slow],
                    )
                    @given(st.booleans().flatmap(lambda a: st.tuples(st.just(a), _bodies(a))))
                    def one(case: tuple[bool, bytes]) -> None:
                        anthropic, body = case
                        path = "/v1/messages" if anthropic else "/v1/chat/completions"
                        response = http.post(
                            path, content=body, headers={"content-type": "application/json"}
                        )
                        _check_error(response, anthropic)

                    one()

            await trio.to_thread.run_sync(fuzz)


ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("POST", "/chat/completions"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/messages/count_tokens"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/some-model"),
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    ("GET", "/forge/usage"),
    ("GET", "/no/such/route"),
    ("DELETE", "/v1/chat/completions"),
]
# What an HTTP client can send at all: printable, without surrounding whitespace.
header_values = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40
).filter(lambda v: v == v.strip())
hostile_headers = st.fixed_dictionaries(
    {},
    optional={
        "host": st.sampled_from(["attacker.example", "localhost:1", "[::1]", "127.0.0.1", ""])
        | header_values,
        "origin": st.sampled_from(["http://evil.example", "null", "http://127.0.0.1"])
        | header_values,
        "content-type": st.sampled_from(
            ["text/plain", "application/json; charset=utf-8", "multipart/form-data", ""]
        )
        | header_values,
        "x-forge-priority": st.integers().map(str) | header_values,
        "x-api-key": header_values,
        "authorization": header_values,
        "anthropic-version": header_values,
    },
)
schemas = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "dict", 5, None])}),
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array"]) | json_values,
            "properties": st.dictionaries(st.text(max_size=5), inner, max_size=3) | json_values,
            "required": st.lists(st.text(max_size=5), max_size=3) | json_values,
            "items": inner | json_values,
            "anyOf": st.lists(inner, max_size=3) | json_values,
            "enum": json_values,
        },
    ),
    max_leaves=10,
)


def _tool_bodies() -> st.SearchStrategy[bytes]:
    openai_tool = schemas.map(
        lambda s: {"type": "function", "function": {"name": "f", "parameters": s}}
    )
    return st.lists(openai_tool, min_size=1, max_size=3).map(
        lambda tools: json.dumps({**_base(False), "tools": tools}).encode()
    )


async def test_every_route_under_hostile_headers_and_bodies_never_fails_the_server() -> None:
    """Any route, any mix of Host / Origin / content-type / priority / key headers, any body
    (garbage, malformed tool schemas): never a 5xx, and every error is JSON naming an error."""
    bodies = _bodies(False) | _bodies(True) | _tool_bodies() | st.binary(max_size=64)
    with trio.fail_after(300):
        async with client_proxy(GatedClient(_reply, gated=False)) as url:

            def fuzz() -> None:
                with httpx.Client(base_url=url, timeout=20) as http:

                    @settings(
                        max_examples=300,
                        deadline=None,
                        suppress_health_check=[HealthCheck.too_slow],
                    )
                    @given(st.sampled_from(ROUTES), hostile_headers, bodies)
                    def one(route: tuple[str, str], headers: dict[str, str], body: bytes) -> None:
                        method, path = route
                        response = http.request(method, path, content=body, headers=headers)
                        assert response.status_code < 500, (route, headers, response.text)
                        if response.status_code >= 400:
                            assert "error" in response.json()

                    one()

            await trio.to_thread.run_sync(fuzz)
