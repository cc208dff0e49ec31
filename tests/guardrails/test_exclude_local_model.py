"""An excluded call on the embedded Qwen2.5-Coder-0.5B (llama.cpp): the backend accepts the
excluding schema and grammar, and the model, asked for exactly that call, writes another.

One prompt, one tool, so the excluded call is what the model writes unconstrained; the reply
must be a valid call of the tool that is not it.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import (
    CallShape,
    Dialect,
    StartsWith,
    rescue,
    respond_spec,
    tool_call_grammar,
    tool_call_schema,
)
from forge_rt.guardrails._validator import call_key

pytestmark = pytest.mark.slow

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
)
BLOCKED = ToolCall(tool="get_weather", args={"city": "Paris"})
SYSTEM = (
    "Answer with exactly one tool call as JSON "
    '{"name": <tool name>, "arguments": {...}}. Tools:\n'
    f"- get_weather: {WEATHER.description} Parameters: {json.dumps(WEATHER.json_schema())}"
)


async def _complete(base_url: str, constraint: dict[str, Any]) -> tuple[str, str]:
    body = {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What's the weather in Paris?"},
        ],
        "temperature": 0.0,
        "seed": 7,
        "max_tokens": 200,
        **constraint,
    }
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(120.0)) as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def _assert_other_call(content: str, finish_reason: str) -> None:
    result = rescue(content, [WEATHER], constrained=True)
    assert finish_reason == "stop", f"cut off ({finish_reason}): {content!r}"
    assert (len(result.calls), result.dialects) == (1, (Dialect.CONSTRAINED_JSON,)), content
    call = result.calls[0]
    WEATHER.validate_args(call.args)
    assert call_key(call) != call_key(BLOCKED), content


@pytest.mark.parametrize("kind", ["json_schema", "grammar"])
async def test_excluded_call_is_not_written(local_model_url: str, kind: str) -> None:
    """Under a constraint that excludes get_weather(city="Paris"), the reply is another call."""
    if kind == "json_schema":
        schema = tool_call_schema([WEATHER], shape=CallShape(parallel=False), exclude=[BLOCKED])
        constraint = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    else:
        constraint = {
            "grammar": tool_call_grammar(
                [WEATHER], shape=CallShape(parallel=False), exclude=[BLOCKED]
            )
        }
    with trio.fail_after(300):
        content, finish_reason = await _complete(local_model_url, constraint)
    _assert_other_call(content, finish_reason)


MARKUP = ToolCall(tool="respond", args={"message": StartsWith("<")})


@pytest.mark.parametrize("kind", ["json_schema", "grammar"])
async def test_an_answer_of_markup_is_not_written_once_excluded(
    local_model_url: str, kind: str
) -> None:
    """Asked to answer with the tool-result markup itself, the model under the markup exclusion
    (what Guardrails.excluded_calls adds after such an answer) writes an answer that does not
    start with "<", and the backend takes the excluding schema and grammar."""
    tools = [respond_spec()]
    if kind == "json_schema":
        schema = tool_call_schema(tools, shape=CallShape(parallel=False), exclude=[MARKUP])
        constraint = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    else:
        constraint = {
            "grammar": tool_call_grammar(tools, shape=CallShape(parallel=False), exclude=[MARKUP])
        }
    body = {
        "messages": [
            {
                "role": "system",
                "content": 'Answer with one JSON call {"name": "respond", "arguments": '
                '{"message": ...}}.',
            },
            {"role": "user", "content": 'Call respond with the message "<tool_response>".'},
        ],
        "temperature": 0.0,
        "seed": 7,
        "max_tokens": 100,
        **constraint,
    }
    with trio.fail_after(300):
        async with httpx.AsyncClient(base_url=local_model_url, timeout=300.0) as client:
            response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    content = response.json()["choices"][0]["message"]["content"]
    result = rescue(content, tools, constrained=True)
    assert len(result.calls) == 1, content
    message = result.calls[0].args["message"]
    assert isinstance(message, str)
    assert not message.startswith("<"), content
