"""The official openai SDK against the proxy, in front of the simulated backend."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import trio
from proxy_support import WEATHER_TOOL, in_thread, sim_proxy

from forge_rt.backends.sim import SimConfig, SimReply, SimToolCall


def _sdk(url: str, **kw: Any) -> openai.OpenAI:
    kw.setdefault("api_key", "unused")
    return openai.OpenAI(base_url=f"{url}/v1", max_retries=0, timeout=20, **kw)


def _script(*replies: SimReply | str) -> SimConfig:
    return SimConfig(script={"*": list(replies)})


def _call(name: str, **args: Any) -> SimReply:
    return SimReply(tool_calls=(SimToolCall(name=name, arguments=args),))


USER = [{"role": "user", "content": "What is the weather in Paris?"}]


async def test_plain_chat_returns_the_backend_text() -> None:
    """Without tools the reply is the backend's text, finish_reason stop, usage reported."""
    with trio.fail_after(20):
        async with sim_proxy(_script("Bonjour from the sim.")) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(model="local", messages=USER)
                )
    assert reply.choices[0].message.content == "Bonjour from the sim."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.completion_tokens > 0


async def test_native_tool_call_comes_back_structured() -> None:
    """A native call of a request tool is returned as tool_calls with validated arguments."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("get_weather", city="Paris"))) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


async def test_respond_call_is_stripped_into_a_text_reply() -> None:
    """A call of the injected respond tool reaches the client as plain text with stop."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("respond", message="It is sunny."))) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
    choice = reply.choices[0]
    assert choice.message.content == "It is sunny."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"


async def test_respond_tool_is_offered_to_the_backend_not_the_client() -> None:
    """The backend sees the client's tools plus respond; the client never sees respond."""
    seen: list[list[str]] = []

    def oracle(view: Any) -> Any:
        seen.append([t.name for t in view.tools])
        return SimToolCall(name="respond", arguments={"message": "done"})

    with trio.fail_after(20):
        async with sim_proxy(SimConfig(oracle=oracle)) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
    assert seen == [["get_weather", "respond"]]
    assert reply.choices[0].message.content == "done"


async def test_stream_of_plain_text_concatenates_to_the_reply() -> None:
    """Streamed text deltas add up to the backend's reply and end with finish_reason stop."""
    with trio.fail_after(20):
        async with sim_proxy(_script("one two three four five")) as (_sim, url):
            with _sdk(url) as sdk:

                def run() -> tuple[str, list[str | None]]:
                    text, finishes = "", []
                    for chunk in sdk.chat.completions.create(
                        model="local", messages=USER, stream=True
                    ):
                        if chunk.choices:
                            text += chunk.choices[0].delta.content or ""
                            finishes.append(chunk.choices[0].finish_reason)
                    return text, finishes

                text, finishes = await in_thread(run)
    assert text == "one two three four five"
    assert finishes[-1] == "stop"


async def test_stream_of_a_tool_call_assembles_into_one_call() -> None:
    """A streamed, validated call arrives as tool-call deltas the SDK can assemble."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("get_weather", city="Paris"))) as (_sim, url):
            with _sdk(url) as sdk:

                def run() -> tuple[str, str, str | None]:
                    name, args, finish = "", "", None
                    for chunk in sdk.chat.completions.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL], stream=True
                    ):
                        delta = chunk.choices[0].delta
                        for call in delta.tool_calls or ():
                            name += call.function.name or "" if call.function else ""
                            args += call.function.arguments or "" if call.function else ""
                        finish = chunk.choices[0].finish_reason or finish
                    return name, args, finish

                name, args, finish = await in_thread(run)
    assert name == "get_weather"
    assert json.loads(args) == {"city": "Paris"}
    assert finish == "tool_calls"


async def test_streamed_respond_message_arrives_as_text_content() -> None:
    """A streamed respond call reaches the client as content deltas, never as a tool call."""
    with trio.fail_after(20):
        async with sim_proxy(_script(_call("respond", message="Sunny and 21 degrees."))) as (
            _sim,
            url,
        ):
            with _sdk(url) as sdk:

                def run() -> tuple[str, bool, str | None]:
                    text, calls, finish = "", False, None
                    for chunk in sdk.chat.completions.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL], stream=True
                    ):
                        delta = chunk.choices[0].delta
                        text += delta.content or ""
                        calls = calls or bool(delta.tool_calls)
                        finish = chunk.choices[0].finish_reason or finish
                    return text, calls, finish

                text, calls, finish = await in_thread(run)
    assert (text, calls, finish) == ("Sunny and 21 degrees.", False, "stop")


async def test_multi_turn_with_tool_results_reaches_the_backend() -> None:
    """A history with a tool call and its result is passed on; the reply answers it."""
    histories: list[list[tuple[str, str]]] = []

    def oracle(view: Any) -> Any:
        histories.append([(m.role, m.content or "") for m in view.messages])
        return SimToolCall(name="respond", arguments={"message": "It is 21 degrees in Paris."})

    messages = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees, clear"},
    ]
    with trio.fail_after(20):
        async with sim_proxy(SimConfig(oracle=oracle)) as (_sim, url):
            with _sdk(url) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local",
                        messages=messages,  # type: ignore[arg-type]
                        tools=[WEATHER_TOOL],
                    )
                )
    assert reply.choices[0].message.content == "It is 21 degrees in Paris."
    [history] = histories
    assert ("tool", "21 degrees, clear") in history


async def test_invalid_reply_is_retried_server_side_and_hidden() -> None:
    """A call with bad arguments is corrected by a server-side retry the client never sees."""
    with trio.fail_after(20):
        async with sim_proxy(
            _script(_call("get_weather", town="Paris"), _call("get_weather", city="Paris"))
        ) as (sim, url):
            with _sdk(url) as sdk:
                raw = await in_thread(
                    lambda: sdk.chat.completions.with_raw_response.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
            replies = len(sim.stats.replies)
    reply = raw.parse()
    [call] = reply.choices[0].message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert raw.headers["x-forge-attempts"] == "2"
    assert replies == 2


async def test_exhausted_retries_are_a_visible_error_with_the_last_reply() -> None:
    """When every attempt is invalid the client gets a 502 naming attempts and the last reply."""
    bad = '{"name": "get_weather", "arguments": {"city": '  # a call that never closes
    with trio.fail_after(20):
        async with sim_proxy(_script(*[bad] * 3), max_retries=2) as (_sim, url):
            with _sdk(url) as sdk, pytest.raises(openai.APIStatusError) as info:
                await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
    error = info.value
    assert error.status_code == 502
    assert error.response.headers["x-should-retry"] == "false"
    body = error.body
    assert isinstance(body, dict)
    assert body["code"] == "tool_call_retries_exhausted"
    assert body["forge"]["attempts"] == 3
    assert body["forge"]["last_raw"] == bad


async def test_wrong_api_key_is_an_authentication_error() -> None:
    """With inbound keys configured, a wrong key raises the SDK's AuthenticationError."""
    from forge_rt.proxy import KeyProfile

    keys = (KeyProfile(key="sk-right-key-123", name="app"),)
    with trio.fail_after(20):
        async with sim_proxy(_script("hi"), api_keys=keys) as (_sim, url):
            with (
                _sdk(url, api_key="sk-wrong-key-456") as sdk,
                pytest.raises(openai.AuthenticationError),
            ):
                await in_thread(lambda: sdk.chat.completions.create(model="local", messages=USER))
            with _sdk(url, api_key="sk-right-key-123") as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(model="local", messages=USER)
                )
    assert reply.choices[0].message.content == "hi"


async def test_unknown_field_is_a_bad_request_naming_it() -> None:
    """A body field the API does not define is a 400 whose message names the field."""
    with trio.fail_after(20):
        async with sim_proxy(_script("hi")) as (_sim, url):
            with _sdk(url) as sdk, pytest.raises(openai.BadRequestError) as info:
                await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=USER, extra_body={"temprature": 0.2}
                    )
                )
    assert "unknown field `temprature`" in str(info.value)


async def test_models_lists_what_the_backend_serves() -> None:
    """GET /v1/models lists the backend's own model ids."""
    with trio.fail_after(20):
        async with sim_proxy(SimConfig(model="sim-qwen-0.5b")) as (_sim, url):
            with _sdk(url) as sdk:
                models = await in_thread(lambda: [m.id for m in sdk.models.list()])
                with pytest.raises(openai.NotFoundError):
                    await in_thread(lambda: sdk.models.retrieve("gpt-9"))
    assert models == ["sim-qwen-0.5b"]


async def test_reply_objects_fed_back_as_history_are_accepted() -> None:
    """The common loop -- append the SDK's reply message, then the tool result -- is valid."""
    with trio.fail_after(20):
        async with sim_proxy(
            _script(_call("get_weather", city="Paris"), _call("respond", message="21 C."))
        ) as (_sim, url):
            with _sdk(url) as sdk:

                def run() -> str | None:
                    messages: list[Any] = list(USER)
                    first = sdk.chat.completions.create(
                        model="local", messages=messages, tools=[WEATHER_TOOL]
                    )
                    message = first.choices[0].message
                    messages.append(message)
                    for call in message.tool_calls or ():
                        messages.append(
                            {
                                "role": "tool",
                                "tool_call_id": call.id,
                                "name": "get_weather",
                                "content": "21 C",
                            }
                        )
                    second = sdk.chat.completions.create(
                        model="local", messages=messages, tools=[WEATHER_TOOL]
                    )
                    return second.choices[0].message.content

                answer = await in_thread(run)
    assert answer == "21 C."
