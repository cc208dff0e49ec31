"""Constrained decoding: with a JSON schema the reply is an instance of it, carrying the intent."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest
from sim_helpers import WEATHER_TOOLS, user

from forge_rt.backends.sim import SimBackend
from forge_rt.core import model_from_json_schema

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "enum": ["get_weather", "respond"]},
        "arguments": CITY,
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}
UNION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "call": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "name": {"const": "respond"},
                        "arguments": {
                            "type": "object",
                            "properties": {"message": {"type": "string"}},
                            "required": ["message"],
                        },
                    },
                    "required": ["name", "arguments"],
                },
                {
                    "type": "object",
                    "properties": {"name": {"const": "get_weather"}, "arguments": CITY},
                    "required": ["name", "arguments"],
                },
            ]
        }
    },
    "required": ["call"],
}


async def _content(http: httpx.AsyncClient, **body: Any) -> Any:
    response = await http.post(
        "/v1/chat/completions", json={"messages": user("w"), "tools": WEATHER_TOOLS, **body}
    )
    assert response.status_code == 200, response.text
    return msgspec.json.decode(response.json()["choices"][0]["message"]["content"])


@pytest.mark.parametrize(
    "body",
    [
        {"response_format": {"type": "json_schema", "json_schema": {"schema": CALL_SCHEMA}}},
        {"json_schema": CALL_SCHEMA},
    ],
    ids=["response_format", "json_schema"],
)
async def test_schema_constraint_yields_a_valid_instance_with_the_intended_call(
    sim: SimBackend, http: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    """The reply validates against the schema and carries the call the model intended."""
    value = await _content(http, **body)
    model_from_json_schema("call", CALL_SCHEMA).model_validate(value)
    assert value == {"name": "get_weather", "arguments": {"city": "example city"}}
    assert sim.stats.dialects == {"constrained": 1}
    assert sim.stats.constraints == {next(iter(body)): 1}


async def test_union_schema_picks_the_branch_naming_the_intended_tool(
    http: httpx.AsyncClient,
) -> None:
    """In an anyOf of tool-call branches, the branch whose name is the intended tool is used."""
    value = await _content(http, json_schema=UNION_SCHEMA)
    model_from_json_schema("wrapper", UNION_SCHEMA).model_validate(value)
    assert value == {"call": {"name": "get_weather", "arguments": {"city": "example city"}}}


async def test_a_union_of_call_lists_picks_the_list_of_the_intended_tool(
    http: httpx.AsyncClient,
) -> None:
    """A union whose branches are lists of one tool's calls (each item itself a union) is
    chosen by the tool its items name, whatever branch comes first."""
    branches = UNION_SCHEMA["properties"]["call"]["anyOf"]
    lists = {"anyOf": [{"type": "array", "items": {"anyOf": [b]}} for b in branches]}
    value = await _content(http, json_schema=lists)
    assert value == [{"name": "get_weather", "arguments": {"city": "example city"}}]


async def test_grammar_constraint_yields_the_call_as_bare_json(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A GBNF grammar (not parsed by the sim) yields the intended call as name/arguments JSON."""
    value = await _content(http, grammar='root ::= "{" [^}]* "}"')
    assert value == {"name": "get_weather", "arguments": {"city": "example city"}}
    assert sim.stats.constraints == {"grammar": 1}


async def test_ollama_format_schema_constrains_the_content(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Ollama's ``format`` schema constrains the content the same way."""
    body = {"messages": user("w"), "tools": WEATHER_TOOLS, "format": CALL_SCHEMA, "stream": False}
    reply = (await http.post("/api/chat", json=body)).json()
    value = msgspec.json.decode(reply["message"]["content"])
    assert value == {"name": "get_weather", "arguments": {"city": "example city"}}
    assert sim.stats.constraints == {"format": 1}
