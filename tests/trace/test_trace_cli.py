"""``forge-rt replay`` and ``forge-rt trace show``: exit codes and what they print."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from click.testing import CliRunner, Result
from trace_support import NUDGED_AND_BLOCKED, record

from forge_rt.cli import main


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["--log-level", "error", *args], prog_name="forge-rt")


@pytest.fixture
async def recorded(tmp_path: Path) -> Path:
    with trio.fail_after(10):
        await record(tmp_path / "traces", NUDGED_AND_BLOCKED)
    return tmp_path / "traces"


async def test_replay_of_an_unchanged_run_exits_0_and_says_same(recorded: Path) -> None:
    """Unchanged guardrails: exit 0, the counts replayed, and "same"."""
    result = _invoke("replay", str(recorded))
    assert (result.exit_code, "same: every decision is the recorded one" in result.output) == (
        0,
        True,
    )
    assert "replayed 5 replies and 3 tool batches of 1 actor(s), 1 turn(s)" in result.output


async def test_replay_with_a_changed_option_exits_1_and_lists_the_difference(
    recorded: Path,
) -> None:
    """--set max_premature=0: exit 1, one difference, recorded and replayed decisions shown."""
    result = _invoke("replay", str(recorded / "shop1.jsonl"), "--set", "max_premature=0")
    assert result.exit_code == 1
    assert "1 decision(s) differ" in result.output
    assert "step_blocked" in result.output
    assert "StepEnforcementError" in result.output


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["--set", "max_retries"], "is not KEY=VALUE"),
        (["--set", "max_retries=one"], "the value must be JSON"),
        (["--set", "nudges=false"], "are not GuardrailOptions fields"),
        (["--set", "max_retries=-1"], "must be >= 0"),
    ],
    ids=["no-equals", "not-json", "unknown-field", "invalid-value"],
)
async def test_replay_with_a_bad_option_exits_2(
    recorded: Path, settings: list[str], message: str
) -> None:
    """A --set that is not a valid GuardrailOptions change is a usage error (exit 2)."""
    result = _invoke("replay", str(recorded), *settings)
    assert (result.exit_code, message in result.output) == (2, True)


def test_replay_of_a_file_that_is_no_trace_exits_2(tmp_path: Path) -> None:
    """A file that is not a trace: exit 2, with its line."""
    path = tmp_path / "notes.jsonl"
    path.write_text("hello\n")
    result = _invoke("replay", str(path))
    assert (result.exit_code, "notes.jsonl:1: not a trace event" in result.output) == (2, True)


async def test_trace_show_renders_turns_replies_verdicts_and_tools(recorded: Path) -> None:
    """The rendering names the turn and user text, each verdict, nudge, tool and slot event."""
    result = _invoke("trace", "show", str(recorded), "--full")
    assert result.exit_code == 0, result.output
    for expected in (
        "shop1",
        "turn 1 user: 'order tea'",
        "verdict retry_nudge (no_call)",
        "nudge: Your reply was text, not a tool call.",
        "verdict step_blocked (premature_terminal)",
        'tool lookup({"item":"tea"}) -> tea: in stock',
        "done by respond",
        "slot job",
        "turn end ok",
    ):
        assert expected in result.output


async def test_trace_show_can_leave_slot_events_out(recorded: Path) -> None:
    """--no-slots hides the slot's events and keeps the rest."""
    result = _invoke("trace", "show", str(recorded), "--no-slots")
    assert (result.exit_code, "slot job" in result.output, "turn 1" in result.output) == (
        0,
        False,
        True,
    )
