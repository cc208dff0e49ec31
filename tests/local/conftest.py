"""Fixtures for the embedded-model and managed-backend tests: fake part packages, a fake server."""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forge_rt.backends.local import ModelChoice, ModelPart

FAKE_BACKEND = (sys.executable, str(Path(__file__).with_name("fake_backend.py")))
"""Command prefix that runs the stand-in inference server."""

MakeFakeModel = Callable[..., ModelChoice]


@pytest.fixture
def make_fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeFakeModel]:
    """Build installed part packages (a few KB each) on sys.path and the ModelChoice that joins them.

    ``make(contents, install=None, sha256=None)``: ``contents`` are the slices' bytes in order,
    ``install`` the indexes of the parts actually installed (default: all), ``sha256`` overrides
    the expected hash (default: the true hash of the joined bytes).
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    created: list[str] = []

    def make(
        contents: list[bytes], install: set[int] | None = None, sha256: str | None = None
    ) -> ModelChoice:
        stem = f"forge_rt_fakepart_{uuid.uuid4().hex[:8]}_"
        parts = []
        for i, data in enumerate(contents, start=1):
            part = ModelPart(
                distribution=f"{stem.replace('_', '-')}{i}",
                version="1.0",
                module=f"{stem}{i}",
                resource=f"data/part{i:02d}.bin",
            )
            parts.append(part)
            if install is None or i - 1 in install:
                (site / part.module / "data").mkdir(parents=True)
                (site / part.module / "__init__.py").write_text("")
                (site / part.module / part.resource).write_bytes(data)
                created.append(part.module)
        joined = b"".join(contents)
        return ModelChoice(
            name=f"fake-{stem}",
            description="fake model for tests",
            filename=f"{stem}.gguf",
            size=len(joined),
            sha256=sha256 or hashlib.sha256(joined).hexdigest(),
            extra="fake-extra",
            parts=tuple(parts),
        )

    yield make
    for module in created:
        sys.modules.pop(module, None)


@pytest.fixture
def fake_backend_cmd() -> tuple[str, ...]:
    """Command prefix running tests/local/fake_backend.py as if it were a backend program."""
    return FAKE_BACKEND
