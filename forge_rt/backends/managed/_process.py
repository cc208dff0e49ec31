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
import msgspec
import trio

from actors import quiet_logger
from forge_rt.backends.managed._cache import default_log_dir
from forge_rt.backends.managed._spec import BackendSpec, judge_probe
from forge_rt.errors import BackendExecutableNotFoundError, BackendStartError

__all__ = ["DEFAULT_RESTART", "PARENT_PID_ENV", "ManagedBackend", "RestartPolicy"]

log = quiet_logger(__name__)

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

    def open_log(self, *, append: bool = False) -> IO[bytes]:
        """The log file for the child's stdout and stderr: truncated at start, appended to by
        a restart (the lines before a crash are its only witness)."""
        return self.log_path.open("ab" if append else "wb")

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
        self.restarts = 0  # times a supervisor brought the server back (``restart=``)
        self.gave_up = False  # the supervisor's restart budget ran out; the server stays down
        self._changed = trio.Event()

    async def wait_restarts(self, count: int) -> None:
        """Wait until the supervisor has restarted the server ``count`` times in all (or gave
        up); the caller's deadline bounds the wait."""
        while self.restarts < count and not self.gave_up:
            await self._changed.wait()

    def _now_running(self, proc: trio.Process) -> None:
        self.pid, self._poll = proc.pid, proc.poll
        self.restarts += 1
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

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
        restart: RestartPolicy | None = None,
    ) -> AsyncIterator[ManagedBackend]:
        """Start ``spec``'s server, wait until it is ready, yield it, and stop it on exit.

        ``restart``: supervise it -- a server that exits while in use is started again (on the
        same port, its log appended to) under :class:`RestartPolicy`'s budget, so a crash costs
        the calls queued on it a reconnect (``SlotWorker``'s ``BackendRetry``), not the daemon.

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
        child = _Child(await _open_process(launch, append=False))
        was_ready = False
        try:
            await _poll_until_ready(child.proc, launch, startup_timeout, poll_interval)
            was_ready = True
            log.info("backend.ready", backend=spec.name, url=spec.base_url, pid=child.proc.pid)
            backend = cls(spec, pid=child.proc.pid, log_path=launch.log_path, poll=child.proc.poll)
            if restart is None:
                yield backend
            else:
                body_error: BaseException | None = None
                async with trio.open_nursery() as nursery:
                    supervisor = _Supervisor(backend, launch, child, restart)
                    nursery.start_soon(supervisor.run, startup_timeout, poll_interval, stop_timeout)
                    try:
                        yield backend
                    except BaseException as exc:  # noqa: BLE001 -- re-raised below, unwrapped
                        # Held so the caller sees its own exception, not a nursery's group.
                        body_error = exc
                    child.stopping = True
                    nursery.cancel_scope.cancel()
                if body_error is not None:
                    raise body_error
        finally:
            # Shielded: this runs while the caller may be cancelled, and an unshielded wait would
            # be cancelled at once, leaving the child holding its port, memory and CPU.
            with trio.CancelScope(shield=True):
                await _stop_async(child.proc, launch, stop_timeout, was_ready=was_ready)

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


class RestartPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a supervisor brings a managed server back after it exits while in use.

    At most ``max_restarts`` within ``window_s`` seconds (a server that keeps crashing is left
    down, logged as ``backend.restarts_exhausted``: its calls then fail typed, and the proxy's
    ``/ready`` says so); the first restart waits ``backoff_s``, each failed try in a row twice
    as long, up to ``max_backoff_s``.
    """

    max_restarts: int = 5
    window_s: float = 600.0
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0


class _Child:
    """The server process running now (a restart replaces it), and whether we are stopping it."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.stopping = False


class _Supervisor:
    """Waits on the child; when it exits by itself, starts it again under the policy."""

    def __init__(
        self, backend: ManagedBackend, launch: _Launch, child: _Child, policy: RestartPolicy
    ) -> None:
        self._backend = backend
        self._launch = launch
        self._child = child
        self._policy = policy
        self._restarted_at: list[float] = []

    async def run(self, startup_timeout: float, poll_interval: float, stop_timeout: float) -> None:
        launch, child, policy = self._launch, self._child, self._policy
        while True:
            code = await child.proc.wait()
            if child.stopping:
                return
            _exited_by_itself(launch, code, was_ready=True)
            backoff = policy.backoff_s
            while True:
                now = trio.current_time()
                self._restarted_at = [t for t in self._restarted_at if now - t < policy.window_s]
                if len(self._restarted_at) >= policy.max_restarts:
                    log.error(
                        "backend.restarts_exhausted",
                        backend=launch.spec.name,
                        restarts=len(self._restarted_at),
                        window_s=policy.window_s,
                        log_path=str(launch.log_path),
                    )
                    self._backend.gave_up = True
                    self._backend._notify()
                    return
                self._restarted_at.append(now)
                await trio.sleep(backoff)
                proc = await _open_process(launch, append=True)
                child.proc = proc  # stopped on exit from here on, ready or not
                try:
                    await _poll_until_ready(proc, launch, startup_timeout, poll_interval)
                except BackendStartError as exc:
                    log.error("backend.restart_failed", backend=launch.spec.name, error=str(exc))
                    await _stop_async(proc, launch, stop_timeout, was_ready=False)
                    backoff = min(backoff * 2, policy.max_backoff_s)
                    continue
                break
            self._backend._now_running(proc)
            log.info(
                "backend.restarted",
                backend=launch.spec.name,
                pid=proc.pid,
                restarts=self._backend.restarts,
            )


async def _open_process(launch: _Launch, *, append: bool) -> trio.Process:
    log_file = await trio.to_thread.run_sync(lambda: launch.open_log(append=append))
    with log_file:
        return await trio.lowlevel.open_process(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=launch.env,
        )


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


DEFAULT_RESTART = RestartPolicy()
