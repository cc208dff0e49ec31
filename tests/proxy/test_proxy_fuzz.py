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
