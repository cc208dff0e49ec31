"""Fixtures for the client adapter tests: tool specs and requests used across files."""

from __future__ import annotations

import pytest

from forge_rt.clients import InferenceRequest
from forge_rt.core import Message, ToolSpec

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture
def weather_request() -> InferenceRequest:
    """A one-turn request offering the weather tool."""
    return InferenceRequest(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))
