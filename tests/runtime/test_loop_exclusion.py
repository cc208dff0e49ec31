"""A model stuck on one call of the only callable tool: the pending step keeps its tool in the
constraint, the blocked call stays admitted (excluding it was measured to rescue no run and was
removed; docs/loop-exclusion.md), and a fourth identical call ends the run with the typed
ToolLoopError. Tested over HTTP on the sim, whose oracle plays the stuck model.
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
from forge_rt.eval.scenarios._kit import call
from forge_rt.runtime import WorkflowRunner

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def admits_city(schema: dict[str, Any], city: str) -> bool:
    """Whether one of ``schema``'s single-call branches admits count_residents(city=city)."""
    return admits(schema, "count_residents", "city", city)


class Population:
    """A dataset with gaps: the dataset has capitals only."""

    def __init__(self) -> None:
        self.cities: list[str] = []

    async def count_residents(self, city: str) -> str:
        self.cities.append(city)
        if city != "Varno":
            raise ToolResolutionError(
                f"no population for {city!r}: the dataset has capitals only (Lirenia's is Varno)"
            )
        return "Varno: 88,200"

    def workflow(self) -> Workflow:
        spec = ToolSpec(name="count_residents", parameters=CITY)
        return Workflow(
            name="population",
            tools=[ToolDef(spec=spec, callable=self.count_residents)],
            required_steps=["count_residents"],
            system_prompt_template="Answer population questions.",
            constrain="always",
        )


async def test_the_blocked_call_stays_admitted_and_the_loop_ends_typed() -> None:
    """The 4th request still admits the blocked call, and a model that sends it again ends the
    run with ToolLoopError."""

    def stuck(view: RequestView) -> Any:
        assert view.schema is not None
        assert admits_city(view.schema, "Pellak")
        return call("count_residents", city="Pellak")

    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=stuck)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            with pytest.raises(ToolLoopError):
                await WorkflowRunner(client).run(Population().workflow(), "Pellak's population?")
