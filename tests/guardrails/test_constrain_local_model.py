"""Constrained decoding end to end on the embedded Qwen2.5-Coder-0.5B (llama.cpp).

Without a constraint this model writes calls as free text (and often invents tools). With
``response_format: json_schema`` built by :func:`tool_call_schema` -- or the GBNF grammar -- every
reply must parse, first time, into one call of a known tool with valid arguments. These tests
assert that, never that the model picked the right tool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import httpx
import pytest
import trio
from pydantic import BaseModel, Field

from forge_rt.clients import LlamaServerClient
from forge_rt.core import InferenceRequest, Message, Sampling, ToolSpec
from forge_rt.guardrails import (
    Dialect,
    NarrowedConstraint,
    choose_constraint,
    rescue,
    respond_spec,
    tool_call_grammar,
    tool_call_schema,
    with_respond,
)

pytestmark = pytest.mark.slow


class Slot(BaseModel):
    day: Literal["mon", "tue", "wed", "thu", "fri"]
    hour: int = Field(ge=8, le=18)


class MeetingArgs(BaseModel):
    """A pydantic model: its schema carries $defs, titles, defaults and a nullable field."""

    title: str = Field(min_length=1, max_length=60)
    slot: Slot
    attendees: list[str] = Field(default=[], max_length=5)
    room: str | None = None


TOOLS = with_respond(
    [
        ToolSpec(name="schedule_meeting", description="Book a meeting.", parameters=MeetingArgs),
        ToolSpec(
            name="get_weather",
            description="Current weather for a city.",
            parameters={
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        ),
        ToolSpec(
            name="search_web",
            description="Search the web.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["query"],
            },
        ),
    ]
)
assert TOOLS[0] == respond_spec()

SYSTEM = (
    "You are a helpful assistant. Answer with exactly one tool call as JSON "
    '{"name": <tool name>, "arguments": {...}}. Use respond to talk to the user. Tools:\n'
    + "\n".join(
        f"- {t.name}: {t.description} Parameters: {json.dumps(t.json_schema())}" for t in TOOLS
    )
)
PROMPTS = [
    "What's the weather like in Paris right now, in fahrenheit?",
    "Book a 'Design review' with Ana and Bo on Tuesday at 14:00.",
    "Hi there! Thanks for your help earlier, that was great.",
]


async def _complete(base_url: str, prompt: str, constraint: dict[str, Any]) -> tuple[str, str]:
    body = {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        "temperature": 0.7,
        "top_p": 0.8,
        "top_k": 20,
        "seed": 7,
        "max_tokens": 400,
        **constraint,
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(300.0)) as client:
        response = await client.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    choice = response.json()["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def _assert_one_valid_call(
    content: str, finish_reason: str, tools: Sequence[ToolSpec] = TOOLS
) -> None:
    result = rescue(content, tools, constrained=True)
    assert finish_reason == "stop", f"cut off ({finish_reason}): {content!r}"
    assert len(result.calls) == 1, content
    assert (result.dialects, result.unknown_calls) == ((Dialect.CONSTRAINED_JSON,), []), content
    call = result.calls[0]
    spec = {t.name: t for t in tools}[call.tool]
    spec.validate_args(call.args)


@pytest.mark.parametrize("prompt", PROMPTS, ids=["weather", "meeting", "chit-chat"])
async def test_json_schema_constrained_reply_parses_first_time(
    local_model_url: str, prompt: str
) -> None:
    """Under the tool-call JSON schema the real model's reply is one valid known call."""
    schema = tool_call_schema(TOOLS)
    constraint = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    with trio.fail_after(300):
        content, finish_reason = await _complete(local_model_url, prompt, constraint)
    _assert_one_valid_call(content, finish_reason)


async def test_grammar_constrained_reply_parses_first_time(local_model_url: str) -> None:
    """llama.cpp accepts the generated GBNF, and the reply under it is one valid known call.

    The grammar does not enforce numeric bounds, so the tools here have none.
    """
    tools = [t for t in TOOLS if t.name in ("get_weather", "respond")]
    with trio.fail_after(300):
        content, finish_reason = await _complete(
            local_model_url, PROMPTS[0], {"grammar": tool_call_grammar(tools)}
        )
    _assert_one_valid_call(content, finish_reason, tools)


async def test_an_answer_held_to_json_text_comes_out_whole_on_raw_generation(
    local_model_url: str,
) -> None:
    """llama-server's ``/completion`` lets a string held to a JSON-schema ``enum`` end early at
    an escaped quote; with a grammar allowed, the hold is a grammar and comes out whole."""
    held = '{"title": "Quiet Harbour", "shelf": "QH-118"}\n{"title": "Low Tide", "shelf": "LT-4"}'
    tools = (respond_spec(),)
    async with LlamaServerClient(local_model_url, generation="raw") as client:
        base = choose_constraint("auto", client.capabilities, tools).constraint
        narrowed = NarrowedConstraint(base, tools, grammar=client.capabilities.grammar).to(
            tools, answers=[held]
        )
        request = InferenceRequest(
            tools=tools,
            messages=(Message.user("Tell me where both books are."),),
            sampling=Sampling(temperature=0.7, top_k=20, top_p=0.8, seed=3, max_tokens=300),
            constraint=narrowed,
        )
        with trio.fail_after(120):
            reply = await client.send(request)
    (call,) = reply.result  # type: ignore[misc]
    assert call.args["message"] == held
