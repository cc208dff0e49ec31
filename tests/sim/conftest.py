"""Fixtures for the simulated backend's tests: a served sim and an HTTP client bound to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from forge_rt.backends.sim import SimBackend, SimConfig


@pytest.fixture
async def sim() -> AsyncIterator[SimBackend]:
    async with SimBackend.serve(SimConfig()) as backend:
        yield backend


@pytest.fixture
async def http(sim: SimBackend) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        yield client
