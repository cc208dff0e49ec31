"""A tool-calling loop you write yourself, made reliable with ``forge_rt.Guardrails``.

The loop below owns everything: the HTTP calls (plain httpx to any OpenAI-compatible server), the
conversation and the tools. Guardrails only judges each reply -- ``check()`` says whether to run
the calls, retry with a nudge, feed back tool errors, or stop -- and ``record()`` takes the tool
results, tracks required steps and error budgets, and says when the task is done.

Against a real server (llama-server, vLLM, Ollama's /v1, ...)::

    python examples/guardrails_loop.py --url http://127.0.0.1:8080/v1 --model qwen2.5-coder

Without ``--url`` it starts forge_rt's simulated backend in-process, which writes the model's
calls the ways small local models get them wrong (calls as text, prose, invented tools, bad
arguments) at the rates below, seeded so a run is reproducible.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import httpx
import structlog
import trio
from pydantic import BaseModel, Field

from forge_rt import Guardrails, Message, MessageType, TextResponse, ToolCall, ToolSpec
from forge_rt.backends.sim import (
    FailureRates,
    Intent,
    RequestView,
    SimBackend,
    SimConfig,
    SimToolCall,
)
from forge_rt.core import LLMResponse
from forge_rt.errors import ToolResolutionError
from forge_rt.guardrails import (
    Execute,
    Fatal,
    RetryWithNudge,
    StepBlocked,
    TextAnswer,
    ToolErrors,
    ToolResult,
)

# --- the task: two tools, the first required before the terminal one --------------------------


class WeatherArgs(BaseModel):
    city: str = Field(description="City name, e.g. Oslo")


class ReportArgs(BaseModel):
    summary: str = Field(description="One sentence for the user")


TOOLS = [
    ToolSpec(name="get_weather", description="Current weather for a city.", parameters=WeatherArgs),
    ToolSpec(name="report", description="File the final report.", parameters=ReportArgs),
]
TASK = "What is the weather in Oslo? Look it up, then file a one-sentence report."
_WEATHER = {"oslo": "4 C, light rain", "paris": "11 C, cloudy"}


def get_weather(city: str) -> str:
    """Look up the weather (a fixed table here); a blank city tells the model what to send."""
    if not city.strip():
        raise ToolResolutionError("city is empty: name a city, for example Oslo")
    return f"{city}: {_WEATHER.get(city.strip().lower(), '12 C, clear')}"


def report(summary: str) -> str:
    """File the report (here: echo it)."""
    return f"report filed: {summary}"


IMPLEMENTATIONS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "report": report}


def run_tool(call: ToolCall) -> ToolResult:
    """Run one validated call; a failure becomes a result the guardrails feed back."""
    try:
        return ToolResult(call=call, output=IMPLEMENTATIONS[call.tool](**call.args))
    except (ToolResolutionError, ValueError, OSError) as exc:
        return ToolResult(call=call, error=exc)


# --- the OpenAI wire format, by hand -----------------------------------------------------------


def to_wire(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.tool, "arguments": json.dumps(c.args)},
            }
            for c in message.tool_calls
        ]
    if message.tool_call_id:
        wire["tool_call_id"] = message.tool_call_id
    return wire


def from_wire(body: dict[str, Any]) -> LLMResponse:
    """The reply as forge_rt types; calls with unparsable arguments go to rescue as text."""
    message = body["choices"][0]["message"]
    text = message.get("content") or ""
    natives = message.get("tool_calls") or []
    try:
        calls = [
            ToolCall(
                tool=n["function"]["name"],
                args=json.loads(n["function"]["arguments"] or "{}"),
                call_id=n["id"],
            )
            for n in natives
        ]
    except json.JSONDecodeError:
        # A native call with broken JSON: hand the reply to rescue as text, which repairs it.
        text += "".join(
            f'\n{{"name": {json.dumps(n["function"]["name"])}, '
            f'"arguments": {n["function"]["arguments"]}}}'
            for n in natives
        )
        calls = []
    result: list[ToolCall] | TextResponse = calls or TextResponse(content=text)
    return LLMResponse(
        result=result, raw_text=text, finish_reason=body["choices"][0].get("finish_reason")
    )


# --- the loop ----------------------------------------------------------------------------------


def describe(action: Any) -> str:
    match action:
        case Execute(calls=calls, collapsed=collapsed, rescued_dialects=dialects):
            shown = ", ".join(f"{c.tool}({json.dumps(c.args)})" for c in calls)
            rescued = f" [rescued from {', '.join(map(str, dialects))}]" if dialects else ""
            extra = f" [{collapsed} duplicate(s) dropped]" if collapsed else ""
            return f"execute {shown}{rescued}{extra}"
        case RetryWithNudge(nudge=nudge):
            return f"retry (tier {nudge.tier}): {nudge.content.splitlines()[0][:90]}"
        case ToolErrors(errors=errors):
            return f"tool errors: {errors[0].content.splitlines()[0][:90]}"
        case StepBlocked(reason=reason, errors=errors):
            return f"blocked ({reason}): {errors[0].content[:90]}"
        case TextAnswer(text=text):
            return f"text answer: {text[:90]}"
        case Fatal(error=error):
            return f"fatal: {type(error).__name__}"
    raise TypeError(f"not a guardrails action: {action!r}")


async def run(url: str, model: str, max_turns: int) -> int:
    """Run the task against ``url``; print each turn and the outcome; return an exit status."""
    guard = Guardrails(TOOLS, required_steps=["get_weather"], terminal_tools=["report"])
    tools = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.json_schema(),
            },
        }
        for t in TOOLS
    ]
    history = [
        Message.system("You are a careful assistant. Use the tools to complete the task."),
        Message.user(TASK),
    ]
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for turn in range(1, max_turns + 1):
            wire = [to_wire(m) for m in history if m.type is not MessageType.REASONING]
            body = {"model": model, "messages": wire, "tools": tools, "max_tokens": 512}
            response = await http.post("/chat/completions", json=body)
            response.raise_for_status()
            action = guard.check(from_wire(response.json()))
            print(f"turn {turn}: {describe(action)}")
            history.extend(action.messages())
            if isinstance(action, Fatal):
                print(f"outcome: failed - {action.error}")
                return 1
            if isinstance(action, TextAnswer):
                print(f"outcome: answered in text - {action.text}")
                return 0
            if not isinstance(action, Execute):
                continue
            outcome = guard.record([run_tool(call) for call in action.calls])
            history.extend(outcome.messages)
            if outcome.fatal is not None:
                print(f"outcome: failed - {outcome.fatal}")
                return 1
            if outcome.done:
                print(f"outcome: done - {outcome.terminal_output}")
                print(f"steps: {', '.join(guard.tracker.completed_steps)}")
                return 0
    print(f"outcome: gave up after {max_turns} turns")
    return 1


# --- the simulated model (only without --url) --------------------------------------------------


def sim_intent(view: RequestView) -> Intent:
    """What the simulated model means to do: each tool in turn until it has succeeded.

    A call counts as done only once its result came back without an error, so a rejected or
    failed call is attempted again -- as a model reading the corrections would.
    """
    ok_ids = {m.tool_call_id for m in view.messages if m.role == "tool" and m.content[:1] != "["}
    done = {c.name for m in view.messages for c in m.tool_calls if c.id in ok_ids}
    if "get_weather" not in done:
        return SimToolCall(name="get_weather", arguments={"city": "Oslo"})
    return SimToolCall(name="report", arguments={"summary": "Oslo has 4 C and light rain."})


SIM_RATES = FailureRates(
    bare_json=0.10,
    fenced_json=0.10,
    hermes=0.05,
    bare_text=0.15,
    unknown_tool=0.10,
    wrong_args=0.10,
)


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", default="local", help="model name sent in requests")
    parser.add_argument("--seed", type=int, default=2, help="seed of the simulated model")
    parser.add_argument("--max-turns", type=int, default=12)
    args = parser.parse_args(argv)
    if args.url:
        return await run(args.url, args.model, args.max_turns)
    config = SimConfig(seed=args.seed, rates=SIM_RATES, oracle=sim_intent)
    async with SimBackend.serve(config) as sim:
        print(f"simulated backend at {sim.url} (seed {args.seed})")
        return await run(f"{sim.url}/v1", args.model, args.max_turns)


if __name__ == "__main__":
    # An application decides what to log: here, only warnings.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sys.exit(trio.run(main, sys.argv[1:]))
