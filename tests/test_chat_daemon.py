"""examples/chat_daemon.py, killed with SIGKILL mid-turn and started again, loses nothing.

The daemon runs as a user runs it (a subprocess on the simulated backend, slow enough that a
turn takes a while); the test kills it as soon as the turn's first tool call is committed,
starts it again on the same store, and checks that it finishes the turn by itself, that the
reminder was set exactly once, that the conversation then goes on with nothing missing, and that
the run trace both lives wrote replays with no differences. On SQLite, and on a real PostgreSQL
server.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.trace import replay

DAEMON = Path(__file__).resolve().parents[1] / "examples" / "chat_daemon.py"
LIMIT_S = 60  # each wait for an event; a healthy run takes well under a second per step


class Daemon:
    """The daemon as a subprocess: JSON commands in, JSON events out."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""
        self._unread: list[dict[str, Any]] = []  # read while waiting for another session's

    async def send(self, **command: Any) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(json.dumps(command).encode() + b"\n")

    async def event(self, wanted: str, session: str | None = None) -> dict[str, Any]:
        """The next event named ``wanted`` (earlier ones are dropped); with ``session``, the
        next of that session's (other sessions' events are kept for their own waits)."""
        assert self.process.stdout is not None
        for i, kept in enumerate(self._unread):
            if kept["session"] == session and kept["event"] == wanted:
                return self._unread.pop(i)
        with trio.fail_after(LIMIT_S):
            while True:
                while b"\n" not in self._buffer:
                    chunk = await self.process.stdout.receive_some()
                    assert chunk, f"the daemon exited waiting for {wanted!r}"
                    self._buffer += chunk
                line, self._buffer = self._buffer.split(b"\n", 1)
                event: dict[str, Any] = json.loads(line)
                assert event["event"] != "error" or wanted == "error", event
                if session is not None and event.get("session") not in (session, None):
                    self._unread.append(event)
                elif event["event"] == wanted:
                    return event


@asynccontextmanager
async def daemon(
    backend: str, store: str, traces: Path | None, *, owner: str = "replica-1", lease_s: float = 30
) -> AsyncIterator[Daemon]:
    """The daemon on ``store`` as ``owner``: a restarted daemon is the same replica again."""
    async with trio.open_nursery() as nursery:
        command = [sys.executable, str(DAEMON), "--backend", backend, "--store", store]
        command += ["--owner", owner, "--lease", str(lease_s)]
        command += [] if traces is None else ["--traces", str(traces)]
        process = await nursery.start(
            partial(
                trio.run_process,
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                check=False,
            )
        )
        try:
            yield Daemon(process)
        finally:
            if process.returncode is None:
                process.kill()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "chat.db")
    url: str = request.getfixturevalue("postgres_url")
    return url


async def test_a_daemon_killed_mid_turn_finishes_it_after_a_restart(
    store: str, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    # ~40 tokens a reply at 100 tok/s: each inference takes about 0.4 s, so the kill lands
    # inside the turn, between its first committed call and its answer.
    config = SimConfig(prefill_tps=4000, decode_tps=100, seed=7)
    async with SimBackend.serve(config) as sim:
        session = f"alice-{trio.current_time():.0f}-{id(store)}"  # fresh on a shared server
        async with daemon(sim.url, store, traces) as first:
            await first.event("ready")
            await first.send(op="say", session=session, text="Remind me to water the plants.")
            accepted = await first.event("accepted")
            assert accepted["text"] == "Remind me to water the plants."
            call = await first.event("message")
            assert [c["tool"] for c in call["tool_calls"]] == ["set_reminder"]
            first.process.send_signal(signal.SIGKILL)
            assert await first.process.wait() == -signal.SIGKILL

        async with daemon(sim.url, store, traces) as second:
            ready = await second.event("ready")
            assert {"name": session, "status": "in_turn"} in ready["sessions"]
            assert (await second.event("resumed"))["session"] == session
            asked = await second.event("approval")  # the turn goes on to the heating switch
            assert asked["tool"] == "set_heating"
            await second.send(op="approve", session=session, call_id=asked["call_id"], yes=True)
            reply = await second.event("reply")
            assert reply["session"] == session
            await second.send(op="say", session=session, text="Thanks! Anything else?")
            assert (await second.event("accepted"))["text"] == "Thanks! Anything else?"
            await second.event("reply")
            await second.send(op="history", session=session)
            history = (await second.event("history"))["messages"]
            await second.send(op="quit")
            assert await second.process.wait() == 0

    users = [m["content"] for m in history if m["role"] == "user"]
    assert users == ["Remind me to water the plants.", "Thanks! Anything else?"]
    calls = [c["tool"] for m in history for c in m["tool_calls"]]
    assert calls.count("set_reminder") == 1, history  # set once, not again after the restart
    assert calls.count("set_heating") == 1, history
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert len(results) == len(calls)  # every call answered
    # Both lives wrote the session's trace; today's guardrails decide as the recorded ones did.
    report = replay(traces)
    assert report.replies >= 3
    assert report.differences == []


async def test_an_approval_asked_before_a_kill_is_asked_again_after_the_restart(
    store: str, tmp_path: Path
) -> None:
    """Killed while the heating switch waits for the user's yes: the restarted daemon asks for
    the same call again, and only the answer given then switches it."""
    config = SimConfig(prefill_tps=4000, decode_tps=400, seed=7)
    async with SimBackend.serve(config) as sim:
        session = f"bob-{trio.current_time():.0f}-{id(store)}"
        async with daemon(sim.url, store, tmp_path / "traces") as first:
            await first.event("ready")
            await first.send(op="say", session=session, text="Turn the heating off.")
            asked = await first.event("approval")
            assert asked["tool"] == "set_heating"
            first.process.send_signal(signal.SIGKILL)
            await first.process.wait()

        async with daemon(sim.url, store, tmp_path / "traces") as second:
            again = await second.event("approval")  # asked again, before anything else
            assert (again["call_id"], again["tool"]) == (asked["call_id"], "set_heating")
            await second.send(
                op="approve", session=session, call_id=again["call_id"], yes=False, reason="not now"
            )
            reply = await second.event("reply")
            await second.send(op="history", session=session)
            history = (await second.event("history"))["messages"]
            await second.send(op="quit")
            assert await second.process.wait() == 0
    assert reply["session"] == session
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert any("declined" in r.lower() and "not now" in r for r in results), results
    calls = [c["tool"] for m in history for c in m["tool_calls"]]
    assert calls.count("set_heating") == 1, history


async def test_two_daemons_on_one_postgres_one_killed_mid_turn_the_other_finishes_it(
    postgres_url: str,
) -> None:
    """Two replicas share one PostgreSQL store, each running its own users' sessions. While
    the first runs a turn, the second is refused that session (the first holds its lease); the
    first is killed mid-turn; once its lease lapses the second takes the turn over and finishes
    it, the reminder set once, while it carries on with its own user's turn."""
    config = SimConfig(prefill_tps=4000, decode_tps=100, seed=7)
    async with SimBackend.serve(config) as sim:
        tag = f"{trio.current_time():.0f}-{id(config)}"
        alice, carol = f"alice-{tag}", f"carol-{tag}"
        lease_s = 2.0  # the second daemon looks for orphaned turns every second
        async with (
            daemon(sim.url, postgres_url, None, owner=f"one-{tag}", lease_s=lease_s) as one,
            daemon(sim.url, postgres_url, None, owner=f"two-{tag}", lease_s=lease_s) as two,
        ):
            await one.event("ready")
            await two.event("ready")
            await one.send(op="say", session=alice, text="Remind me to water the plants.")
            await one.event("accepted", alice)
            call = await one.event("message", alice)
            assert [c["tool"] for c in call["tool_calls"]] == ["set_reminder"]

            await two.send(op="say", session=alice, text="Are you there?")
            refused = await two.event("error", alice)
            assert refused["error"] == "SessionLeasedError"
            assert f"one-{tag}" in refused["message"]

            one.process.send_signal(signal.SIGKILL)
            assert await one.process.wait() == -signal.SIGKILL
            await two.send(op="say", session=carol, text="Remind me to call the plumber.")

            await two.event("resumed", alice)
            asked = await two.event("approval", alice)  # the turn goes on to the heating switch
            assert asked["tool"] == "set_heating"
            await two.send(op="approve", session=alice, call_id=asked["call_id"], yes=True)
            await two.event("reply", alice)
            own = await two.event("approval", carol)  # its own user's turn went on meanwhile
            await two.send(op="approve", session=carol, call_id=own["call_id"], yes=True)
            await two.event("reply", carol)
            await two.send(op="history", session=alice)
            history = (await two.event("history", alice))["messages"]
            await two.send(op="quit")
            assert await two.process.wait() == 0

    users = [m["content"] for m in history if m["role"] == "user"]
    assert users == ["Remind me to water the plants."]  # the refused message was not accepted
    calls = [c["tool"] for m in history for c in m["tool_calls"]]
    assert calls.count("set_reminder") == 1, history  # set by the first daemon, not again
    assert calls.count("set_heating") == 1, history
    assert len([m for m in history if m["role"] == "tool"]) == len(calls)
