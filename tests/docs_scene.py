"""The names the docs' code fragments assume, built on the simulated backend.

A Python block in the README or docs/ that begins ``# inside an async function (trio)`` is a
fragment: it uses a ``client`` and a workflow or two that the surrounding prose talks about
instead of defining them. ``tests/test_docs_code.py`` runs each such fragment with the names
below in scope, so a fragment that calls an API the way it no longer works fails there:

- ``client``: a ``LlamaServerClient`` on a :class:`SimBackend` served on 127.0.0.1 (its failure
  rates are zero, so a workflow finishes);
- ``workflow``, ``assistant``, ``assistant_workflow``: a one-tool weather assistant that ends with
  the synthetic ``respond``; ``research_workflow``: a two-step research agent;
- ``tools`` (the ``get_weather`` and ``report`` specs) and ``run`` (runs one validated call of
  them, returning its ``ToolResult``), for the loop a fragment writes itself with ``Guardrails``;
- ``policy`` (asks before ``get_weather``) and ``ask_user`` (an approval callback that says yes);
- the public names a fragment uses without importing them: ``trio``, ``Session``.

Every fragment runs in a fresh working directory, so a ``store="chat.db"`` or ``trace="traces/"``
lands in the test's own folder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from pydantic import BaseModel

from forge_rt import ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient
from forge_rt.guardrails import Allow, Approve, Policy, ToolResult
from forge_rt.runtime import ApprovalRequest, Session

__all__ = ["open_scene"]


class City(BaseModel):
    city: str


class Topic(BaseModel):
    topic: str


class Findings(BaseModel):
    findings: str


class Report(BaseModel):
    summary: str


def get_weather(city: str) -> str:
    return f"18C and light rain in {city}"


def report(summary: str) -> str:
    return f"filed: {summary}"


SPECS = [
    ToolSpec(name="get_weather", description="Weather now", parameters=City),
    ToolSpec(name="report", description="File the report", parameters=Report),
]
_CALLABLES: dict[str, Callable[..., str]] = {"get_weather": get_weather, "report": report}


def run(call: ToolCall) -> ToolResult:
    return ToolResult(call=call, output=_CALLABLES[call.tool](**call.args))


def search(topic: str) -> str:
    return f"three sources on {topic}"


def summarize(findings: str) -> str:
    return f"summary: {findings}"


def _weather() -> Workflow:
    return Workflow(
        name="weather",
        tools=[
            ToolDef(
                spec=ToolSpec(name="get_weather", description="Weather now", parameters=City),
                callable=get_weather,
            )
        ],
        required_steps=["get_weather"],
        system_prompt_template="You answer weather questions with the tools.",
    )


def _research() -> Workflow:
    return Workflow(
        name="research",
        tools=[
            ToolDef(
                spec=ToolSpec(name="search", description="Search sources", parameters=Topic),
                callable=search,
            ),
            ToolDef(
                spec=ToolSpec(name="summarize", description="Summarize", parameters=Findings),
                callable=summarize,
            ),
        ],
        required_steps=["search", "summarize"],
        system_prompt_template="You research a topic with the tools, then report.",
    )


async def _say_yes(request: ApprovalRequest) -> Allow:
    return Allow()


@asynccontextmanager
async def open_scene() -> AsyncIterator[dict[str, Any]]:
    """Serve a sim and yield the fragments' names; the client and sim close on exit."""
    async with (
        SimBackend.serve(SimConfig(seed=1)) as sim,
        LlamaServerClient(sim.url) as client,
    ):
        weather = _weather()
        yield {
            "trio": trio,
            "Session": Session,
            "client": client,
            "workflow": weather,
            "assistant": weather,
            "assistant_workflow": weather,
            "research_workflow": _research(),
            "tools": SPECS,
            "run": run,
            "policy": Policy(tools={"get_weather": Approve("Look up the weather?")}),
            "ask_user": _say_yes,
        }
