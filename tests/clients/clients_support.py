"""Shared test data for the client adapter tests (imported by name: tests are not a package)."""

from __future__ import annotations

from forge_rt.core import ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
