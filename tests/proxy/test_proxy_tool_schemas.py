"""Tool schemas through the proxy: what forge_rt does not enforce is served and named, never a 400."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxy_support import GatedClient, client_proxy, in_thread, sim_proxy

from forge_rt.backends.sim import SimConfig, SimReply, SimToolCall
from forge_rt.core import ToolCall

USER: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


def _call(name: str, **args: Any) -> SimReply:
    return SimReply(tool_calls=(SimToolCall(name=name, arguments=args),))


def _script(*replies: SimReply | str) -> SimConfig:
    return SimConfig(script={"*": list(replies)})


BFCL_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["c", "f"], "optional": True},
            },
            "required": ["city"],
        },
    },
}


async def test_a_tool_schema_with_unknown_keywords_is_served_and_they_are_named() -> None:
    """A BFCL-style `optional` keyword is no 400: the call comes back, the keyword in a header."""
    config = _script(_call("get_weather", city="Paris"), _call("get_weather", city="Paris"))
    anthropic_tool = {
        "name": "get_weather",
        "input_schema": BFCL_TOOL["function"]["parameters"],  # type: ignore[index]
    }
    with trio.fail_after(30):
        async with sim_proxy(config) as (_sim, url):
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as oa:
                raw = await in_thread(
                    lambda: oa.chat.completions.with_raw_response.create(
                        model="m", messages=USER, tools=[BFCL_TOOL]
                    )
                )
            with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as an:
                raw_an = await in_thread(
                    lambda: an.messages.with_raw_response.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[anthropic_tool],  # type: ignore[list-item]
                    )
                )
    [call] = raw.parse().choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert raw.headers["x-forge-ignored-schema-keywords"] == "optional"
    assert [b.type for b in raw_an.parse().content] == ["tool_use"]
    assert raw_an.headers["x-forge-ignored-schema-keywords"] == "optional"


async def test_the_ignored_keywords_header_comes_with_cached_tools_too() -> None:
    """A tool list served from the proxy's tool cache still names its ignored keywords."""
    config = _script(_call("get_weather", city="Paris"), _call("get_weather", city="Paris"))
    with trio.fail_after(30):
        async with sim_proxy(config) as (_sim, url):
            with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as sdk:

                def twice() -> list[str]:
                    return [
                        sdk.chat.completions.with_raw_response.create(
                            model="m", messages=USER, tools=[BFCL_TOOL]
                        ).headers["x-forge-ignored-schema-keywords"]
                        for _ in range(2)
                    ]

                headers = await in_thread(twice)
    assert headers == ["optional", "optional"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["string", "#", "#/x"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["$ref", "type", "items", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)
# Keywords forge_rt does not know (BFCL's `optional`, later drafts' and vendors' extensions),
# holding any JSON at all -- even what looks like a broken $ref.
_UNKNOWN = st.dictionaries(
    st.sampled_from(["optional", "not", "if", "then", "prefixItems", "x-vendor", "dependencies"]),
    _JSON,
    max_size=3,
)
_KNOWN = st.sampled_from(
    [
        {"type": "string", "maxLength": 20},
        {"type": "integer", "minimum": 0},
        {"type": "array", "items": {"type": "string"}},
        {"type": "object", "properties": {"x": {"type": "number"}}},
        {"enum": ["a", "b"]},
        {},
    ]
)
_PROPERTY_SCHEMAS = st.builds(lambda known, unknown: {**unknown, **known}, _KNOWN, _UNKNOWN)


def _answer(request: Any) -> list[ToolCall]:
    return [ToolCall(tool="respond", args={"message": "ok"})]


async def test_unknown_keywords_holding_anything_are_served() -> None:
    """Tools whose schemas add unknown keywords, whatever they hold, are served: always a 200."""
    with trio.fail_after(120):
        async with client_proxy(GatedClient(_answer, gated=False)) as url:

            def fuzz() -> None:
                with httpx.Client(base_url=url, timeout=20) as http:

                    @settings(
                        # One inference each; GatedClient records at most 100 calls.
                        max_examples=80,
                        deadline=None,
                        suppress_health_check=[HealthCheck.too_slow],
                    )
                    @given(st.dictionaries(st.sampled_from("abc"), _PROPERTY_SCHEMAS, max_size=2))
                    def one(properties: dict[str, Any]) -> None:
                        tool = {
                            "type": "function",
                            "function": {
                                "name": "t",
                                "parameters": {"type": "object", "properties": properties},
                            },
                        }
                        body = {"model": "m", "messages": USER, "tools": [tool]}
                        response = http.post(
                            "/v1/chat/completions",
                            content=json.dumps(body),
                            headers={"content-type": "application/json"},
                        )
                        assert response.status_code == 200, response.text

                    one()

            await trio.to_thread.run_sync(fuzz)


_UNCONSTRAINABLE = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "optional": {"$ref": "#/nowhere"}}},
        },
    },
}


async def test_tools_the_constraint_cannot_express_are_served_unconstrained() -> None:
    """Under constrain=auto a schema the constraint builder refuses is decoded freely instead."""
    client = GatedClient([[ToolCall(tool="lookup", args={"key": "a"})]], gated=False)
    body = {"model": "m", "messages": USER, "tools": [_UNCONSTRAINABLE], "max_tokens": 64}
    with trio.fail_after(20):
        async with client_proxy(client) as url, httpx.AsyncClient(base_url=url) as http:
            response = await http.post("/v1/chat/completions", json=body)
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "lookup"
    assert response.headers["x-forge-ignored-schema-keywords"] == "optional"
    assert client.calls[0].request.constraint is None


async def test_tools_the_constraint_cannot_express_are_a_400_under_constrain_always() -> None:
    """Under constrain=always the same tools are the client's to fix: a 400 naming the cause."""
    client = GatedClient([], gated=False)
    body = {"model": "m", "messages": USER, "tools": [_UNCONSTRAINABLE], "max_tokens": 64}
    with trio.fail_after(20):
        async with (
            client_proxy(client, constrain="always") as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("tools_not_constrainable", "tools")
    assert "#/nowhere" in error["message"]
    assert client.calls == []
