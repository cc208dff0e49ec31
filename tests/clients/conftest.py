"""Fixtures for the client adapter tests."""

from __future__ import annotations

import pytest
from clients_support import WEATHER

from forge_rt.core import InferenceRequest, Message


@pytest.fixture
def weather_request() -> InferenceRequest:
    """A one-turn request offering the weather tool."""
    return InferenceRequest(messages=(Message.user("Weather in Paris?"),), tools=(WEATHER,))
