"""Keep what is right: a reply's valid part runs, only the calls that may not run yet are refused."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from forge_rt.core import Message, MessageType, Prerequisite, Role, ToolCall, ToolSpec
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    StepBlocked,
    ToolErrors,
    ToolResult,
    respond_spec,
)


class Query(BaseModel):
    query: str


class Findings(BaseModel):
    findings: str


SEARCH = ToolSpec(name="search", parameters=Query)
ANALYZE = ToolSpec(name="analyze", parameters=Query)
REPORT = ToolSpec(name="report", parameters=Findings)


def _call(tool: str, call_id: str, **args: object) -> ToolCall:
    return ToolCall(tool=tool, args=dict(args), call_id=call_id)


def _guard() -> Guardrails:
    return Guardrails(
        [SEARCH, ANALYZE, REPORT],
        required_steps=["search", "analyze"],
        terminal_tools=["report"],
        options=GuardrailOptions(rescue=False),
    )


def _unanswered(history: Sequence[Message]) -> list[str]:
    """Call ids with no tool message before the next assistant turn (a strict template's rule)."""
    missing: list[str] = []
    open_ids: dict[str, None] = {}
    for message in history:
        if message.role is Role.ASSISTANT:
            missing.extend(open_ids)
            open_ids = dict.fromkeys(c.call_id for c in message.tool_calls or ())
        elif message.role is Role.TOOL:
            assert message.tool_call_id in open_ids, "a tool message answers no open call"
            del open_ids[message.tool_call_id]
    return [*missing, *open_ids]


def test_pending_step_beside_a_premature_terminal_runs() -> None:
    """The step of a [step, premature terminal] reply runs; only the terminal is refused."""
    action = _guard().check([_call("search", "a", query="q"), _call("report", "b", findings="x")])
    assert isinstance(action, Execute)
    assert [c.call_id for c in action.calls] == ["a"]
    [refusal] = action.refused
    assert (refusal.call.call_id, refusal.reason, refusal.nudge.call_id) == (
        "b",
        "premature_terminal",
        "b",
    )


def test_refused_calls_render_as_their_own_answered_turn() -> None:
    """Every tool call in the history gets exactly one tool message, before and after the
    transients are dropped; the refused part is transient, the running part kept."""
    guard = _guard()
    action = guard.check([_call("search", "a", query="q"), _call("report", "b", findings="x")])
    assert isinstance(action, Execute)
    history = action.messages()
    history += guard.record([ToolResult(call=action.calls[0], output="3 hits")]).messages
    shape = [(m.role, m.type, m.transient) for m in history]
    assert shape == [
        (Role.ASSISTANT, MessageType.TOOL_CALL, True),
        (Role.TOOL, MessageType.STEP_NUDGE, True),
        (Role.ASSISTANT, MessageType.TOOL_CALL, False),
        (Role.TOOL, MessageType.TOOL_RESULT, False),
    ]
    assert _unanswered(history) == []
    assert _unanswered([m for m in history if not m.transient]) == []


def test_a_reply_of_only_premature_terminals_is_still_blocked() -> None:
    """With nothing left to run, the reply is StepBlocked, as before."""
    blocked = _guard().check([_call("report", "b", findings="x")])
    assert isinstance(blocked, StepBlocked)
    assert blocked.reason == "premature_terminal"


def test_a_prerequisite_in_the_same_reply_runs_and_the_dependent_call_waits() -> None:
    """[prerequisite, dependent]: the prerequisite runs, the dependent call is refused."""
    guard = Guardrails(
        [SEARCH, ANALYZE, REPORT],
        terminal_tools=["report"],
        prerequisites={"analyze": [Prerequisite(tool="search")]},
        options=GuardrailOptions(rescue=False),
    )
    action = guard.check([_call("search", "a", query="q"), _call("analyze", "b", query="q")])
    assert isinstance(action, Execute)
    assert ([c.tool for c in action.calls], [r.reason for r in action.refused]) == (
        ["search"],
        ["prerequisite"],
    )
    assert action.refused[0].nudge.kind is MessageType.PREREQUISITE_NUDGE


def test_an_invalid_call_still_holds_its_valid_siblings_back() -> None:
    """Invalid calls keep the hold-back rule: a re-sent batch would run the siblings twice."""
    action = _guard().check([_call("search", "a", query="q"), _call("serch", "b", query="q")])
    assert isinstance(action, ToolErrors)
    assert [n.call_id for n in action.held_back] == ["a"]


def test_the_refusal_counts_against_the_premature_budget_until_a_step_succeeds() -> None:
    """A refused terminal is counted; the step that ran beside it breaks the row."""
    guard = _guard()
    action = guard.check([_call("search", "a", query="q"), _call("report", "b", findings="x")])
    assert isinstance(action, Execute)
    assert guard.budgets.premature == 1
    guard.record([ToolResult(call=action.calls[0], output="hits")])
    assert guard.budgets.premature == 0


def test_a_loop_block_keeps_the_refusal_of_the_refused_call() -> None:
    """When the running part loops, the block covers the reply and the refused call keeps its
    own nudge rather than a [NotExecuted] note."""
    guard = _guard()
    for index in range(3):
        action = guard.check(
            [_call("search", f"a{index}", query="q"), _call("report", f"b{index}", findings="x")]
        )
    assert isinstance(action, StepBlocked)
    assert action.reason == "loop"
    by_id = {n.call_id: n.content for n in [*action.errors, *action.held_back]}
    assert by_id["a2"].startswith("[LoopError]")
    assert by_id["b2"].startswith("[StepEnforcementError] `report` cannot run yet")


def test_a_run_finishes_after_a_step_and_a_premature_terminal_arrive_together() -> None:
    """Scripted: [search + report] runs search; [analyze] runs; [report] finishes the task."""
    guard = _guard()
    history: list[Message] = []
    done = False
    script = [
        [_call("search", "a", query="q"), _call("report", "b", findings="early")],
        [_call("analyze", "c", query="q")],
        [_call("report", "d", findings="final")],
    ]
    for reply in script:
        action = guard.check(reply)
        assert isinstance(action, Execute)
        history += action.messages()
        outcome = guard.record([ToolResult(call=c, output=f"ok {c.tool}") for c in action.calls])
        history += outcome.messages
        done = outcome.done
    assert done
    assert guard.tracker.completed_steps == ("search", "analyze", "report")
    assert _unanswered(history) == []


def test_respond_refused_beside_the_step_says_the_step_runs() -> None:
    """The refusal names the calls that run now and what is left after them."""
    guard = Guardrails(
        [SEARCH], required_steps=["search"], respond_tool=True, options=GuardrailOptions()
    )
    action = guard.check(
        [_call("search", "a", query="q"), _call("respond", "b", message="Found it.")]
    )
    assert isinstance(action, Execute)
    assert action.refused[0].nudge.content == (
        "[StepEnforcementError] `respond` cannot run yet, so it was not run: these steps are not "
        "done: `search`. `search` from the same reply runs now (results follow); call `respond` "
        "again once their results are in."
    )
    assert respond_spec() in guard.tools
