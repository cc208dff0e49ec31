"""A model stuck on one call of the only callable tool: after the loop guard blocks the call,
the next constrained request excludes exactly that call, so the run moves on instead of ending
in ToolLoopError. Tested over HTTP on the sim, whose oracle plays the stuck model: it writes
``get_population(city="Sydney")`` for as long as the request's schema admits it.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from runtime_support import admits

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.backends.sim._view import RequestView
from forge_rt.clients import LlamaServerClient
from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolLoopError, ToolResolutionError
from forge_rt.eval.scenarios._kit import call, successful_results
from forge_rt.guardrails import GuardrailOptions
from forge_rt.runtime import WorkflowRunner

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def admits_city(schema: dict[str, Any], city: str) -> bool:
    """Whether one of ``schema``'s single-call branches admits get_population(city=city)."""
    return admits(schema, "get_population", "city", city)


class Population:
    """The data_gap scenario in small: the dataset has capitals only."""

    def __init__(self) -> None:
        self.cities: list[str] = []

    async def get_population(self, city: str) -> str:
        self.cities.append(city)
        if city != "Canberra":
            raise ToolResolutionError(
                f"no population for {city!r}: the dataset has capitals only (Australia's is "
                "Canberra)"
            )
        return "Canberra: 467,000"

    def workflow(self) -> Workflow:
        spec = ToolSpec(name="get_population", parameters=CITY)
        return Workflow(
            name="population",
            tools=[ToolDef(spec=spec, callable=self.get_population)],
            required_steps=["get_population"],
            system_prompt_template="Answer population questions.",
            constrain="always",
        )


async def test_a_blocked_call_of_the_only_pending_step_is_excluded_from_the_next_reply() -> None:
    """The 4th constrained request no longer admits the blocked call (it still admits the tool
    with another city), and the run finishes with the answer."""
    schemas: list[dict[str, Any]] = []

    def stuck(view: RequestView) -> Any:
        assert view.schema is not None
        schemas.append(view.schema)
        if successful_results(view):
            return call("respond", message="Canberra has 467,000 people.")
        city = "Sydney" if admits_city(view.schema, "Sydney") else "Canberra"
        return call("get_population", city=city)

    tools = Population()
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=stuck)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            runner = WorkflowRunner(client, guardrails=GuardrailOptions(exclude_looping=True))
            result = await runner.run(tools.workflow(), "Sydney's population?")
    assert result.output == "Canberra has 467,000 people."
    assert tools.cities == ["Sydney", "Sydney", "Canberra"]
    assert result.stats.retries == {"loop": 1}
    assert [admits_city(s, "Sydney") for s in schemas[:4]] == [True, True, True, False]
    assert [admits_city(s, "Canberra") for s in schemas[:4]] == [True, True, True, True]


async def test_off_by_default_the_blocked_call_stays_admitted_and_the_loop_ends_typed() -> None:
    """Without ``exclude_looping`` (the measured default) the 4th request still admits the
    blocked call, and a model that sends it again ends the run with ToolLoopError."""

    def stuck(view: RequestView) -> Any:
        assert view.schema is not None
        assert admits_city(view.schema, "Sydney")
        return call("get_population", city="Sydney")

    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=stuck)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            with pytest.raises(ToolLoopError):
                await WorkflowRunner(client).run(Population().workflow(), "Sydney's population?")
