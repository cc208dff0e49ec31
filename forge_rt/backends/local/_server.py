"""The embedded real model: llama.cpp's server on a packaged Qwen2.5-Coder, in a child process.

:class:`LocalModelServer` prepares the model file (:func:`prepare_model`), then runs
``python -m forge_rt.backends.local._serve`` through the managed-backend launcher exactly as it
would run a ``llama-server`` binary: free loopback port, readiness on ``/health``, log file,
SIGTERM-then-SIGKILL stop. A child process rather than xllamacpp in this process, because the
server's C++ threads cannot be cancelled by trio and a crash in them must not take the caller down.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from forge_rt.backends.local._models import (
    DEFAULT_MODEL,
    ModelChoice,
    StrPath,
    prepare_model,
    prepare_model_async,
    resolve_model,
)
from forge_rt.backends.managed import (
    DEFAULT_RESTART,
    BackendSpec,
    ManagedBackend,
    RestartPolicy,
    default_log_dir,
    llama_server_spec,
)
from forge_rt.errors import BackendExecutableNotFoundError

__all__ = ["PREEMPTIBLE_BATCH", "SERVE_COMMAND", "LocalModelServer"]

PREEMPTIBLE_BATCH = 128
"""Prompt tokens the embedded server processes between two looks at its task queue.

llama.cpp handles a cancelled request only between batches, and its default batch is 2,048
tokens. On the embedded 0.5B on a 2-core CPU (~150 prompt tokens/s), a voice request that
arrived during a background agent's 2,300-token prefill, with the background call cancelled,
got its first token after 12.9-13.8 s; with batches of 128 tokens after 0.96-1.04 s (0.08-0.11 s
on the idle slot). Prefill throughput was within noise of the default (140-148 against 138-149
tokens/s): ``python bench/prefill_preemption_bench.py``. ``LocalModelServer.spec(batch_size=None)``
keeps llama.cpp's default."""

SERVE_COMMAND: tuple[str, ...] = (sys.executable, "-m", "forge_rt.backends.local._serve")
"""The command prefix that runs the embedded server; it takes llama-server's flags."""

_INSTALL_LOCAL = "pip install 'forge-rt[local]' (from a source checkout: pip install -e '.[local]')"


def _require_xllamacpp() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise BackendExecutableNotFoundError(
            f"the embedded model server needs the Python package 'xllamacpp', which is not "
            f"installed; install it with `{_INSTALL_LOCAL}`",
            backend="embedded llama.cpp",
            executable="xllamacpp",
            install_hint=_INSTALL_LOCAL,
        )


class LocalModelServer:
    """A running embedded llama.cpp server for a packaged model.

    ``url`` is its OpenAI-compatible base URL (``/v1/chat/completions``, ``/props``, ``/slots``,
    ``/metrics`` and the rest of llama-server's API), ``log_path`` the server's log file.
    """

    def __init__(
        self, backend: ManagedBackend, *, model: ModelChoice, model_path: Path, n_ctx: int
    ) -> None:
        self.backend = backend
        self.model = model
        self.model_path = model_path
        self.n_ctx = n_ctx

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234`` (append ``/v1`` for OpenAI clients)."""
        return self.backend.url

    @property
    def port(self) -> int:
        """The loopback port the server listens on."""
        return self.backend.spec.port

    @property
    def pid(self) -> int:
        """Process id of the server child."""
        return self.backend.pid

    @property
    def log_path(self) -> Path:
        """File holding the server's stdout and stderr."""
        return self.backend.log_path

    def __repr__(self) -> str:
        return f"<LocalModelServer {self.model.name} url={self.url} pid={self.pid}>"

    @staticmethod
    def spec(
        model_path: Path,
        *,
        n_ctx: int,
        n_parallel: int,
        threads: int | None,
        port: int | None,
        extra_args: Sequence[str] = (),
        batch_size: int | None = PREEMPTIBLE_BATCH,
    ) -> BackendSpec:
        """The llama-server spec that runs the embedded server on ``model_path`` (see
        :data:`PREEMPTIBLE_BATCH` for ``batch_size``)."""
        return llama_server_spec(
            model_path,
            ctx_size=n_ctx,
            parallel=n_parallel,
            threads=threads,
            port=port,
            batch_size=batch_size,
            executable=SERVE_COMMAND,
            extra_args=["--props", *extra_args],
        )

    @classmethod
    @asynccontextmanager
    async def start(
        cls,
        model: str | ModelChoice = DEFAULT_MODEL,
        *,
        n_ctx: int = 4096,
        n_parallel: int = 1,
        threads: int | None = 2,
        port: int | None = None,
        cache_dir: StrPath | None = None,
        log_dir: StrPath | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        extra_args: Sequence[str] = (),
        restart: RestartPolicy | None = DEFAULT_RESTART,
        batch_size: int | None = PREEMPTIBLE_BATCH,
    ) -> AsyncIterator[LocalModelServer]:
        """Prepare ``model`` (in a worker thread), start its server, yield it, stop it on exit.

        ``n_ctx`` is the total context shared by ``n_parallel`` slots; ``threads=None`` lets
        llama.cpp pick. Raises what :func:`prepare_model` raises, and
        :class:`~forge_rt.errors.BackendStartError` (with the server's last log lines) when the
        server does not come up within ``startup_timeout`` seconds. ``restart``: a server that
        dies while in use is started again under this policy (``None``: it stays down).
        ``batch_size``: see :data:`PREEMPTIBLE_BATCH` (``None``: llama.cpp's default).
        """
        choice = resolve_model(model)
        _require_xllamacpp()
        path = await prepare_model_async(choice, cache_dir)
        spec = cls.spec(
            path,
            n_ctx=n_ctx,
            n_parallel=n_parallel,
            threads=threads,
            port=port,
            extra_args=extra_args,
            batch_size=batch_size,
        )
        async with ManagedBackend.start(
            spec,
            log_path=_log_path(log_dir, choice, spec.port),
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
            restart=restart,
        ) as backend:
            yield cls(backend, model=choice, model_path=path, n_ctx=n_ctx)

    @classmethod
    @contextmanager
    def start_blocking(
        cls,
        model: str | ModelChoice = DEFAULT_MODEL,
        *,
        n_ctx: int = 4096,
        n_parallel: int = 1,
        threads: int | None = 2,
        port: int | None = None,
        cache_dir: StrPath | None = None,
        log_dir: StrPath | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        extra_args: Sequence[str] = (),
        batch_size: int | None = PREEMPTIBLE_BATCH,
    ) -> Iterator[LocalModelServer]:
        """:meth:`start` for synchronous code (pytest session fixtures, scripts)."""
        choice = resolve_model(model)
        _require_xllamacpp()
        path = prepare_model(choice, cache_dir)
        spec = cls.spec(
            path,
            n_ctx=n_ctx,
            n_parallel=n_parallel,
            threads=threads,
            port=port,
            extra_args=extra_args,
            batch_size=batch_size,
        )
        with ManagedBackend.start_blocking(
            spec,
            log_path=_log_path(log_dir, choice, spec.port),
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
        ) as backend:
            yield cls(backend, model=choice, model_path=path, n_ctx=n_ctx)


def _log_path(log_dir: StrPath | None, choice: ModelChoice, port: int) -> Path:
    return (default_log_dir() if log_dir is None else Path(log_dir)) / f"{choice.name}-{port}.log"
