"""Agent frameworks against the proxy: openai-agents, pydantic-ai and LangChain, configured as
docs/integrations.md says, each running a two-tool weather agent to its final answer.

On the simulated backend an oracle plays a perfect model that reads the tool results it is
sent: it calls ``get_weather("Paris")``, then ``convert_temperature`` with the Celsius value the
first tool returned, then answers with the Fahrenheit value the second returned -- so a right
answer shows each result made the round trip through the framework and the proxy. The slow tests
run the same agents against the embedded 0.5B model. Either way the tools must run with the
right arguments, each as often as needed and no more (no loop), and the answer must hold no
guardrail text.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio
from framework_agents import (
    AgentRun,
    Weather,
    run_langchain,
    run_openai_agents,
    run_pydantic_ai,
)

from forge_rt.backends.sim import (
    FailureRates,
    Intent,
    RequestView,
    SimBackend,
    SimConfig,
    SimToolCall,
)
from forge_rt.core import RESPOND_TOOL_NAME
from forge_rt.proxy import BackendConfig, ProxyConfig, serve_proxy
from forge_rt.proxy._leaks import find_marker

FRAMEWORKS = [
    pytest.param(run_openai_agents, id="openai-agents"),
    pytest.param(run_pydantic_ai, id="pydantic-ai"),
    pytest.param(run_langchain, id="langchain"),
]
FAHRENHEIT = round(Weather.CELSIUS * 9 / 5 + 32, 1)


def _result(view: RequestView, tool: str) -> dict[str, float] | None:
    """The JSON result of the history's call of ``tool``, if it has been answered."""
    ids = {c.id for m in view.messages for c in m.tool_calls if c.name == tool}
    for message in view.messages:
        if message.role == "tool" and message.tool_call_id in ids:
            return json.loads(message.content)  # type: ignore[no-any-return]
    return None


def weather_oracle(view: RequestView) -> Intent:
    """A perfect weather agent: each step's arguments come from the previous tool's result."""
    weather = _result(view, "get_weather")
    if weather is None:
        return SimToolCall(name="get_weather", arguments={"city": "Paris"})
    converted = _result(view, "convert_temperature")
    if converted is None:
        return SimToolCall(name="convert_temperature", arguments={"celsius": weather["celsius"]})
    answer = f"It is sunny in Paris, {converted['fahrenheit']} °F."
    if view.tool(RESPOND_TOOL_NAME) is not None:
        return SimToolCall(name=RESPOND_TOOL_NAME, arguments={"message": answer})
    return answer


@asynccontextmanager
async def _proxy(backend_url: str) -> AsyncIterator[str]:
    config = ProxyConfig(
        backend=BackendConfig(url=backend_url, kind="llamaserver"),
        port=0,
        graceful_timeout_s=0.5,
    )
    async with serve_proxy(config) as url:
        yield url


async def _run(agent: Callable[[str], AgentRun], url: str) -> AgentRun:
    # abandon_on_cancel: the fail_after around this call ends the test even if the framework's
    # thread is stuck; its own client timeouts end the thread.
    return await trio.to_thread.run_sync(agent, url, abandon_on_cancel=True)


def _assert_clean(answer: str) -> None:
    assert find_marker(answer) is None, answer
    for text in ("Please call", "[Note]", "NotExecuted", '"respond"', "`respond`"):
        assert text not in answer, answer


WRITTEN = [
    pytest.param(FailureRates(), id="native-calls"),
    # Small models often write their calls as text: the proxy must hand them over as tool calls.
    pytest.param(FailureRates(hermes=0.5, bare_json=0.5), id="text-calls"),
]


@pytest.mark.parametrize("rates", WRITTEN)
@pytest.mark.parametrize("agent", FRAMEWORKS)
async def test_framework_agent_runs_both_tools_once_on_the_sim(
    agent: Callable[[str], AgentRun], rates: FailureRates
) -> None:
    """Each tool runs once with the arguments the task needs; the answer carries the result."""
    sim_config = SimConfig(oracle=weather_oracle, rates=rates)
    with trio.fail_after(60):
        async with SimBackend.serve(sim_config) as sim, _proxy(sim.url) as url:
            run = await _run(agent, url)
    assert run.calls == [
        ("get_weather", {"city": "Paris"}),
        ("convert_temperature", {"celsius": Weather.CELSIUS}),
    ]
    assert f"{FAHRENHEIT} °F" in run.answer
    _assert_clean(run.answer)


@pytest.mark.slow
@pytest.mark.parametrize("agent", FRAMEWORKS)
async def test_framework_agent_calls_the_weather_tool_on_the_real_model(
    agent: Callable[[str], AgentRun], local_model_url: str
) -> None:
    """On the 0.5B model: get_weather asks for Paris, a conversion made after it gets its result
    (a list of calls must not chain one on a guessed value), no call repeats, and the answer
    holds no guardrail text. Whether the model calls get_weather at all is its own choice: a
    conversion of a value from nowhere is sent back once and then taken at its word
    (``unfounded_calls``), and the greedy 0.5B has made both choices on different machines."""
    with trio.fail_after(900):
        async with _proxy(local_model_url) as url:
            run = await _run(agent, url)
    names = [name for name, _ in run.calls]
    assert all(
        args["city"].strip().lower().startswith("paris")
        for name, args in run.calls
        if name == "get_weather"
    ), run
    after_weather = names.index("get_weather") if "get_weather" in names else len(names)
    assert all(
        args == {"celsius": Weather.CELSIUS}
        for name, args in run.calls[after_weather:]
        if name == "convert_temperature"
    ), run
    assert run.calls, run
    assert len(run.calls) == len({json.dumps(c, sort_keys=True) for c in run.calls}), run
    assert run.answer.strip(), run
    _assert_clean(run.answer)


def repeating_oracle(view: RequestView) -> Intent:
    """A small model's loop: it calls ``get_weather("Paris")`` again after getting the result,
    and answers only once the history holds the call twice."""
    weather = _result(view, "get_weather")
    if weather is None or view.called_tools().count("get_weather") < 2:
        return SimToolCall(name="get_weather", arguments={"city": "Paris"})
    answer = f"It is {weather['sky']} in Paris, {weather['celsius']} °C."
    if view.tool(RESPOND_TOOL_NAME) is not None:
        return SimToolCall(name=RESPOND_TOOL_NAME, arguments={"message": answer})
    return answer


@pytest.mark.parametrize("agent", FRAMEWORKS)
async def test_framework_agent_runs_a_repeated_call_once_on_the_sim(
    agent: Callable[[str], AgentRun],
) -> None:
    """A model that repeats a call it has the result of: the framework's tool still runs once,
    the proxy answers the repeat itself, and the answer reaches the framework clean."""
    with trio.fail_after(60):
        async with (
            SimBackend.serve(SimConfig(oracle=repeating_oracle)) as sim,
            _proxy(sim.url) as url,
        ):
            run = await _run(agent, url)
    assert run.calls == [("get_weather", {"city": "Paris"})]
    assert f"{Weather.CELSIUS} °C" in run.answer
    _assert_clean(run.answer)
