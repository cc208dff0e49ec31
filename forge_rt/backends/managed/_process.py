"""Run a :class:`BackendSpec` as a child process: start, wait until ready, capture its log, stop.

The same launch is offered twice: :meth:`ManagedBackend.start` for trio code and
:meth:`ManagedBackend.start_blocking` for synchronous callers (pytest session fixtures, scripts).
Everything except the waiting itself (resolving the program, the environment, the log file, judging
a readiness answer, building errors, the stop order) is shared, so the two cannot drift apart.

Stopping is always the same: SIGTERM, wait up to ``stop_timeout``, then SIGKILL. The child also gets
``FORGE_RT_PARENT_PID`` in its environment; the embedded server exits by itself when that parent
disappears without stopping it (a crashed or killed test run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO

import httpx
import structlog
import trio

from forge_rt.backends.managed._cache import default_log_dir
from forge_rt.backends.managed._spec import BackendSpec, judge_probe
from forge_rt.errors import BackendExecutableNotFoundError, BackendStartError

__all__ = ["PARENT_PID_ENV", "ManagedBackend"]

log = structlog.get_logger(__name__)

PARENT_PID_ENV = "FORGE_RT_PARENT_PID"
"""Environment variable naming the process that launched a managed backend."""

_PROBE_TIMEOUT = 2.0
_TAIL_LINES = 40
_TAIL_BYTES = 64 * 1024


def read_log_tail(path: Path, lines: int = _TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file (undecodable bytes shown as U+FFFD)."""
    with path.open("rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - _TAIL_BYTES))
        text = f.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


class _Launch:
    """A spec made concrete: resolved program, full environment, log file; builds the errors."""

    def __init__(self, spec: BackendSpec, log_path: str | os.PathLike[str] | None) -> None:
        program = shutil.which(spec.argv[0])
        if program is None:
            raise BackendExecutableNotFoundError(
                f"cannot start {spec.kind.value}: the program {spec.argv[0]!r} is not on PATH; "
                f"{spec.install_hint}",
                backend=spec.name,
                executable=spec.argv[0],
                install_hint=spec.install_hint,
            )
        self.spec = spec
        self.argv = (program, *spec.argv[1:])
        self.env = {**os.environ, **spec.env, PARENT_PID_ENV: str(os.getpid())}
        self.log_path = (
            Path(log_path)
            if log_path is not None
            else default_log_dir() / f"{spec.kind.value}-{spec.port}.log"
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.last_answer = "no answer yet"

    def open_log(self) -> IO[bytes]:
        """The log file, truncated, for the child's stdout and stderr."""
        return self.log_path.open("wb")

    def exited_error(self, returncode: int) -> BackendStartError:
        """The child exited before it was ready."""
        return self._error(
            f"exited with code {returncode} before it was ready at {self.spec.ready_url}",
            returncode,
        )

    def judge(self, status_code: int, body: bytes) -> bool:
        """True when this readiness answer says ready; raises when it never will be."""
        probe = judge_probe(self.spec, status_code, body)
        if probe.fatal:
            raise self._error(f"cannot be used: {probe.reason}", None)
        self.last_answer = probe.reason
        return probe.ready

    def timeout_error(self, timeout: float) -> BackendStartError:
        """The child did not become ready in time (it is stopped afterwards)."""
        return self._error(
            f"was not ready at {self.spec.ready_url} within {timeout:g} s "
            f"(last answer: {self.last_answer}); "
            "raise startup_timeout if it is only slow to load",
            None,
        )

    def _error(self, what: str, returncode: int | None) -> BackendStartError:
        tail = read_log_tail(self.log_path)
        return BackendStartError(
            f"{self.spec.kind.value} ({' '.join(self.argv)}) {what}.\n"
            f"Last lines of {self.log_path}:\n{tail}",
            backend=self.spec.name,
            argv=self.argv,
            log_path=str(self.log_path),
            log_tail=tail,
            returncode=returncode,
        )


class ManagedBackend:
    """A running backend server process that this process started and will stop.

    Get one from :meth:`start` (trio) or :meth:`start_blocking`; it is only valid inside that
    context. ``url`` is the server's base URL, ``log_path`` the file holding its stdout and stderr.
    """

    def __init__(
        self, spec: BackendSpec, *, pid: int, log_path: Path, poll: Callable[[], int | None]
    ) -> None:
        self.spec = spec
        self.pid = pid
        self.log_path = log_path
        self._poll = poll

    @property
    def url(self) -> str:
        """Base URL of the server, e.g. ``http://127.0.0.1:41234``."""
        return self.spec.base_url

    @property
    def returncode(self) -> int | None:
        """The child's exit status, or ``None`` while it runs."""
        return self._poll()

    def log_tail(self, lines: int = _TAIL_LINES) -> str:
        """The last ``lines`` lines the server wrote."""
        return read_log_tail(self.log_path, lines)

    def __repr__(self) -> str:
        return f"<ManagedBackend {self.spec.name} pid={self.pid} url={self.url}>"

    @classmethod
    @asynccontextmanager
    async def start(
        cls,
        spec: BackendSpec,
        *,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        poll_interval: float = 0.1,
    ) -> AsyncIterator[ManagedBackend]:
        """Start ``spec``'s server, wait until it is ready, yield it, and stop it on exit.

        Raises :class:`~forge_rt.errors.BackendExecutableNotFoundError` when the program is
        missing and :class:`~forge_rt.errors.BackendStartError` when it exits early, is not ready
        within ``startup_timeout`` seconds or answers unusably. The deadline is looked at after
        each readiness probe (every ``poll_interval`` seconds), so the server is always asked at
        least once and the error names its last answer. The child is stopped on every exit path,
        cancellation included.
        """
        launch = await trio.to_thread.run_sync(_Launch, spec, log_path)
        log.info(
            "backend.start", backend=spec.name, argv=launch.argv, log_path=str(launch.log_path)
        )
        log_file = await trio.to_thread.run_sync(launch.open_log)
        with log_file:
            proc = await trio.lowlevel.open_process(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=launch.env,
            )
        was_ready = False
        try:
            await _poll_until_ready(proc, launch, startup_timeout, poll_interval)
            was_ready = True
            log.info("backend.ready", backend=spec.name, url=spec.base_url, pid=proc.pid)
            yield cls(spec, pid=proc.pid, log_path=launch.log_path, poll=proc.poll)
        finally:
            # Shielded: this runs while the caller may be cancelled, and an unshielded wait would
            # be cancelled at once, leaving the child holding its port, memory and CPU.
            with trio.CancelScope(shield=True):
                await _stop_async(proc, launch, stop_timeout, was_ready=was_ready)

    @classmethod
    @contextmanager
    def start_blocking(
        cls,
        spec: BackendSpec,
        *,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        poll_interval: float = 0.1,
    ) -> Iterator[ManagedBackend]:
        """:meth:`start` for synchronous code: same checks, errors and stop order, blocking."""
        launch = _Launch(spec, log_path)
        log.info(
            "backend.start", backend=spec.name, argv=launch.argv, log_path=str(launch.log_path)
        )
        with launch.open_log() as log_file:
            proc = subprocess.Popen(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=launch.env,
            )
        was_ready = False
        try:
            _wait_ready_sync(proc, launch, startup_timeout, poll_interval)
            was_ready = True
            log.info("backend.ready", backend=spec.name, url=spec.base_url, pid=proc.pid)
            yield cls(spec, pid=proc.pid, log_path=launch.log_path, poll=proc.poll)
        finally:
            _stop_sync(proc, launch, stop_timeout, was_ready=was_ready)


def _probe_client_limits() -> httpx.Limits:
    # A fresh connection per probe: a server that is still binding or restarting must not be
    # judged through a stale pooled connection.
    return httpx.Limits(max_keepalive_connections=0)


# Both waits follow one rule: probe, and only then look at the deadline. So the server is always
# asked at least once (however long starting the process took on a busy machine), and a timeout
# error always carries the answer to a whole probe, never one cut short by the deadline; the
# wait can overrun ``startup_timeout`` by at most one probe (``_PROBE_TIMEOUT``).


async def _poll_until_ready(
    proc: trio.Process, launch: _Launch, startup_timeout: float, interval: float
) -> None:
    deadline = trio.current_time() + startup_timeout
    async with httpx.AsyncClient(timeout=_PROBE_TIMEOUT, limits=_probe_client_limits()) as client:
        while True:
            if (code := proc.poll()) is not None:
                raise launch.exited_error(code)
            try:
                response = await client.get(launch.spec.ready_url)
            except httpx.TransportError as exc:
                launch.last_answer = f"{type(exc).__name__}: {exc}"
            else:
                if launch.judge(response.status_code, response.content):
                    return
            if (remaining := deadline - trio.current_time()) <= 0:
                raise launch.timeout_error(startup_timeout)
            await trio.sleep(min(interval, remaining))


def _wait_ready_sync(
    proc: subprocess.Popen[bytes], launch: _Launch, timeout: float, interval: float
) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=_PROBE_TIMEOUT, limits=_probe_client_limits()) as client:
        while True:
            if (code := proc.poll()) is not None:
                raise launch.exited_error(code)
            try:
                response = client.get(launch.spec.ready_url)
            except httpx.TransportError as exc:
                launch.last_answer = f"{type(exc).__name__}: {exc}"
            else:
                if launch.judge(response.status_code, response.content):
                    return
            if (remaining := deadline - time.monotonic()) <= 0:
                raise launch.timeout_error(timeout)
            time.sleep(min(interval, remaining))


def _exited_by_itself(launch: _Launch, code: int, *, was_ready: bool) -> None:
    # A failed start already raised BackendStartError with the log; a backend that died while in
    # use has no other witness, so it is logged as an error with its last lines.
    if was_ready:
        log.error(
            "backend.exited_while_in_use",
            backend=launch.spec.name,
            returncode=code,
            log_path=str(launch.log_path),
            log_tail=read_log_tail(launch.log_path),
        )


async def _stop_async(
    proc: trio.Process, launch: _Launch, grace: float, *, was_ready: bool
) -> None:
    if (code := proc.poll()) is not None:
        _exited_by_itself(launch, code, was_ready=was_ready)
        return
    proc.terminate()
    with trio.move_on_after(grace):
        await proc.wait()
    if proc.poll() is None:
        log.warning("backend.kill", backend=launch.spec.name, pid=proc.pid, grace_s=grace)
        proc.kill()
        await proc.wait()  # SIGKILL cannot be caught or ignored: this wait ends.
    log.info("backend.stopped", backend=launch.spec.name, returncode=proc.returncode)


def _stop_sync(
    proc: subprocess.Popen[bytes], launch: _Launch, grace: float, *, was_ready: bool
) -> None:
    if (code := proc.poll()) is not None:
        _exited_by_itself(launch, code, was_ready=was_ready)
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        log.warning("backend.kill", backend=launch.spec.name, pid=proc.pid, grace_s=grace)
        proc.kill()
        proc.wait()  # SIGKILL cannot be caught or ignored: this wait ends.
    log.info("backend.stopped", backend=launch.spec.name, returncode=proc.returncode)
