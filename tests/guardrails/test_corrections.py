"""What the model and the caller are told: ignored arguments, hinted fixes, whole error summaries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from forge_rt.core import ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolCallError, ToolResolutionError
from forge_rt.guardrails import Execute, Fatal, GuardrailOptions, Guardrails, ToolResult

INTERACTIONS = ToolSpec(
    name="check_interactions",
    parameters={
        "type": "object",
        "properties": {"medication": {"type": "string"}},
        "required": ["medication"],
    },
)
ORDER = ToolSpec(
    name="get_order",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "verbose": {"type": "boolean"}},
        "required": ["order_id"],
    },
)


class Findings(BaseModel):
    findings: str


REPORT = ToolSpec(name="report", parameters=Findings)


def _guard(*tools: ToolSpec, **options: Any) -> Guardrails:
    return Guardrails(
        list(tools), terminal_tools=["report"], options=GuardrailOptions(rescue=False, **options)
    )


def test_an_unknown_argument_is_dropped_and_the_result_says_so() -> None:
    """check_interactions(medication=..., patient_id=...) runs; its result names patient_id."""
    guard = _guard(INTERACTIONS, REPORT)
    call = ToolCall(
        tool="check_interactions",
        args={"medication": "metformin", "patient_id": "P-1"},
        call_id="c1",
    )
    action = guard.check([call])
    assert isinstance(action, Execute)
    assert (action.calls[0].args, action.ignored) == (
        {"medication": "metformin"},
        {"c1": ("patient_id",)},
    )
    [message] = guard.record([ToolResult(call=action.calls[0], output="no interactions")]).messages
    assert message.content == (
        "no interactions\n[Note] `patient_id` is not an argument of `check_interactions`: "
        "ignored, and the call ran without it. Its arguments are `medication`."
    )


def test_schema_keywords_dropped_from_a_call_are_named_as_keywords() -> None:
    """Pasted schema keywords are dropped beside valid arguments and named for what they are."""
    guard = _guard(INTERACTIONS, REPORT)
    call = ToolCall(
        tool="check_interactions",
        args={"medication": "metformin", "title": "Params", "type": "object"},
        call_id="c1",
    )
    action = guard.check([call])
    assert isinstance(action, Execute)
    [message] = guard.record([ToolResult(call=action.calls[0], output="ok")]).messages
    assert "`title`, `type` are JSON-schema keywords copied from the tool definition" in (
        message.content
    )


def test_the_terminal_result_carries_no_note() -> None:
    """The task's own output is never decorated with guardrail notes."""
    guard = _guard(REPORT)
    call = ToolCall(tool="report", args={"findings": "done", "extra": 1}, call_id="r")
    action = guard.check([call])
    assert isinstance(action, Execute)
    outcome = guard.record([ToolResult(call=action.calls[0], output="filed")])
    assert (outcome.done, outcome.terminal_output, outcome.messages[0].content) == (
        True,
        "filed",
        "filed",
    )


def test_a_resolution_error_listing_values_comes_back_with_the_corrected_call() -> None:
    """An error that lists the ids it knows is fed back with the call to send: the listed id
    clearly most like the refused one in its place (the rule ``error_values``)."""
    guard = _guard(ORDER, REPORT)
    call = ToolCall(tool="get_order", args={"order_id": "KVX-318", "verbose": True}, call_id="o")
    action = guard.check([call])
    assert isinstance(action, Execute)
    error = ToolResolutionError("no such order KVX-318; known: KVX-0318, RT-5520")
    [message] = guard.record([ToolResult(call=action.calls[0], error=error)]).messages
    head, corrected = message.content.split("\nCorrected call: ")
    assert (
        head == "[ToolResolutionError] `get_order`: no such order KVX-318; known: KVX-0318, RT-5520"
    )
    assert json.loads(corrected) == {
        "name": "get_order",
        "arguments": {"order_id": "KVX-0318", "verbose": True},
    }


def test_a_new_turn_forgets_which_calls_failed() -> None:
    """A call that failed in an earlier turn is a first failure again in a new one."""
    guard = _guard(ORDER, REPORT)
    error = ToolResolutionError("no order '12345'; ids are B-7 and B-8")
    contents = []
    for n in range(2):
        guard.new_turn()
        call = ToolCall(tool="get_order", args={"order_id": "12345"}, call_id=f"o{n}")
        action = guard.check([call])
        assert isinstance(action, Execute)
        [message] = guard.record([ToolResult(call=action.calls[0], error=error)]).messages
        contents.append(message.content)
    assert all("Corrected call" not in c for c in contents)


def test_a_resolution_error_without_a_usable_hint_shows_no_call() -> None:
    """A message that names a tool, not a value, gets no invented corrected call."""
    guard = _guard(ORDER, REPORT)
    call = ToolCall(tool="get_order", args={"order_id": "KVX-318"}, call_id="o")
    action = guard.check([call])
    assert isinstance(action, Execute)
    error = ToolResolutionError("orders are looked up by customer: use report")
    [message] = guard.record([ToolResult(call=action.calls[0], error=error)]).messages
    assert message.content == (
        "[ToolResolutionError] `get_order`: orders are looked up by customer: use report"
    )


def test_the_error_a_run_ends_with_carries_the_argument_problem() -> None:
    """ToolCallError's cause says what was wrong, not "Invalid arguments for `respond`:"."""
    guard = Guardrails([REPORT], respond_tool=True, options=GuardrailOptions(max_retries=0))
    fatal = guard.check([ToolCall(tool="respond", args={"text": 4, "extra": 1}, call_id="x")])
    assert isinstance(fatal, Fatal)
    assert isinstance(fatal.error, ToolCallError)
    cause = fatal.error.cause or ""
    assert cause.startswith(
        "[ArgumentError] `respond` was not run: fix `message`. - Object missing required field "
        "`message` - at `$`"
    )
    assert not cause.rstrip().endswith(":")


@pytest.mark.parametrize("own", [False, True], ids=["synthetic", "users-own"])
def test_is_synthetic_respond_tells_the_two_respond_tools_apart(own: bool) -> None:
    """Only the injected respond tool is answered by the loop; a user's own respond runs."""
    mine = ToolSpec(name="respond", parameters=Findings)
    tools = [REPORT, mine] if own else [REPORT]
    guard = Guardrails(tools, respond_tool=True)
    call = ToolCall(tool="respond", args={"message": "hi"})
    assert guard.is_synthetic_respond(call) is not own
    assert [t.name for t in guard.tools] == ["report", "respond"]
    assert guard.terminal_tools == frozenset({"respond"})
    assert not guard.is_synthetic_respond(ToolCall(tool="report", args={"findings": "x"}))


def test_respond_tool_off_has_no_synthetic_respond() -> None:
    """With the respond tool off, no call is the synthetic respond."""
    guard = Guardrails([REPORT], terminal_tools=["report"])
    assert not guard.is_synthetic_respond(ToolCall(tool="respond", args={"message": "hi"}))


def test_a_workflow_with_its_own_respond_tool_gets_it_validated_as_its_own() -> None:
    """from_workflow keeps the workflow's respond (its schema, not the synthetic one's)."""
    own = ToolSpec(name="respond", parameters=Findings)
    workflow = Workflow(
        name="w", tools=[ToolDef(spec=own, callable=lambda findings: findings)], terminal_tool=None
    )
    guard = Guardrails.from_workflow(workflow)
    assert guard.tools == (own,)
    action = guard.check([ToolCall(tool="respond", args={"findings": "x"}, call_id="r")])
    assert isinstance(action, Execute)
    assert not guard.is_synthetic_respond(action.calls[0])
