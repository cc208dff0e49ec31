"""What a Session writes to its trace: every turn's requests, replies, verdicts, tools, slot
events, in order -- and replay of it decides every reply as the run did."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
from trace_support import NUDGED_AND_BLOCKED, TOOL_TROUBLE, call, record, shop

from forge_rt.core import InferenceRequest, Role
from forge_rt.errors import ToolExecutionError, WorkflowCancelledError
from forge_rt.runtime import Session
from forge_rt.testing import Reply, ScriptedClient
from forge_rt.trace import (
    JsonlTraceSink,
    Recorded,
    ReplyReceived,
    RequestSent,
    SlotEvent,
    ToolRan,
    TraceEvent,
    TraceHeader,
    TurnEnded,
    TurnStarted,
    VerdictMade,
    read_trace,
    replay,
)


def _story(events: list[TraceEvent]) -> list[str]:
    """The events as short words, slot events left out: what the loop did, in order."""
    out = []
    for event in events:
        match event:
            case VerdictMade():
                d = event.decision
                out.append(f"verdict:{d.kind}" + (f":{d.reason}" if d.reason else ""))
            case ToolRan():
                out.append(f"tool:{event.call.tool}:{event.error_kind or 'ok'}")
            case Recorded():
                d = event.decision
                out.append("record:done" if d.done else f"record:{d.fatal or 'go on'}")
            case SlotEvent():
                pass
            case _:
                out.append(str(type(event).__struct_config__.tag))
    return out


async def test_a_nudged_and_blocked_turn_is_traced_in_order(tmp_path: Path) -> None:
    """Text, a lookup, a premature answer, the order, the answer: each one's request, reply and
    verdict in order, tools and records after the accepted ones, one file named by the actor."""
    with trio.fail_after(10):
        result = await record(tmp_path, NUDGED_AND_BLOCKED)
    assert result.output == "ordered tea"
    assert [p.name for p in await trio.Path(tmp_path).iterdir()] == ["shop1.jsonl"]
    events = read_trace(tmp_path)
    attempt = ["request", "reply"]
    assert [
        "header",
        "turn",
        *attempt,
        "verdict:retry_nudge:no_call",
        *attempt,
        "verdict:execute",
        "tool:lookup:ok",
        "record:go on",
        *attempt,
        "verdict:step_blocked:premature_terminal",
        *attempt,
        "verdict:execute",
        "tool:order:ok",
        "record:go on",
        *attempt,
        "verdict:execute",
        "tool:respond:ok",
        "record:done",
        "turn_end",
    ] == _story(events)
    header = events[0]
    assert isinstance(header, TraceHeader)
    assert (
        [t.name for t in header.tools],
        header.required_steps,
        header.respond_tool,
    ) == (["lookup", "order"], ("lookup", "order"), True)
    replies = [e for e in events if isinstance(e, ReplyReceived)]
    assert replies[0].response.raw_text == "I think I will look it up"
    requests = [e for e in events if isinstance(e, RequestSent)]
    assert [r.iteration for r in requests] == [1, 2, 3, 4, 5]
    assert len({r.messages_hash for r in requests}) == 5  # each prompt is a longer history
    end = events[-1]
    assert isinstance(end, TurnEnded)
    assert (end.ok, end.inferences, end.tool_calls) == (True, 5, 3)
    rules = [e.decision.rule for e in events if isinstance(e, VerdictMade)]
    assert rules == ["retry_nudges", None, "steps", None, None]


async def test_each_inference_has_its_slot_events(tmp_path: Path) -> None:
    """Every request is queued, started and finished on the slot, with its token counts."""
    with trio.fail_after(10):
        await record(tmp_path, NUDGED_AND_BLOCKED)
    slots = [e for e in read_trace(tmp_path) if isinstance(e, SlotEvent)]
    assert [e.kind for e in slots] == ["queued", "started", "finished"] * 5
    finished = [e for e in slots if e.kind == "finished"]
    assert all(e.prompt_tokens and e.completion_tokens for e in finished)


async def test_replaying_an_unchanged_run_finds_every_decision_the_same(tmp_path: Path) -> None:
    """Replay with the recorded options: every reply and batch decided as recorded."""
    with trio.fail_after(10):
        await record(tmp_path / "a", NUDGED_AND_BLOCKED)
        await record(tmp_path / "b", TOOL_TROUBLE)
    first, second = replay(tmp_path / "a"), replay(tmp_path / "b")
    assert (first.same, first.replies, first.records) == (True, 5, 3)
    assert (second.same, second.replies, second.records) == (True, 6, 5)


async def test_replay_compares_the_rule_of_a_verdict_where_the_trace_names_one(
    tmp_path: Path,
) -> None:
    """A verdict recorded with another rule is a difference; one recorded before verdicts
    named their rule is compared without it."""
    with trio.fail_after(10):
        await record(tmp_path, NUDGED_AND_BLOCKED)
    (path,) = await trio.Path(tmp_path).iterdir()
    written = await path.read_text()
    assert written.count('"rule":"steps"') == 1
    await path.write_text(written.replace('"rule":"steps"', '"rule":"placeholders"'))
    assert not replay(tmp_path).same
    unnamed = re.sub(r',"rule":"\w+"', "", written)
    assert '"rule"' not in unnamed
    await path.write_text(unnamed)
    assert replay(tmp_path).same


async def test_tool_failures_are_traced_with_their_kind(tmp_path: Path) -> None:
    """An unknown tool is a tool-errors verdict; a ToolResolutionError and a failure are
    recorded with their kind, type and message."""
    with trio.fail_after(10):
        await record(tmp_path, TOOL_TROUBLE)
    events = read_trace(tmp_path)
    assert "verdict:tool_errors:invalid_call" in _story(events)
    lookups = [e for e in events if isinstance(e, ToolRan) and e.call.tool == "lookup"]
    assert [(e.error_kind, e.error_type) for e in lookups] == [
        ("resolution", "ToolResolutionError"),
        ("error", "RuntimeError"),
        (None, None),
    ]
    assert lookups[1].error == "stock service down"


async def test_replay_with_a_stricter_option_reports_where_it_decides_otherwise(
    tmp_path: Path,
) -> None:
    """No premature terminal call allowed: the refused answer becomes fatal, at turn 1,
    iteration 3, and nothing else is reported as changed before it."""
    with trio.fail_after(10):
        await record(tmp_path, NUDGED_AND_BLOCKED)
    report = replay(tmp_path, overrides={"max_premature": 0})
    assert not report.same
    first = report.differences[0]
    assert (first.turn, first.iteration, first.what) == (1, 3, "verdict")
    assert (
        first.recorded.kind,  # type: ignore[union-attr]
        first.replayed.kind,  # type: ignore[union-attr]
        first.replayed.error,  # type: ignore[union-attr]
    ) == ("step_blocked", "fatal", "StepEnforcementError")


async def test_replay_without_tool_error_budget_reports_the_failed_batch(tmp_path: Path) -> None:
    """With no tool-error budget the failing lookup's batch ends the run: a record difference."""
    with trio.fail_after(10):
        await record(tmp_path, TOOL_TROUBLE)
    report = replay(tmp_path, overrides={"max_tool_errors": 0})
    records = [d for d in report.differences if d.what == "record"]
    assert [ToolExecutionError.__name__] == [d.replayed.fatal for d in records]  # type: ignore[union-attr]
    assert [d.recorded.fatal for d in records] == [None]  # type: ignore[union-attr]


async def test_a_preempted_call_is_traced_as_preempted_then_continued(
    tmp_path: Path, autojump_clock: object
) -> None:
    """A background workflow's streamed call is cut by an urgent one: its trace shows it
    preempted and continued from its partial text; both traces replay unchanged."""
    slow_call = '{"name": "lookup", "arguments": {"item": "tea"}} '

    def reply(request: InferenceRequest) -> Reply:
        background = request.messages[1].content == "background"
        last = request.messages[-1]
        if background and last.role is Role.USER:
            return slow_call
        if background:
            return call("respond", message="done in the background")
        return call("respond", message="urgent answer")

    client = ScriptedClient(reply, token_s=1.0)
    async with Session.open(client, trace=tmp_path) as session, trio.open_nursery() as nursery:
        wf = shop(steps=())

        async def background() -> None:
            await session.run(wf, "background", name="low", priority=10)

        async def urgent() -> None:
            await trio.sleep(2.5)
            await session.run(wf, "urgent", name="high", priority=0)

        nursery.start_soon(background)
        nursery.start_soon(urgent)
    low = [e.kind for e in read_trace(tmp_path / "low.jsonl") if isinstance(e, SlotEvent)]
    high = [e.kind for e in read_trace(tmp_path / "high.jsonl") if isinstance(e, SlotEvent)]
    assert low[:5] == ["queued", "started", "preempted", "continued", "finished"]
    assert high == ["queued", "started", "finished"]
    report = replay(tmp_path)
    assert (report.same, sorted(report.actors)) == (True, ["high", "low"])


async def test_a_cancelled_turn_and_its_resume_replay_unchanged(tmp_path: Path) -> None:
    """A turn cancelled mid-tool ends typed in the trace; the resumed turn has no user text,
    and the whole trace replays with every decision the same."""
    entered, release = trio.Event(), trio.Event()

    async def slow_order(item: str) -> str:
        entered.set()
        await release.wait()
        return f"ordered {item}"

    wf = shop(order_tool=slow_order)
    replies = [call("lookup", item="tea"), call("order", item="tea"), call("respond", message="ok")]
    sink = JsonlTraceSink(tmp_path / "run.jsonl")
    with trio.fail_after(10):
        async with Session.open(ScriptedClient(replies), trace=sink) as session:
            handle = await session.start(wf, name="shop1")
            async with trio.open_nursery() as nursery:

                async def cancel_inside() -> None:
                    await entered.wait()
                    handle.cancel()

                nursery.start_soon(cancel_inside)
                with pytest.raises(WorkflowCancelledError):
                    await handle.send("order tea")
            release.set()
            result = await handle.resume()
    sink.close()
    assert result.output == "ok"
    events = read_trace(tmp_path / "run.jsonl")
    turns = [e for e in events if isinstance(e, TurnStarted | TurnEnded)]
    assert [
        ("turn", e.user_text) if isinstance(e, TurnStarted) else ("turn_end", e.error_type)
        for e in turns
    ] == [
        ("turn", "order tea"),
        ("turn_end", "WorkflowCancelledError"),
        ("turn", None),
        ("turn_end", None),
    ]
    assert replay(tmp_path / "run.jsonl").same
