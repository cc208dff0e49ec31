"""The estimator and budgets against the embedded real model's tokenizer and server. Slow."""

from __future__ import annotations

import json

import httpx
import pytest
import trio

from forge_rt.clients import LlamaServerClient
from forge_rt.context import CALIBRATION_TEXTS, BudgetMode, TokenEstimator, resolve_budget
from forge_rt.core import Message, Role, ToolCall

pytestmark = pytest.mark.slow

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "days": {"type": "integer", "description": "How many days ahead"},
                },
                "required": ["city"],
            },
        },
    }
    for name, description in [
        ("get_weather", "Current weather for a city."),
        ("get_forecast", "Forecast for the next days."),
        ("report", "The final answer for the user."),
    ]
]

HELD_OUT = [
    "Tool results arrive as JSON; the model reads them and decides which tool to call next.",
    json.dumps({"region": "APAC", "quarter": 2, "revenue": 1204553.25, "growth": 0.071}),
    "for row in rows:\n    total += row['revenue'] * (1 + row['growth'])\n",
]


def wire(message: Message) -> dict[str, object]:
    """The OpenAI wire shape of a message, for /apply-template."""
    body: dict[str, object] = {"role": message.role.value, "content": message.content}
    if message.tool_calls:
        body["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": c.tool, "arguments": json.dumps(c.args)},
            }
            for c in message.tool_calls
        ]
    if message.role is Role.TOOL:
        body["tool_call_id"] = message.tool_call_id
    return body


async def tokens(http: httpx.AsyncClient, text: str, *, special: bool = False) -> int:
    response = await http.post("/tokenize", json={"content": text, "parse_special": special})
    response.raise_for_status()
    return len(response.json()["tokens"])


async def prompt_tokens(http: httpx.AsyncClient, messages: list[Message]) -> int:
    """What the server counts for a chat prompt with these messages and TOOLS."""
    response = await http.post(
        "/apply-template", json={"messages": [wire(m) for m in messages], "tools": TOOLS}
    )
    response.raise_for_status()
    return await tokens(http, response.json()["prompt"], special=True)


async def test_calibration_against_tokenize_predicts_held_out_text(local_model_url: str) -> None:
    """A ratio fitted on CALIBRATION_TEXTS via /tokenize estimates unseen text within 15%."""
    with trio.fail_after(60):
        async with httpx.AsyncClient(base_url=local_model_url) as http:
            samples = [(t, await tokens(http, t)) for t in CALIBRATION_TEXTS]
            estimator = TokenEstimator()
            estimator.calibrate(samples)
            for text in HELD_OUT:
                real = await tokens(http, text)
                assert abs(estimator.count(text) - real) <= 0.15 * real, text


async def test_usage_observations_track_the_real_prompt(local_model_url: str) -> None:
    """After one reported prompt size, the estimate of each next, larger prompt (tool schemas
    included) is within 3% of what the server counts."""
    history = [
        Message.system("You are a weather assistant. Use the tools; call report when done."),
        Message.user("What is the weather in Paris and Osaka this week?"),
    ]
    estimator = TokenEstimator()
    errors = []
    with trio.fail_after(120):
        async with httpx.AsyncClient(base_url=local_model_url) as http:
            for turn in range(8):
                call = ToolCall(
                    tool="get_forecast",
                    args={"city": ["Paris", "Osaka"][turn % 2], "days": 3},
                    call_id=f"call_{turn}",
                )
                days = [
                    {"day": d, "high_c": 12 + turn + d, "conditions": "showers"} for d in range(3)
                ]
                history += [
                    Message.assistant_calls([call]),
                    Message.tool_result(
                        call, json.dumps({"city": call.args["city"], "days": days})
                    ),
                ]
                real = await prompt_tokens(http, history)
                if turn > 0:
                    errors.append(abs(estimator.count_prompt(history) - real) / real)
                estimator.observe_usage(history, real)
    assert max(errors) <= 0.03, errors


async def test_backend_budget_is_the_servers_slot_context(local_model_url: str) -> None:
    """Budget mode backend reads n_ctx from the running llama.cpp server (4096, one slot)."""
    with trio.fail_after(30):
        client = LlamaServerClient(local_model_url)
        try:
            budget = await resolve_budget(BudgetMode.BACKEND, client=client)
            fast = await resolve_budget(BudgetMode.FAST, client=client, backend_kind="llama-server")
        finally:
            await client.aclose()
    assert (budget.tokens, budget.source, fast.tokens) == (4096, "backend", 2048)
