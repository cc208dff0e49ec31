"""Library code logs nothing until the application configures logging: then it logs through
structlog (when structlog is configured) or the standard library (when a root handler is)."""

from __future__ import annotations

import logging

import pytest
import structlog
import trio

from actors import quiet_logger
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


def test_a_stdlib_application_gets_events_at_its_level(caplog: pytest.LogCaptureFixture) -> None:
    structlog.reset_defaults()
    log = quiet_logger("forge_rt.example")
    with caplog.at_level(logging.INFO, logger="forge_rt.example"):
        log.debug("hidden")
        log.bind(actor="a").info("shown", n=1)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "shown actor='a' n=1")
    ]
