"""The official anthropic SDK against the proxy, in front of the simulated backend."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
import trio
from proxy_support import WEATHER_TOOL_ANTHROPIC, in_thread, sim_proxy

from forge_rt.backends.sim import SimConfig, SimReply, SimToolCall


def _sdk(url: str, **kw: Any) -> anthropic.Anthropic:
    kw.setdefault("api_key", "unused")
    return anthropic.Anthropic(base_url=url, max_retries=0, timeout=20, **kw)


def _script(*replies: SimReply | str) -> SimConfig:
    return SimConfig(script={"*": list(replies)})


def _call(name: str, **args: Any) -> SimReply:
    return SimReply(tool_calls=(SimToolCall(name=name, arguments=args),))


USER: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


async def test_plain_message_returns_text_with_end_turn() -> None:
    """Without tools the reply is one text block, stop_reason end_turn."""
    with trio.fail_after(20):
        async with sim_proxy(_script("Bonjour.")) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.messages.create(model="claude-x", max_tokens=64, messages=USER)
                )
    assert [b.type for b in reply.content] == ["text"]
    assert reply.content[0].text == "Bonjour."  # type: ignore[union-attr]
    assert reply.stop_reason == "end_turn"
    assert reply.model == "claude-x"


async def test_tool_use_block_for_a_valid_call() -> None:
    """A valid call comes back as a tool_use block with stop_reason tool_use."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("get_weather", city="Paris"))) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )
                )
    assert reply.stop_reason == "tool_use"
    [block] = [b for b in reply.content if b.type == "tool_use"]
    assert block.name == "get_weather"  # type: ignore[union-attr]
    assert block.input == {"city": "Paris"}  # type: ignore[union-attr]


async def test_respond_becomes_a_text_block() -> None:
    """The respond tool is stripped: the client gets a text block and end_turn."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("respond", message="Cloudy."))) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )
                )
    assert [(b.type, getattr(b, "text", None)) for b in reply.content] == [("text", "Cloudy.")]
    assert reply.stop_reason == "end_turn"


async def test_stream_text_through_the_sdk_helper() -> None:
    """The SDK's stream helper yields the text and a final message with end_turn."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("respond", message="Rain later today."))) as (
            _sim,
            url,
        ):
            with _sdk(url) as sdk:

                def run() -> tuple[str, str | None]:
                    with sdk.messages.stream(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    ) as stream:
                        text = "".join(stream.text_stream)
                        final = stream.get_final_message()
                    return text, final.stop_reason

                text, stop = await in_thread(run)
    assert (text, stop) == ("Rain later today.", "end_turn")


async def test_stream_tool_use_assembles_its_input() -> None:
    """A streamed call arrives as a tool_use block whose input the SDK assembles."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("get_weather", city="Paris"))) as (_sim, url):
            with _sdk(url) as sdk:

                def run() -> Any:
                    with sdk.messages.stream(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    ) as stream:
                        return stream.get_final_message()

                final = await in_thread(run)
    assert final.stop_reason == "tool_use"
    [block] = [b for b in final.content if b.type == "tool_use"]
    assert (block.name, block.input) == ("get_weather", {"city": "Paris"})  # type: ignore[union-attr]


async def test_multi_turn_with_tool_result_blocks() -> None:
    """tool_use / tool_result history reaches the backend as a call and its result."""
    histories: list[list[tuple[str, str]]] = []

    def oracle(view: Any) -> Any:
        histories.append([(m.role, m.content or "") for m in view.messages])
        return SimToolCall(name="respond", arguments={"message": "Rome is warm."})

    messages: list[Any] = [
        *USER,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "28 C"}],
        },
    ]
    with trio.fail_after(20):
        async with sim_proxy(SimConfig(oracle=oracle)) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=messages,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )
                )
    assert reply.content[0].text == "Rome is warm."  # type: ignore[union-attr]
    [history] = histories
    assert ("tool", "28 C") in history


async def test_system_blocks_with_cache_control_are_accepted() -> None:
    """Claude Code style system blocks with cache_control and metadata are valid requests."""
    with trio.fail_after(20):
        async with sim_proxy(_script("ok")) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        system=[
                            {
                                "type": "text",
                                "text": "You are terse.",
                                "cache_control": {"type": "ephemeral"},
                            }
                        ],
                        metadata={"user_id": "u1"},
                        messages=USER,
                    )
                )
    assert reply.content[0].text == "ok"  # type: ignore[union-attr]


async def test_missing_max_tokens_is_an_anthropic_shaped_400() -> None:
    """A body without max_tokens is a 400 in Anthropic's error shape."""
    with trio.fail_after(20):
        async with sim_proxy(_script("ok")) as (_sim, url):
            with _sdk(url) as sdk, pytest.raises(anthropic.BadRequestError) as info:
                await in_thread(
                    lambda: sdk.post(
                        "/v1/messages",
                        body={"model": "m", "messages": USER},
                        cast_to=object,
                    )
                )
    body = info.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in body["error"]["message"]


async def test_count_tokens_counts_what_the_backend_will_see() -> None:
    """count_tokens counts the prompt the backend is sent -- the tools and the ``respond`` tool
    the proxy adds included -- with the backend's own template and tokenizer: the same number
    a reply to that request reports, streamed or not (input plus cache-read tokens)."""
    tools = [WEATHER_TOOL_ANTHROPIC]
    with trio.fail_after(30):
        answer = _call("respond", message="Sunny.")
        async with sim_proxy(_script(answer, answer)) as (_sim, url):
            with _sdk(url) as sdk:
                counted = await in_thread(
                    lambda: sdk.messages.with_raw_response.count_tokens(
                        model="m",
                        messages=USER,
                        tools=tools,  # type: ignore[arg-type]
                    )
                )
                bare = await in_thread(lambda: sdk.messages.count_tokens(model="m", messages=USER))
                whole = await in_thread(
                    lambda: sdk.messages.create(
                        model="m",
                        max_tokens=64,
                        messages=USER,
                        tools=tools,  # type: ignore[arg-type]
                    )
                )

                def streamed() -> Any:
                    with sdk.messages.stream(
                        model="m",
                        max_tokens=64,
                        messages=USER,
                        tools=tools,  # type: ignore[arg-type]
                    ) as stream:
                        return stream.get_final_message()

                final = await in_thread(streamed)
    assert counted.headers["x-forge-token-count"] == "exact"
    count = counted.parse().input_tokens
    for usage in (whole.usage, final.usage):
        assert usage.input_tokens + (usage.cache_read_input_tokens or 0) == count
    assert 0 < bare.input_tokens < count  # no tools, and no respond tool injected


async def test_exhausted_retries_surface_as_an_api_error() -> None:
    """Exhausted retries raise the SDK's 502 error with Anthropic's error shape."""
    with trio.fail_after(20):
        async with sim_proxy(
            _script('{"name": "get_weather"', '{"name": "get_weather", "arg'), max_retries=1
        ) as (
            _sim,
            url,
        ):
            with _sdk(url) as sdk, pytest.raises(anthropic.APIStatusError) as info:
                await in_thread(
                    lambda: sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )
                )
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "api_error"
    assert body["error"]["forge"]["attempts"] == 2


async def test_models_list_in_anthropic_shape() -> None:
    """The Anthropic SDK's models.list() reads the backend's models."""
    with trio.fail_after(20):
        async with sim_proxy(SimConfig(model="sim-qwen")) as (_sim, url):
            with _sdk(url) as sdk:
                ids = await in_thread(lambda: [m.id for m in sdk.models.list()])
    assert ids == ["sim-qwen"]


async def test_server_tools_are_left_out_and_named_in_a_header() -> None:
    """Server tools (web search) a local model cannot run are dropped, visibly, not fatal."""
    seen: list[list[str]] = []

    def oracle(view: Any) -> Any:
        seen.append([t.name for t in view.tools])
        return SimToolCall(name="respond", arguments={"message": "No web here."})

    with trio.fail_after(20):
        async with sim_proxy(SimConfig(oracle=oracle)) as (_sim, url):
            with _sdk(url) as sdk:
                raw = await in_thread(
                    lambda: sdk.messages.with_raw_response.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=USER,
                        tools=[
                            WEATHER_TOOL_ANTHROPIC,  # type: ignore[list-item]
                            {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
                        ],
                    )
                )
    assert raw.headers["x-forge-dropped-tools"] == "web_search"
    assert raw.parse().content[0].text == "No web here."  # type: ignore[union-attr]
    assert seen == [["get_weather", "respond"]]


async def test_reply_content_fed_back_as_history_is_accepted() -> None:
    """Appending the SDK's reply content and a tool_result, as agent loops do, is valid."""
    reply = SimReply(
        text="Checking.",
        tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}),),
    )
    with trio.fail_after(20):
        async with sim_proxy(_script(reply, _call("respond", message="Cold."))) as (_sim, url):
            with _sdk(url) as sdk:

                def run() -> Any:
                    messages: list[Any] = list(USER)
                    first = sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=messages,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )
                    messages.append({"role": "assistant", "content": first.content})
                    results = [
                        {"type": "tool_result", "tool_use_id": b.id, "content": "-3 C"}
                        for b in first.content
                        if b.type == "tool_use"
                    ]
                    messages.append({"role": "user", "content": results})
                    return sdk.messages.create(
                        model="claude-x",
                        max_tokens=64,
                        messages=messages,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )

                second = await in_thread(run)
    assert second.content[0].text == "Cold."  # type: ignore[union-attr]
