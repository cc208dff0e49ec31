"""A model that answers with the chat's tool-result markup: after the first such answer the next
constrained requests admit no ``respond`` message starting with "<", so its next answer is a
real one. Tested over HTTP on the sim, whose oracle plays the model: it answers
"<tool_response>" for as long as the request's schema admits it.
"""

from __future__ import annotations

import re
from typing import Any

import trio

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.backends.sim._view import RequestView
from forge_rt.clients import LlamaServerClient
from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.eval.scenarios._kit import call, successful_results
from forge_rt.runtime import WorkflowRunner

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def admits_message(schema: dict[str, Any], message: str) -> bool:
    """Whether one of ``schema``'s single-call branches admits respond(message=message)."""
    for branch in schema["anyOf"]:
        if branch.get("type") != "object" or branch["properties"]["name"]["const"] != "respond":
            continue  # the array-of-calls branch repeats the same calls
        string = branch["properties"]["arguments"]["properties"]["message"]
        if "enum" in string:  # an answer held to the turn's results
            if message in string["enum"]:
                return True
            continue
        if len(message) <= string["maxLength"] and (
            "pattern" not in string or re.fullmatch(string["pattern"], message)
        ):
            return True
    return False


async def read_gauge(city: str) -> str:
    return f"Gauge at {city}: 11C, light rain"


def _workflow() -> Workflow:
    spec = ToolSpec(name="read_gauge", parameters=CITY)
    return Workflow(
        name="weather",
        tools=[ToolDef(spec=spec, callable=read_gauge)],
        required_steps=["read_gauge"],
        system_prompt_template="Answer weather questions.",
        constrain="always",
    )


async def test_after_a_markup_answer_the_constraint_admits_none_and_the_next_answer_is_real() -> (
    None
):
    schemas: list[dict[str, Any]] = []

    def echoing(view: RequestView) -> Any:
        assert view.schema is not None
        schemas.append(view.schema)
        if not successful_results(view):
            return call("read_gauge", city="Ostrava")
        if admits_message(view.schema, "<tool_response>"):
            return call("respond", message="<tool_response>")
        return call("respond", message="Gauge at Ostrava: 11C, light rain")

    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=echoing)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            result = await WorkflowRunner(client).run(
                _workflow(), "What does the gauge at Ostrava read?"
            )
    assert result.output == "Gauge at Ostrava: 11C, light rain"
    # The first request admits no answer (the step is pending), the second any, and the one
    # after the markup answer none that starts with "<" -- a real answer still.
    assert [admits_message(s, "<tool_response>") for s in schemas] == [False, True, False]
    assert admits_message(schemas[2], "Gauge at Ostrava: 11C, light rain")
    assert result.stats.retries == {"invalid_call": 1}
