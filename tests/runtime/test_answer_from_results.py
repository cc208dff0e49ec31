"""An answer sent back for leaving out the results is followed by one constrained to them.

Tested over HTTP on the sim, whose oracle plays the real 0.5B on a two-step lookup: it looks the
user up, then the email, and answers with the search result -- and, told the email was left
out, with the search result again, for as long as the request's schema admits it.
"""

from __future__ import annotations

from typing import Any

import trio
from runtime_support import admits

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.backends.sim._view import RequestView
from forge_rt.clients import LlamaServerClient
from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.eval.scenarios._kit import call, successful_results
from forge_rt.guardrails import GuardrailOptions
from forge_rt.runtime import WorkflowRunner

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
USER = {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}
FOUND = "1 match: Odile Varga, user_id=m-4k2q8"
EMAIL = "odile.varga@kite.example"


async def find_member(name: str) -> str:
    return FOUND


async def member_contact(user_id: str) -> str:
    return EMAIL


def _workflow() -> Workflow:
    return Workflow(
        name="emails",
        tools=[
            ToolDef(spec=ToolSpec(name="find_member", parameters=NAME), callable=find_member),
            ToolDef(spec=ToolSpec(name="member_contact", parameters=USER), callable=member_contact),
        ],
        required_steps=["find_member", "member_contact"],
        system_prompt_template="Answer with the tools.",
        constrain="always",
    )


def insisting_model(schemas: list[dict[str, Any]]) -> Any:
    """Looks up, then answers with the search result while the schema admits it."""

    def oracle(view: RequestView) -> Any:
        assert view.schema is not None
        schemas.append(view.schema)
        done = len(successful_results(view))
        if done == 0:
            return call("find_member", name="Odile Varga")
        if done == 1:
            return call("member_contact", user_id="m-4k2q8")
        if admits(view.schema, "respond", "message", FOUND):
            return call("respond", message=FOUND)
        return call("respond", message=EMAIL)

    return oracle


async def _run(options: GuardrailOptions, schemas: list[dict[str, Any]]) -> str:
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=insisting_model(schemas))) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            runner = WorkflowRunner(client, guardrails=options)
            result = await runner.run(_workflow(), "What is Odile Varga's email address?")
    return result.output


async def test_the_answer_after_a_refused_one_relays_the_result() -> None:
    """The search result as the answer is sent back once; the next request admits only the
    chain's end, the email, as respond's message, and that is the answer."""
    schemas: list[dict[str, Any]] = []
    assert await _run(GuardrailOptions(), schemas) == EMAIL
    assert [admits(s, "respond", "message", FOUND) for s in schemas[2:]] == [True, False]
    assert admits(schemas[3], "respond", "message", EMAIL)


async def test_without_answer_from_results_the_insisting_answer_is_taken() -> None:
    schemas: list[dict[str, Any]] = []
    assert await _run(GuardrailOptions(answer_from_results=False), schemas) == FOUND
    assert all(admits(s, "respond", "message", FOUND) for s in schemas[2:])
