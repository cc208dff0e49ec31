"""Shared fixtures. Area-specific fixtures live in each tests/<area>/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

from forge_rt.backends.local import DEFAULT_MODEL, LocalModelServer

# Property tests judge what is generated, never how fast: Hypothesis's default 200 ms deadline
# per example (and its too-slow health check) failed them on a loaded CI machine.
settings.register_profile("forge_rt", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("forge_rt")


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalModelServer]:
    """The embedded Qwen2.5-Coder-0.5B (n_ctx 4096, one slot), started once per session on demand.

    Started from sync code because each trio test runs its own event loop, which a session-scoped
    async fixture cannot outlive. Only tests that request it start the model; a model that cannot
    start makes those tests error with the typed error, never skip.
    """
    with LocalModelServer.start_blocking(DEFAULT_MODEL, n_ctx=4096, n_parallel=1) as server:
        yield server


@pytest.fixture(scope="session")
def local_model_url(local_model: LocalModelServer) -> str:
    """Base URL of the session's embedded model server, e.g. ``http://127.0.0.1:41234``."""
    return local_model.url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server for the session (``forge_rt.testing.throwaway_postgres``)."""
    from forge_rt.testing import throwaway_postgres

    with throwaway_postgres() as url:
        yield url


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """Each test starts with structlog's defaults: a command run in-process by one test (the CLI
    configures logging) must not filter what a later test's ``capture_logs`` sees."""
    yield
    structlog.reset_defaults()
