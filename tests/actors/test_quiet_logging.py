"""Library code logs nothing until the application configures logging: then it logs through
structlog (when structlog is configured) or the standard library (when a root handler is)."""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass

import pytest
import structlog
import trio
import trio.testing

from actors import Actor, ActorSystem, RestartPolicy, handles, quiet_logger
from forge_rt.core import ToolCall, Workflow
from forge_rt.runtime import Session
from forge_rt.testing import ScriptedClient, captured_logs


async def _one_turn() -> None:
    workflow = Workflow(name="chat", tools=[], system_prompt_template="Chat.", constrain="never")
    client = ScriptedClient([[ToolCall(tool="respond", args={"message": "hi"})]])
    async with Session.open(client) as session:
        await session.run(workflow, "hello")
    await trio.lowlevel.checkpoint()


async def test_an_unconfigured_application_sees_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    structlog.reset_defaults()
    root = logging.getLogger()
    handlers, root.handlers = root.handlers, []
    try:
        await _one_turn()
    finally:
        root.handlers = handlers
    out, err = capsys.readouterr()
    assert (out, err) == ("", "")


async def test_a_structlog_application_gets_every_event() -> None:
    with captured_logs() as logs:
        await _one_turn()
    events = {e["event"] for e in logs}
    assert {"workflow.turn", "actor terminated"} <= events


_ABOVE_DEBUG = {"info", "warning", "error", "critical"}


async def test_an_orderly_shutdown_logs_nothing_at_info() -> None:
    """Closing a session cancels its workflow actors and the slot's executors: no news to a user
    (`forge-rt demo` ended with nine such lines at info), so every event of it is debug."""
    workflow = Workflow(name="chat", tools=[], system_prompt_template="Chat.", constrain="never")
    client = ScriptedClient([[ToolCall(tool="respond", args={"message": "hi"})]])
    with ExitStack() as stack:
        async with Session.open(client) as session:
            alice = await session.start(workflow, name="alice")
            await alice.send("hello")
            logs = stack.enter_context(captured_logs())  # from here: the shutdown alone
        await trio.lowlevel.checkpoint()
    terminated = [e for e in logs if e["event"] == "actor terminated"]
    assert {e["actor"] for e in terminated} >= {"alice", "slot"}
    assert {(e["reason"], e["log_level"]) for e in terminated} == {("cancelled", "debug")}
    assert [e for e in logs if e["log_level"] in _ABOVE_DEBUG] == []


@dataclass(frozen=True)
class _Boom:
    pass


class _Fragile(Actor):
    @handles(_Boom)
    async def on_boom(self, msg: _Boom) -> None:
        raise RuntimeError("boom")


async def test_a_crash_stays_visible_at_info_and_above() -> None:
    """An actor that crashed and was not restarted is news: its end is logged above debug."""
    with captured_logs() as logs:
        async with ActorSystem.open() as system:
            ref = await system.spawn(_Fragile, name="fragile", restart=RestartPolicy.TEMPORARY)
            await ref.send(_Boom())
            await trio.testing.wait_all_tasks_blocked()
    [terminated] = [e for e in logs if e["event"] == "actor terminated"]
    assert terminated["actor"] == "fragile"
    assert terminated["reason"].startswith("crashed: RuntimeError('boom')")
    assert terminated["log_level"] == "info"
    assert any(e["event"] == "actor crashed" and e["log_level"] == "warning" for e in logs)


def test_a_stdlib_application_gets_events_at_its_level(caplog: pytest.LogCaptureFixture) -> None:
    structlog.reset_defaults()
    log = quiet_logger("forge_rt.example")
    with caplog.at_level(logging.INFO, logger="forge_rt.example"):
        log.debug("hidden")
        log.bind(actor="a").info("shown", n=1)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "shown actor='a' n=1")
    ]
