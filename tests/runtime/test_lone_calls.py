"""The rule ``lone_calls`` in the runtime: under a list shape (``fan_out``), a reply written as
a list that holds one call is drawn again, and the workflow's next constraint -- rebuilt from
``Guardrails.call_shape()`` -- admits one call alone, not a list. Over HTTP on the sim, whose
oracle plays the model and records each request's schema.
"""

from __future__ import annotations

import json
from typing import Any

import trio

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.backends.sim._view import RequestView
from forge_rt.clients import LlamaServerClient
from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.eval.scenarios._kit import call, successful_results
from forge_rt.guardrails import GuardrailOptions
from forge_rt.runtime import WorkflowRunner

HARBOUR = {"type": "object", "properties": {"harbour": {"type": "string"}}, "required": ["harbour"]}
LOOKUP = {"name": "tide_table", "arguments": {"harbour": "Vesk"}}


async def tide_table(harbour: str) -> str:
    return f"High water at {harbour}: 06:10, 2.4 m"


def _lists(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` admits a list of calls (a branch of it is an array)."""
    return any(branch.get("type") == "array" for branch in schema.get("anyOf", [schema]))


def _workflow() -> Workflow:
    spec = ToolSpec(name="tide_table", parameters=HARBOUR)
    return Workflow(
        name="tides",
        tools=[ToolDef(spec=spec, callable=tide_table)],
        required_steps=["tide_table"],
        system_prompt_template="Answer questions about tides.",
        constrain="always",
    )


async def test_a_list_of_one_call_is_drawn_again_under_a_single_call_s_schema() -> None:
    schemas: list[dict[str, Any]] = []

    def model(view: RequestView) -> Any:
        assert view.schema is not None
        schemas.append(view.schema)
        if not successful_results(view):
            # A list where the schema is one, the call alone where it is not.
            return json.dumps([LOOKUP] if _lists(view.schema) else LOOKUP)
        return call("respond", message="High water at Vesk: 06:10, 2.4 m")

    options = GuardrailOptions(fan_out=True, lone_calls=True)
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=model)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            result = await WorkflowRunner(client, guardrails=options).run(
                _workflow(), "When is high water at Vesk?"
            )
    assert result.output == "High water at Vesk: 06:10, 2.4 m"
    assert [_lists(s) for s in schemas] == [True, False, False]
    assert result.stats.rules.get("lone_calls") == 1
    assert result.stats.inferences == 3
