"""The sim under the runtime's own tool-call constraint: one call or an array, within bounds."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest
from sim_helpers import WEATHER_TOOLS, user

from forge_rt.backends.sim import RequestView, SimBackend, SimConfig, SimToolCall
from forge_rt.core import ToolSpec, model_from_json_schema
from forge_rt.guardrails import DEFAULT_MAX_LENGTH, CallShape, tool_call_schema

SPECS = [
    ToolSpec(
        name=t["function"]["name"],
        description=t["function"]["description"],
        parameters=t["function"]["parameters"],
    )
    for t in WEATHER_TOOLS
]


def _config(intent: SimToolCall | str) -> SimConfig:
    """A sim whose oracle always intends ``intent``."""

    def oracle(view: RequestView) -> SimToolCall | str:
        return intent

    return SimConfig(oracle=oracle)


async def _content(sim: SimBackend, schema: dict[str, Any]) -> Any:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as http:
        response = await http.post(
            "/v1/chat/completions",
            json={"messages": user("w"), "tools": WEATHER_TOOLS, "json_schema": schema},
        )
    assert response.status_code == 200, response.text
    return msgspec.json.decode(response.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "single"])
async def test_the_intended_call_is_an_instance_of_the_tool_call_schema(parallel: bool) -> None:
    """Under tool_call_schema (with or without the array branch) the sim writes the one call it
    intends as a bare object, which the schema admits."""
    schema = tool_call_schema(SPECS, shape=CallShape(parallel=parallel))
    intent = SimToolCall(name="get_weather", arguments={"city": "Oslo", "days": 2})
    async with SimBackend.serve(_config(intent)) as sim:
        value = await _content(sim, schema)
    assert value == {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}
    model_from_json_schema("reply", {"type": "object", "properties": {"r": schema}}).model_validate(
        {"r": value}
    )


async def test_an_intended_string_longer_than_the_bound_is_cut_to_it() -> None:
    """A model decoding under the bounded constraint is closed at maxLength: so is the sim."""
    schema = tool_call_schema(SPECS)
    message = "word " * DEFAULT_MAX_LENGTH
    async with SimBackend.serve(
        _config(SimToolCall(name="respond", arguments={"message": message}))
    ) as sim:
        value = await _content(sim, schema)
    assert value == {"name": "respond", "arguments": {"message": message[:DEFAULT_MAX_LENGTH]}}
