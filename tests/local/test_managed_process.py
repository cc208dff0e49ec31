"""The managed-backend launcher against a real child server: readiness, logs, errors, stopping."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing
from leak_support import cancel_at_every_step
from probe_server import QUIET_CHILD, alive_with, probes_in_thread, serve_probes

from forge_rt.backends.managed import (
    PARENT_PID_ENV,
    ManagedBackend,
    RestartPolicy,
    llama_server_spec,
    ollama_spec,
    vllm_spec,
)
from forge_rt.errors import BackendExecutableNotFoundError, BackendStartError


def _gone(pid: int) -> bool:
    """True once ``pid`` is no longer a running process (reaped, or a zombie)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def _llama(fake_backend_cmd, tmp_path: Path, mode: str, **env: str):
    return llama_server_spec(
        tmp_path / "model.gguf",
        executable=fake_backend_cmd,
        env={"FAKE_MODE": mode, "FAKE_RECORD": str(tmp_path / "record.json"), **env},
    )


async def test_start_waits_through_loading_then_stops_the_child(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """A server answering 503 while loading is waited for; leaving the context SIGTERMs it."""
    spec = _llama(fake_backend_cmd, tmp_path, "slow:3")
    with trio.fail_after(20):
        async with ManagedBackend.start(spec, log_path=tmp_path / "b.log") as backend:
            async with httpx.AsyncClient() as client:
                assert (await client.get(backend.url + "/health")).status_code == 200
            assert backend.returncode is None
            pid = backend.pid
    assert backend.returncode == 0
    assert _gone(pid)
    log = (tmp_path / "b.log").read_text()
    assert "fake backend listening" in log
    assert log.count('"GET /health HTTP/1.1" 503') == 3
    assert log.rstrip().endswith("fake backend stopped")


async def test_child_gets_the_spec_env_and_the_parent_pid(fake_backend_cmd, tmp_path: Path) -> None:
    """The child sees the spec's variables (OLLAMA_HOST for Ollama) and FORGE_RT_PARENT_PID."""
    spec = ollama_spec(
        "qwen2.5-coder:0.5b",
        executable=fake_backend_cmd,
        env={"FAKE_MODELS": "qwen2.5-coder:0.5b", "FAKE_RECORD": str(tmp_path / "record.json")},
    )
    with trio.fail_after(20):
        async with ManagedBackend.start(spec, log_path=tmp_path / "o.log"):
            record = json.loads((tmp_path / "record.json").read_text())
    assert record["env"]["OLLAMA_HOST"] == f"127.0.0.1:{spec.port}"
    assert record["env"][PARENT_PID_ENV] == str(os.getpid())
    assert record["argv"][1:] == ["serve"]


async def test_ollama_without_the_model_fails_with_the_pull_command(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """Ollama up but lacking the model fails at once, telling you to pull it, and is stopped."""
    spec = ollama_spec("qwen2.5-coder:0.5b", executable=fake_backend_cmd, env={"FAKE_MODELS": "x"})
    with trio.fail_after(20), pytest.raises(BackendStartError) as caught:
        async with ManagedBackend.start(spec, log_path=tmp_path / "o.log"):
            pytest.fail("must not become ready")
    assert "pull it first with `ollama pull qwen2.5-coder:0.5b`" in str(caught.value)
    assert caught.value.returncode is None
    assert (tmp_path / "o.log").read_text().rstrip().endswith("fake backend stopped")


async def test_vllm_is_ready_when_it_lists_the_served_name(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """vLLM counts as ready once /v1/models lists the served model name."""
    spec = vllm_spec(
        "/models/q",
        served_model_name="q",
        executable=fake_backend_cmd,
        env={"FAKE_MODE": "slow:2", "FAKE_MODELS": "q"},
    )
    with trio.fail_after(20):
        async with (
            ManagedBackend.start(spec, log_path=tmp_path / "v.log") as backend,
            httpx.AsyncClient() as client,
        ):
            models = (await client.get(backend.url + "/v1/models")).json()
    assert models["data"] == [{"id": "q"}]


async def test_early_exit_raises_with_exit_code_and_log_tail(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """A child that dies while starting raises BackendStartError carrying its code and last lines."""
    spec = _llama(fake_backend_cmd, tmp_path, "exit")
    with trio.fail_after(20), pytest.raises(BackendStartError) as caught:
        async with ManagedBackend.start(spec, log_path=tmp_path / "e.log"):
            pytest.fail("must not become ready")
    error = caught.value
    assert (error.returncode, error.log_path, error.backend) == (
        3,
        str(tmp_path / "e.log"),
        f"llama-server:{spec.port}",
    )
    assert error.log_tail.splitlines()[-1] == "fake backend: cannot load model"
    assert re.match(
        rf"^llama-server \(.* --port {spec.port} .*\) exited with code 3 before it was ready at "
        rf"http://127\.0\.0\.1:{spec.port}/health\.\nLast lines of {re.escape(str(tmp_path))}/e\.log:\n"
        r"fake backend starting in mode exit\nfake backend: cannot load model$",
        str(error),
    )


def _quiet(tmp_path: Path):
    """A llama-server spec whose program is the quiet stand-in; the test answers its probes."""
    return llama_server_spec(tmp_path / "model.gguf", executable=QUIET_CHILD)


async def test_not_ready_by_the_deadline_raises_and_stops_the_child(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A server that never gets ready fails after startup_timeout with its last answer, and is stopped.

    The clock stands still until the test moves it, once the first "loading" answer has gone
    out: however slowly the child starts, the deadline passes after the server has answered.
    """
    spec = _quiet(tmp_path)

    async def past_the_deadline() -> None:
        await answered.receive()
        mock_clock.jump(0.5)

    async with (
        serve_probes(spec.port, lambda n: 503) as answered,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(past_the_deadline)
        with pytest.raises(BackendStartError) as caught:
            async with ManagedBackend.start(spec, log_path=tmp_path / "n.log", startup_timeout=0.5):
                pytest.fail("must not become ready")
    assert re.search(
        rf"was not ready at http://127\.0\.0\.1:{spec.port}/health within 0\.5 s \(last answer: "
        rf"http://127\.0\.0\.1:{spec.port}/health answered HTTP 503\); raise startup_timeout",
        str(caught.value),
    )
    assert alive_with(str(tmp_path)) == []


async def test_start_cancelled_at_any_step_stops_the_child_and_leaks_nothing(
    tmp_path: Path,
) -> None:
    """Cancelled while launching, probing or serving, the launcher stops its child and leaves
    no connection or stream behind."""
    spec = _quiet(tmp_path)
    # Loading, loading, ready: each replay probes three times on a fresh count.
    statuses: list[int] = []

    async def launch_and_use() -> None:
        statuses.clear()
        async with ManagedBackend.start(
            spec, log_path=tmp_path / "c.log", poll_interval=0.001
        ) as backend:
            assert backend.returncode is None
        assert alive_with(str(tmp_path)) == []

    def answer(n: int) -> int:
        statuses.append(503 if len(statuses) < 2 else 200)
        return statuses[-1]

    async with serve_probes(spec.port, answer):
        replays = await cancel_at_every_step(launch_and_use)
    assert replays > 10
    assert alive_with(str(tmp_path)) == []


async def test_a_child_ignoring_sigterm_is_killed_after_the_grace(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """A server that ignores SIGTERM is SIGKILLed once stop_timeout has passed."""
    spec = _llama(fake_backend_cmd, tmp_path, "ignore-term")
    with trio.fail_after(20):
        async with ManagedBackend.start(
            spec, log_path=tmp_path / "k.log", stop_timeout=0.5
        ) as backend:
            pid = backend.pid
    assert backend.returncode == -signal.SIGKILL
    assert _gone(pid)


async def test_cancellation_inside_the_context_still_stops_the_child(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """Cancelling the caller while the backend is in use stops the child before returning."""
    spec = _llama(fake_backend_cmd, tmp_path, "ok")
    with trio.fail_after(20):
        with trio.CancelScope() as scope:
            async with ManagedBackend.start(spec, log_path=tmp_path / "c.log") as backend:
                pid = backend.pid
                scope.cancel()
                await trio.sleep_forever()
    assert scope.cancelled_caught
    assert backend.returncode == 0
    assert _gone(pid)


async def test_missing_program_names_it_and_how_to_install(tmp_path: Path) -> None:
    """A program not on PATH raises BackendExecutableNotFoundError with the install hint."""
    spec = vllm_spec("m", executable="forge-rt-no-such-vllm", port=8123)
    with pytest.raises(BackendExecutableNotFoundError) as caught:
        async with ManagedBackend.start(spec, log_path=tmp_path / "x.log"):
            pytest.fail("must not start")
    assert (caught.value.executable, caught.value.backend) == ("forge-rt-no-such-vllm", "vllm:8123")
    assert str(caught.value) == (
        "cannot start vllm: the program 'forge-rt-no-such-vllm' is not on PATH; "
        "`pip install vllm` (needs a supported GPU), or pass executable=..."
    )
    assert not (tmp_path / "x.log").exists()


def test_blocking_start_serves_and_stops(fake_backend_cmd, tmp_path: Path) -> None:
    """The synchronous launcher waits for readiness and stops the child the same way."""
    spec = _llama(fake_backend_cmd, tmp_path, "slow:2")
    with ManagedBackend.start_blocking(spec, log_path=tmp_path / "s.log") as backend:
        assert httpx.get(backend.url + "/health").json() == {"status": "ok"}
        pid = backend.pid
    assert backend.returncode == 0
    assert _gone(pid)
    assert backend.log_tail(1) == "fake backend stopped"


def test_blocking_start_reports_early_exit(fake_backend_cmd, tmp_path: Path) -> None:
    """The synchronous launcher raises the same typed error with the log tail."""
    spec = _llama(fake_backend_cmd, tmp_path, "exit")
    with (
        pytest.raises(BackendStartError, match=r"exited with code 3 before it was ready") as caught,
        ManagedBackend.start_blocking(spec, log_path=tmp_path / "s.log"),
    ):
        pytest.fail("must not become ready")
    assert caught.value.log_tail.endswith("fake backend: cannot load model")


def test_blocking_start_times_out_and_stops_the_child(tmp_path: Path) -> None:
    """The synchronous launcher honours startup_timeout and stops the child it gave up on.

    The test answers the probes itself, so the first one is answered however slowly the child
    starts; the launcher always probes before it looks at the deadline.
    """
    spec = _quiet(tmp_path)
    with (
        probes_in_thread(spec.port, lambda n: 503) as answered,
        pytest.raises(BackendStartError, match=r"within 0\.5 s \(last answer: .*HTTP 503\)"),
        ManagedBackend.start_blocking(spec, log_path=tmp_path / "t.log", startup_timeout=0.5),
    ):
        pytest.fail("must not become ready")
    assert answered[0] == 503
    assert alive_with(str(tmp_path)) == []


def test_default_log_goes_to_the_cache_logs_dir(
    fake_backend_cmd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a log path the child's output lands in <cache root>/logs/<kind>-<port>.log."""
    monkeypatch.setenv("FORGE_RT_CACHE", str(tmp_path / "cache"))
    spec = _llama(fake_backend_cmd, tmp_path, "ok")
    with ManagedBackend.start_blocking(spec) as backend:
        assert backend.log_path == tmp_path / "cache" / "logs" / f"llama-server-{spec.port}.log"
    assert "fake backend listening" in backend.log_path.read_text()


async def test_a_supervised_server_that_dies_is_started_again(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """``restart=``: a server killed while in use comes back on the same URL, its log appended
    to; the restart count and the new pid say so."""
    spec = _llama(fake_backend_cmd, tmp_path, "ok")
    policy = RestartPolicy(backoff_s=0.05)
    with trio.fail_after(30):
        async with ManagedBackend.start(
            spec, log_path=tmp_path / "b.log", restart=policy
        ) as backend:
            first = backend.pid
            os.kill(first, signal.SIGKILL)
            await backend.wait_restarts(1)
            async with httpx.AsyncClient() as client:
                assert (await client.get(backend.url + "/health")).status_code == 200
            second = backend.pid
            assert (backend.restarts, backend.gave_up) == (1, False)
    assert second != first
    assert _gone(second)
    assert (tmp_path / "b.log").read_text().count("fake backend listening") == 2


async def test_a_server_that_keeps_dying_is_left_down_after_the_budget(
    fake_backend_cmd, tmp_path: Path
) -> None:
    """More exits than ``max_restarts`` within the window: the supervisor gives up, loudly."""
    spec = _llama(fake_backend_cmd, tmp_path, "ok")
    policy = RestartPolicy(max_restarts=1, backoff_s=0.05)
    with trio.fail_after(30):
        async with ManagedBackend.start(spec, restart=policy) as backend:
            os.kill(backend.pid, signal.SIGKILL)
            await backend.wait_restarts(1)
            os.kill(backend.pid, signal.SIGKILL)
            await backend.wait_restarts(2)  # returns once it gave up
            assert (backend.restarts, backend.gave_up) == (1, True)
            assert backend.returncode == -signal.SIGKILL


async def test_an_error_in_the_supervised_block_propagates_as_itself(
    fake_backend_cmd, tmp_path: Path
) -> None:
    spec = _llama(fake_backend_cmd, tmp_path, "ok")
    pids: list[int] = []

    async def fail_inside() -> None:
        async with ManagedBackend.start(spec, restart=RestartPolicy()) as backend:
            pids.append(backend.pid)
            raise KeyError("mine")

    with trio.fail_after(30), pytest.raises(KeyError):
        await fail_inside()
    assert _gone(pids[0])
