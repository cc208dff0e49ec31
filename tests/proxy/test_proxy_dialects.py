"""Every tool-call dialect the simulated backend writes reaches the client as a structured call.

The proxy decodes freely here (``constrain="never"``), so the sim writes each dialect and rescue
parsing, not the constraint, is what is tested.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
import trio
from proxy_support import WEATHER_TOOL, WEATHER_TOOL_ANTHROPIC, in_thread, sim_proxy

from forge_rt.backends.sim import Dialect, FailureRates, SimConfig, SimToolCall

CALL_DIALECTS = [
    Dialect.NATIVE,
    Dialect.BARE_JSON,
    Dialect.FENCED_JSON,
    Dialect.HERMES,
    Dialect.QWEN_CODER,
    Dialect.MISTRAL,
]
USER: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


def _weather(view: Any) -> Any:
    return SimToolCall(name="get_weather", arguments={"city": "Paris"})


def _config(dialect: Dialect) -> SimConfig:
    rates = FailureRates() if dialect is Dialect.NATIVE else FailureRates(**{dialect.value: 1.0})
    return SimConfig(oracle=_weather, rates=rates)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", CALL_DIALECTS, ids=[d.value for d in CALL_DIALECTS])
async def test_openai_client_gets_structured_call(dialect: Dialect, stream: bool) -> None:
    """Whatever shape the model wrote the call in, the client gets tool_calls with its args."""
    with trio.fail_after(20):
        async with sim_proxy(_config(dialect), constrain="never") as (sim, url):
            with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as sdk:

                def run() -> tuple[str, dict[str, Any], str | None, str]:
                    if not stream:
                        reply = sdk.chat.completions.create(
                            model="m", messages=USER, tools=[WEATHER_TOOL]
                        )
                        [call] = reply.choices[0].message.tool_calls or []
                        return (
                            call.function.name,
                            json.loads(call.function.arguments),
                            reply.choices[0].finish_reason,
                            reply.choices[0].message.content or "",
                        )
                    name, args, finish, text = "", "", None, ""
                    for chunk in sdk.chat.completions.create(
                        model="m", messages=USER, tools=[WEATHER_TOOL], stream=True
                    ):
                        delta = chunk.choices[0].delta
                        text += delta.content or ""
                        for call in delta.tool_calls or ():
                            assert call.function is not None
                            name += call.function.name or ""
                            args += call.function.arguments or ""
                        finish = chunk.choices[0].finish_reason or finish
                    return name, json.loads(args), finish, text

                name, args, finish, text = await in_thread(run)
            rendered = [r.dialect for r in sim.stats.replies]
    assert rendered == [dialect]
    assert (name, args, finish) == ("get_weather", {"city": "Paris"}, "tool_calls")
    assert "get_weather" not in text  # the call's text form never leaks as content


@pytest.mark.parametrize("dialect", CALL_DIALECTS, ids=[d.value for d in CALL_DIALECTS])
async def test_anthropic_client_gets_tool_use(dialect: Dialect) -> None:
    """The same dialects reach an Anthropic client as tool_use blocks."""
    with trio.fail_after(20):
        async with sim_proxy(_config(dialect), constrain="never") as (_sim, url):
            with anthropic.Anthropic(base_url=url, api_key="x", max_retries=0) as sdk:
                reply = await in_thread(
                    lambda: sdk.messages.create(
                        model="m",
                        max_tokens=128,
                        messages=USER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                    )
                )
    [block] = [b for b in reply.content if b.type == "tool_use"]
    assert (block.name, block.input) == ("get_weather", {"city": "Paris"})  # type: ignore[union-attr]
    assert reply.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("openai", {}),
        ("vllm", {}),
        ("ollama", {"model": "sim-model"}),
        ("anthropic", {"model": "sim-model", "backend_api_key": "sk-sim-unused-1"}),
    ],
    ids=["openai", "vllm", "ollama", "anthropic"],
)
async def test_every_backend_kind_serves_guarded_calls(kind: str, options: dict[str, Any]) -> None:
    """Whatever API the backend speaks, the client gets the same validated tool call."""
    with trio.fail_after(20):
        async with sim_proxy(_config(Dialect.NATIVE), kind=kind, **options) as (_sim, url):
            with openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="m", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
    [call] = reply.choices[0].message.tool_calls or []
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Paris"},
    )
