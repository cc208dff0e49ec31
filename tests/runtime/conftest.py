"""Fixtures for the runtime tests."""

import pytest
from runtime_support import Tools


@pytest.fixture
def tools() -> Tools:
    return Tools()
