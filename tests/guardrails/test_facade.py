"""Guardrails facade: every branch of check() and record(), and the messages each renders."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import forge_rt
import forge_rt.guardrails
from forge_rt.core import (
    MessageType,
    Prerequisite,
    Role,
    TextResponse,
    ToolCall,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.errors import (
    ConfigurationError,
    PrerequisiteError,
    StepEnforcementError,
    ToolCallError,
    ToolExecutionError,
    ToolLoopError,
    ToolResolutionError,
    WorkflowDefinitionError,
)
from forge_rt.guardrails import (
    Execute,
    Fatal,
    GuardrailOptions,
    Guardrails,
    RetryWithNudge,
    StepBlocked,
    TextAnswer,
    ToolErrors,
    ToolResult,
)


class Query(BaseModel):
    query: str


class Findings(BaseModel):
    findings: str


SEARCH = ToolSpec(name="search", parameters=Query)
ANALYZE = ToolSpec(name="analyze", parameters=Query)
REPORT = ToolSpec(name="report", parameters=Findings)
TOOLS = [SEARCH, ANALYZE, REPORT]


def _call(tool: str, call_id: str = "c1", **args: object) -> ToolCall:
    return ToolCall(tool=tool, args=dict(args), call_id=call_id)


_SHAPE = {"required_steps", "terminal_tools", "prerequisites", "respond_tool", "tracker"}


def _guard(**kw: Any) -> Guardrails:
    """Guardrails over TOOLS (search required, report terminal, no rescue); ``kw`` holds shape
    arguments and GuardrailOptions fields."""
    shape: dict[str, Any] = {"required_steps": ["search"], "terminal_tools": ["report"]}
    shape.update({k: v for k, v in kw.items() if k in _SHAPE})
    options = GuardrailOptions(
        **{"rescue": False, **{k: v for k, v in kw.items() if k not in _SHAPE}}
    )
    return Guardrails(TOOLS, **shape, options=options)


def test_valid_reply_executes_and_renders_the_tool_call_turn() -> None:
    """Valid calls become Execute; its message is the kept assistant tool-call turn."""
    action = _guard().check([_call("search", query="q")])
    assert isinstance(action, Execute)
    [msg] = action.messages()
    assert (msg.role, msg.type, msg.transient) == (Role.ASSISTANT, MessageType.TOOL_CALL, False)
    assert msg.tool_calls == (_call("search", query="q"),)


def test_execute_renders_reasoning_separately() -> None:
    """Reasoning becomes its own REASONING message; the calls are rendered without it."""
    call = ToolCall(tool="search", args={"query": "q"}, call_id="c1", reasoning="look it up")
    action = _guard().check([call])
    assert isinstance(action, Execute)
    reasoning, turn = action.messages()
    assert (reasoning.type, reasoning.content) == (MessageType.REASONING, "look it up")
    assert turn.tool_calls is not None
    assert turn.tool_calls[0].reasoning is None


def test_execute_reports_collapsed_calls() -> None:
    """Identical calls in one reply run once and the drop count is on the action."""
    action = _guard().check([_call("search", f"c{i}", query="q") for i in range(16)])
    assert isinstance(action, Execute)
    assert (len(action.calls), action.collapsed) == (1, 15)


def test_bare_text_retries_on_the_user_channel() -> None:
    """Bare text gives a transient assistant turn plus a transient user retry nudge."""
    action = _guard().check(TextResponse(content="I think the answer is 4."))
    assert isinstance(action, RetryWithNudge)
    text, nudge = action.messages()
    assert (text.role, text.type, text.content, text.transient) == (
        Role.ASSISTANT,
        MessageType.TEXT_RESPONSE,
        "I think the answer is 4.",
        True,
    )
    assert (nudge.role, nudge.type, nudge.transient) == (Role.USER, MessageType.RETRY_NUDGE, True)
    assert nudge.content.startswith("Your reply was text, not a tool call. Please call one")


def test_messages_raw_text_overrides_the_captured_text() -> None:
    """A caller can render the failed turn with the text it actually received."""
    action = _guard().check("short")
    assert action.messages("the full streamed text")[0].content == "the full streamed text"


def test_retry_nudges_escalate_and_exhaust_into_tool_call_error() -> None:
    """Retry tiers go 1, 2, 3; the fourth bad reply is Fatal(ToolCallError) with context."""
    guard = _guard()
    tiers = []
    for _ in range(3):
        action = guard.check("no call here")
        assert isinstance(action, RetryWithNudge)
        tiers.append(action.nudge.tier)
    assert tiers == [1, 2, 3]
    fatal = guard.check("")
    assert isinstance(fatal, Fatal)
    assert isinstance(fatal.error, ToolCallError)
    assert (fatal.error.attempts, fatal.error.last_raw, fatal.error.cause) == (
        4,
        "",
        "empty reply",
    )
    assert fatal.messages() == []


def test_retry_nudges_off_ends_with_text_answer() -> None:
    """With retry nudges disabled, bare text is the answer and nothing is counted."""
    guard = _guard(retry_nudges=False)
    action = guard.check("The answer is 4.")
    assert action == TextAnswer(text="The answer is 4.")
    [msg] = action.messages()
    assert (msg.type, msg.transient) == (MessageType.TEXT_RESPONSE, False)
    assert guard.budgets.retries == 0


def test_text_a_constraint_offered_is_the_answer_with_prose_answers() -> None:
    """Under a constraint that admits text, text without a call is the model's answer."""
    guard = _guard(prose_answers=True)
    action = guard.check("No tool here reads the tide tables.", text_offered=True)
    assert action == TextAnswer(text="No tool here reads the tide tables.", rule="prose_answers")
    assert guard.budgets.retries == 0


@pytest.mark.parametrize(
    ("options", "offered", "reply"),
    [
        ({"prose_answers": True}, False, "I will look that up."),  # decoded freely
        ({}, True, "I will look that up."),  # the option is off
        ({"prose_answers": True}, True, '{"name": "search", "arguments": {"query": '),
        ({"prose_answers": True}, True, ""),
    ],
)
def test_other_text_is_still_sent_back(options: dict[str, bool], offered: bool, reply: str) -> None:
    action = _guard(**options).check(reply, text_offered=offered)
    assert isinstance(action, RetryWithNudge)


def test_unknown_tool_is_a_tool_error_for_the_whole_batch() -> None:
    """Unknown tool: transient tool-call turn, an error for it, a hold-back note for the rest."""
    action = _guard().check([_call("weather", "c1"), _call("search", "c2", query="q")])
    assert isinstance(action, ToolErrors)
    turn, error, held = action.messages()
    assert (turn.type, turn.transient) == (MessageType.TOOL_CALL, True)
    assert (error.role, error.type, error.tool_call_id, error.transient) == (
        Role.TOOL,
        MessageType.RETRY_NUDGE,
        "c1",
        True,
    )
    assert error.content.startswith("[ToolError] Unknown tool `weather`.")
    assert (held.tool_call_id, held.content[:13]) == ("c2", "[NotExecuted]")


def test_tool_errors_count_against_the_retry_budget() -> None:
    """Replies with only bad calls exhaust the retry budget; last_raw shows the calls."""
    guard = _guard(max_retries=1)
    guard.check([_call("weather")])
    fatal = guard.check([_call("weather", city="Turku")])
    assert isinstance(fatal, Fatal)
    assert isinstance(fatal.error, ToolCallError)
    assert json.loads(fatal.error.last_raw or "") == [
        {"name": "weather", "arguments": {"city": "Turku"}}
    ]
    assert fatal.error.cause == "[ToolError] Unknown tool `weather`. Available tools: " + (
        "`search`, `analyze`, `report`. Call one of them by its exact name."
    )


def test_valid_reply_resets_the_retry_row() -> None:
    """A reply with valid calls breaks the row of bad replies."""
    guard = _guard(max_retries=1)
    guard.check("text")
    guard.check([_call("search", query="q")])
    assert isinstance(guard.check("text again"), RetryWithNudge)


def test_premature_terminal_is_blocked_then_fatal() -> None:
    """A premature terminal call is StepBlocked; past the budget it is Fatal."""
    guard = _guard(max_premature=1)
    blocked = guard.check([_call("report", findings="x")])
    assert isinstance(blocked, StepBlocked)
    assert blocked.reason == "premature_terminal"
    turn, nudge = blocked.messages()
    assert (turn.transient, nudge.type, nudge.role) == (True, MessageType.STEP_NUDGE, Role.TOOL)
    fatal = guard.check([_call("report", findings="x")])
    assert isinstance(fatal, Fatal)
    assert isinstance(fatal.error, StepEnforcementError)


def test_prerequisite_is_blocked_then_fatal() -> None:
    """A call before its prerequisite is StepBlocked; past its budget it is Fatal."""
    guard = _guard(required_steps=(), prerequisites={"analyze": ["search"]}, max_prereq=1)
    blocked = guard.check([_call("analyze", query="q")])
    assert isinstance(blocked, StepBlocked)
    assert blocked.messages()[1].type is MessageType.PREREQUISITE_NUDGE
    fatal = guard.check([_call("analyze", query="q")])
    assert isinstance(fatal, Fatal)
    assert isinstance(fatal.error, PrerequisiteError)


def test_steps_off_lets_premature_terminal_run() -> None:
    """With step enforcement disabled, the terminal tool runs at once."""
    assert isinstance(_guard(steps=False).check([_call("report", findings="x")]), Execute)


def test_loop_guard_blocks_then_is_fatal() -> None:
    """The third identical reply is blocked for looping, the fourth is Fatal(ToolLoopError)."""
    guard = _guard()
    actions = [guard.check([_call("search", query="same")]) for _ in range(4)]
    assert [type(a).__name__ for a in actions] == ["Execute", "Execute", "StepBlocked", "Fatal"]
    assert isinstance(actions[2], StepBlocked)
    assert actions[2].reason == "loop"
    assert isinstance(actions[3], Fatal)
    assert isinstance(actions[3].error, ToolLoopError)


def test_loop_guard_can_be_disabled() -> None:
    """loop_repeats=None never blocks repeats."""
    guard = _guard(loop_repeats=None)
    actions = [guard.check([_call("search", query="same")]) for _ in range(5)]
    assert all(isinstance(a, Execute) for a in actions)
    assert guard.budgets.loop_repeats is None


def test_record_success_appends_results_and_records_steps() -> None:
    """Successes become kept tool-result messages and completed steps."""
    guard = _guard()
    outcome = guard.record([ToolResult(call=_call("search", query="q"), output="3 hits")])
    [msg] = outcome.messages
    assert (msg.role, msg.type, msg.content, msg.tool_call_id, msg.transient) == (
        Role.TOOL,
        MessageType.TOOL_RESULT,
        "3 hits",
        "c1",
        False,
    )
    assert (outcome.done, outcome.succeeded, guard.tracker.completed_steps) == (
        False,
        1,
        ("search",),
    )


def test_terminal_success_is_done_with_its_output() -> None:
    """A successful terminal call ends the run with its output."""
    guard = _guard()
    call = _call("report", findings="x")
    outcome = guard.record([ToolResult(call=call, output="filed")])
    assert (outcome.done, outcome.terminal_call, outcome.terminal_output) == (True, call, "filed")


def test_tool_failures_are_fed_back_then_fatal() -> None:
    """Tool exceptions are fed back as [ToolError]; the third in a row is fatal."""
    guard = _guard()
    errors = [OSError(f"boom {i}") for i in range(3)]
    outcomes = [
        guard.record([ToolResult(call=_call("search", query="q"), error=e)]) for e in errors
    ]
    assert outcomes[0].messages[0].content == (
        "[ToolError] `search` failed: OSError: boom 0. Check the arguments or try a different "
        "approach."
    )
    assert [o.fatal is None for o in outcomes] == [True, True, False]
    fatal = outcomes[2].fatal
    assert isinstance(fatal, ToolExecutionError)
    assert (fatal.tool, fatal.attempts, fatal.last_error) == ("search", 3, errors[2])
    assert guard.tracker.completed_steps == ()


def test_resolution_error_is_fed_back_not_counted_not_recorded() -> None:
    """A ToolResolutionError is fed back, not counted as a failure, and not a step."""
    guard = _guard()
    call = _call("search", query="q")
    outcome = guard.record(
        [ToolResult(call=call, error=ToolResolutionError("no index yet: call analyze"))]
    )
    assert outcome.messages[0].content == (
        "[ToolResolutionError] `search`: no index yet: call analyze"
    )
    assert (outcome.fatal, guard.budgets.tool_errors, guard.tracker.completed_steps) == (
        None,
        0,
        (),
    )


def test_success_resets_tool_errors_and_step_rows() -> None:
    """A success breaks the tool-error row and the blocked-reply rows."""
    guard = _guard(prerequisites={"analyze": ["search"]})
    guard.check([_call("report", findings="x")])
    guard.record([ToolResult(call=_call("search", query="q"), error=OSError("x"))])
    guard.record([ToolResult(call=_call("search", query="q"), output="ok")])
    budgets = guard.budgets
    assert (budgets.tool_errors, budgets.premature, budgets.prereq) == (0, 0, 0)


def test_recovery_off_makes_first_failure_fatal() -> None:
    """Without recovery, the first tool error (even a resolution error) ends the run."""
    for error in (OSError("x"), ToolResolutionError("wrong file")):
        guard = _guard(recovery=False)
        outcome = guard.record([ToolResult(call=_call("search", query="q"), error=error)])
        assert isinstance(outcome.fatal, ToolExecutionError)
        assert outcome.fatal.last_error is error


def test_the_record_names_the_results_rules_that_acted() -> None:
    """A failure fed back is the rule ``recovery`` at work (off, it ends the run); a note on a
    result is ``result_notes``'s. Each is named in the outcome, for the run's record."""
    guard = _guard()
    outcome = guard.record([ToolResult(call=_call("search", query="q"), error=OSError("x"))])
    assert outcome.rules == ("recovery",)
    first = guard.record([ToolResult(call=_call("search", "c2", query="tides"), output="low")])
    assert first.rules == ()
    again = guard.record([ToolResult(call=_call("search", "c3", query="tides"), output="low")])
    assert again.rules == ("result_notes",)
    quiet = _guard(result_notes=False)
    quiet.record([ToolResult(call=_call("search", "c2", query="tides"), output="low")])
    outcome = quiet.record([ToolResult(call=_call("search", "c3", query="tides"), output="low")])
    assert outcome.rules == ()


def test_terminal_success_wins_over_exhausted_budget_in_same_batch() -> None:
    """If the terminal tool succeeded, the run is done even if a sibling exhausted the budget."""
    guard = _guard(recovery=False)
    outcome = guard.record(
        [
            ToolResult(call=_call("analyze", "c1", query="q"), error=OSError("x")),
            ToolResult(call=_call("report", "c2", findings="f"), output="filed"),
        ]
    )
    assert (outcome.done, outcome.fatal, outcome.failed, len(outcome.messages)) == (
        True,
        None,
        1,
        2,
    )


def test_all_successes_are_steps_even_when_budget_runs_out() -> None:
    """Control state records every success of the batch, whatever the budget says."""
    guard = _guard(recovery=False)
    outcome = guard.record(
        [
            ToolResult(call=_call("analyze", "c1", query="q"), error=OSError("x")),
            ToolResult(call=_call("search", "c2", query="q"), output="ok"),
        ]
    )
    assert isinstance(outcome.fatal, ToolExecutionError)
    assert guard.tracker.completed_steps == ("search",)


def test_tool_result_with_output_and_error_is_rejected() -> None:
    """A result is either an output or an error."""
    with pytest.raises(ValueError, match=r"has both an output and an error; give one$"):
        ToolResult(call=_call("search"), output="x", error=OSError("y"))


def test_budgets_snapshot_reports_usage() -> None:
    """The budgets snapshot shows what is used against each limit."""
    guard = _guard()
    guard.check("text")
    guard.check([_call("report", findings="x")])
    budgets = guard.budgets
    assert (budgets.retries, budgets.max_retries, budgets.premature, budgets.max_premature) == (
        0,
        3,
        1,
        3,
    )


def test_unknown_names_in_configuration_are_rejected() -> None:
    """Steps, terminals and prerequisites must name real tools."""
    with pytest.raises(WorkflowDefinitionError, match=r"required step 'fetch' is not one"):
        Guardrails(TOOLS, required_steps=["fetch"])
    with pytest.raises(WorkflowDefinitionError, match=r"prerequisite of 'analyze' 'fetch'"):
        Guardrails(TOOLS, prerequisites={"analyze": [Prerequisite(tool="fetch")]})


def test_from_workflow_takes_steps_terminals_and_prerequisites() -> None:
    """from_workflow carries the workflow's rules; overrides win."""
    workflow = Workflow(
        name="w",
        tools=[
            ToolDef(spec=SEARCH, callable=lambda query: query),
            ToolDef(spec=ANALYZE, callable=lambda query: query, prerequisites=["search"]),
            ToolDef(spec=REPORT, callable=lambda findings: findings),
        ],
        required_steps=["analyze"],
        terminal_tool="report",
        respond_tool=False,
    )
    guard = Guardrails.from_workflow(workflow, options=GuardrailOptions(rescue=False, max_prereq=5))
    assert (guard.required_steps, guard.terminal_tools, guard.budgets.max_prereq) == (
        ("analyze",),
        frozenset({"report"}),
        5,
    )
    blocked = guard.check([_call("analyze", query="q")])
    assert isinstance(blocked, StepBlocked)
    assert blocked.reason == "prerequisite"


def test_public_surface() -> None:
    """Guardrails is exported at the top level and every listed name exists."""
    assert forge_rt.Guardrails is Guardrails
    assert "Guardrails" in forge_rt.__all__
    missing = [n for n in forge_rt.guardrails.__all__ if not hasattr(forge_rt.guardrails, n)]
    assert missing == []


def test_respond_tool_is_added_and_terminal_when_no_other_is() -> None:
    """respond_tool=True offers `respond`; without other terminals, answering ends the run."""
    guard = Guardrails(TOOLS, respond_tool=True, options=GuardrailOptions(rescue=False))
    assert ([t.name for t in guard.tools], guard.terminal_tools) == (
        ["search", "analyze", "report", "respond"],
        frozenset({"respond"}),
    )
    call = _call("respond", message="It is 4 C in Turku.")
    assert isinstance(guard.check([call]), Execute)
    outcome = guard.record([ToolResult(call=call, output="It is 4 C in Turku.")])
    assert (outcome.done, outcome.terminal_output) == (True, "It is 4 C in Turku.")


def test_from_workflow_includes_the_respond_tool() -> None:
    """A workflow with the respond tool (and no terminal tool) gets `respond` as terminal."""
    workflow = Workflow(name="chat", tools=[ToolDef(spec=SEARCH, callable=lambda query: query)])
    guard = Guardrails.from_workflow(workflow, options=GuardrailOptions(rescue=False))
    assert ([t.name for t in guard.tools], guard.terminal_tools) == (
        ["search", "respond"],
        frozenset({"respond"}),
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_retries": -1}, r"^GuardrailOptions\.max_retries must be >= 0, got -1$"),
        ({"loop_repeats": 1}, r"^GuardrailOptions\.loop_repeats must be >= 2 or None"),
    ],
    ids=["negative-budget", "loop-of-one"],
)
def test_options_that_cannot_work_are_refused_at_construction(
    options: dict[str, int], message: str
) -> None:
    """A budget below zero or a loop guard of one repeat is a ConfigurationError, said plainly."""
    with pytest.raises(ConfigurationError, match=message):
        GuardrailOptions(**options)


def test_callable_now_leaves_out_early_terminals_unmet_prerequisites_and_the_avoided() -> None:
    """While a step is pending the terminal tool is out, and so is a tool whose prerequisite
    has not succeeded; the tool to avoid is always out; with steps off, every tool is in."""
    guard = _guard(prerequisites={"analyze": ["search"]})

    def names(avoid: frozenset[str] = frozenset()) -> list[str]:
        return [t.name for t in guard.callable_now(avoid)]

    assert names() == ["search"]
    guard.record([ToolResult(call=_call("search", query="q"), output="found")])
    assert names() == ["search", "analyze", "report"]
    assert names(frozenset({"analyze"})) == ["search", "report"]
    assert [t.name for t in _guard(steps=False).callable_now()] == ["search", "analyze", "report"]
