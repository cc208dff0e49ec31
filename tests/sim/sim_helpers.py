"""Request bodies and SSE helpers shared by the simulated backend's tests."""

from __future__ import annotations

from typing import Any

import msgspec

WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "respond",
            "description": "Give the final answer to the user.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        },
    },
]


def sse_payloads(text: str) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]


def sse_json(text: str) -> list[dict[str, Any]]:
    """The JSON ``data:`` payloads of an SSE body (``[DONE]`` left out)."""
    return [msgspec.json.decode(p) for p in sse_payloads(text) if p != "[DONE]"]
