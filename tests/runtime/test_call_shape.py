"""Every constraint of a run has the reply shape of its guardrail options: the first one the
runtime decides, each narrowing of it and each escalation."""

from __future__ import annotations

import trio

from forge_rt.core import JsonSchemaConstraint, ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.guardrails import GuardrailOptions
from forge_rt.runtime import Session
from forge_rt.testing import ScriptedClient

BEAM = {"type": "object", "properties": {"beam": {"type": "string"}}, "required": ["beam"]}


async def sag(beam: str) -> str:
    return f"Beam {beam} sags 3 mm"


def _workflow() -> Workflow:
    return Workflow(
        name="beams",
        tools=[ToolDef(spec=ToolSpec(name="measure_sag", parameters=BEAM), callable=sag)],
        required_steps=["measure_sag"],
        system_prompt_template="You measure beams.",
        constrain="always",
    )


async def _schemas(options: GuardrailOptions) -> list[object]:
    replies = [
        [ToolCall(tool="measure_sag", args={"beam": "B-2"})],
        [ToolCall(tool="respond", args={"message": "Beam B-2 sags 3 mm"})],
    ]
    client = ScriptedClient(replies)
    with trio.fail_after(10):
        async with Session.open(client, guardrails=options) as session:
            await session.run(_workflow(), "How much does beam B-2 sag?")
    constraints = [c.request.constraint for c in client.calls]
    assert all(isinstance(c, JsonSchemaConstraint) for c in constraints)
    return [c.schema.get("type") for c in constraints if isinstance(c, JsonSchemaConstraint)]


async def test_with_call_list_every_constraint_of_the_run_is_a_list() -> None:
    assert await _schemas(GuardrailOptions(call_list=True)) == ["array", "array"]


async def test_by_default_a_reply_is_one_call_or_an_array() -> None:
    assert await _schemas(GuardrailOptions()) == [None, None]  # anyOf: a call, or an array
