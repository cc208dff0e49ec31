"""The same two-tool weather agent written with each agent framework, pointed at a proxy URL.

Each ``run_*`` function is blocking: it builds the framework's agent with the settings
docs/integrations.md gives, runs one task to its final answer and returns that answer with the
tool calls the agent's tools recorded. Frameworks built on asyncio get their own event loop
(``asyncio.run``) in the calling thread; the tests call these from a trio worker thread while
the proxy and the simulated backend run on the trio loop. Every network wait is bounded by the
client's timeout, and every agent by a turn limit, so a looping agent fails instead of hanging.
Temperature 0 keeps the embedded model's choices repeatable.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec

__all__ = [
    "PROMPT",
    "AgentRun",
    "Weather",
    "run_langchain",
    "run_openai_agents",
    "run_pydantic_ai",
]

PROMPT = "What is the weather in Paris right now? Tell me the temperature in Fahrenheit."
INSTRUCTIONS = (
    "You do not know the weather or the temperature anywhere: only get_weather does. First call "
    "get_weather for the city. Then call convert_temperature with the celsius value get_weather "
    "returned. Then answer in one sentence."
)
MAX_TURNS = 6  # two tool rounds and an answer need 3; more means the agent is looping
TIMEOUT_S = 300.0  # per HTTP request: the embedded model on a shared CPU can be slow


class AgentRun(msgspec.Struct, kw_only=True):
    """What one agent run did: its final answer and the tool calls, in order, with arguments."""

    answer: str
    calls: list[tuple[str, dict[str, Any]]]


class Weather:
    """The two tools, recording every call; the same fixed weather for any city."""

    CELSIUS = 18.0

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get_weather(self, city: str) -> str:
        """Current weather in a city, with the temperature in degrees Celsius."""
        self.calls.append(("get_weather", {"city": city}))
        return json.dumps({"city": city, "sky": "sunny", "celsius": self.CELSIUS})

    def convert_temperature(self, celsius: float) -> str:
        """Convert the Celsius temperature that get_weather returned to degrees Fahrenheit."""
        self.calls.append(("convert_temperature", {"celsius": celsius}))
        # Both values: given the Fahrenheit value alone, a small model converts it again.
        return json.dumps({"celsius": celsius, "fahrenheit": round(celsius * 9 / 5 + 32, 1)})


def run_openai_agents(base_url: str, model: str = "local") -> AgentRun:
    """openai-agents: the Chat Completions model over an ``AsyncOpenAI`` client, no tracing."""
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    weather = Weather()

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather in a city, with the temperature in degrees Celsius."""
        return weather.get_weather(city)

    @function_tool
    def convert_temperature(celsius: float) -> str:
        """Convert the Celsius temperature that get_weather returned to degrees Fahrenheit."""
        return weather.convert_temperature(celsius)

    set_tracing_disabled(True)  # tracing would upload to OpenAI's platform

    async def run() -> str:
        client = AsyncOpenAI(
            base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=TIMEOUT_S
        )
        async with client:
            agent = Agent(
                name="weather",
                instructions=INSTRUCTIONS,
                tools=[get_weather, convert_temperature],
                model=OpenAIChatCompletionsModel(model=model, openai_client=client),
                model_settings=ModelSettings(temperature=0),
            )
            result = await Runner.run(agent, PROMPT, max_turns=MAX_TURNS)
            return str(result.final_output)

    return AgentRun(answer=asyncio.run(run()), calls=weather.calls)


def run_pydantic_ai(base_url: str, model: str = "local") -> AgentRun:
    """pydantic-ai: ``OpenAIChatModel`` with an ``OpenAIProvider`` on the proxy's base URL."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    weather = Weather()

    async def run() -> str:
        client = AsyncOpenAI(
            base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=TIMEOUT_S
        )
        async with client:
            chat = OpenAIChatModel(model, provider=OpenAIProvider(openai_client=client))
            agent = Agent(
                chat,
                instructions=INSTRUCTIONS,
                tools=[weather.get_weather, weather.convert_temperature],
                model_settings={"temperature": 0},
            )
            result = await agent.run(PROMPT, usage_limits=UsageLimits(request_limit=MAX_TURNS))
            return result.output

    return AgentRun(answer=asyncio.run(run()), calls=weather.calls)


def run_langchain(base_url: str, model: str = "local") -> AgentRun:
    """LangChain: ``ChatOpenAI(...).bind_tools(...)`` and the usual invoke-run-append loop."""
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    weather = Weather()
    tools = {t.name: t for t in (tool(weather.get_weather), tool(weather.convert_temperature))}
    llm = ChatOpenAI(
        model=model,
        base_url=f"{base_url}/v1",
        api_key="unused",
        max_retries=0,
        timeout=TIMEOUT_S,
        temperature=0,
    ).bind_tools(list(tools.values()))
    messages: list[BaseMessage] = [SystemMessage(INSTRUCTIONS), HumanMessage(PROMPT)]
    for _ in range(MAX_TURNS):
        reply = llm.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return AgentRun(answer=reply.text, calls=weather.calls)
        for call in reply.tool_calls:
            messages.append(tools[call["name"]].invoke(call))
    raise AssertionError(f"the LangChain agent was still calling tools after {MAX_TURNS} turns")
