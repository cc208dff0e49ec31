"""Validation of text replies through rescue parsing, including real Qwen2.5-Coder output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from forge_rt.core import MessageType, Role, TextResponse, ToolSpec
from forge_rt.guardrails import (
    Execute,
    Fatal,
    GuardrailOptions,
    Guardrails,
    ResponseValidator,
    RetryCause,
    RetryWithNudge,
    StepBlocked,
    TextAnswer,
    ToolErrors,
)
from forge_rt.guardrails._dialects import Dialect

DATA = Path("/work/shared/data/qwen25coder_raw_outputs.jsonl")


class SalesArgs(BaseModel):
    quarter: int = Field(ge=1, le=4)
    year: int = Field(ge=2000)


class Findings(BaseModel):
    findings: str


SALES = ToolSpec(name="fetch_rainfall_data", parameters=SalesArgs)
REPORT = ToolSpec(name="report", parameters=Findings)


@pytest.fixture
def validator() -> ResponseValidator:
    return ResponseValidator([SALES, REPORT])


def test_fenced_json_call_is_rescued(validator: ResponseValidator) -> None:
    """A call written in a ```json fence becomes a validated call with its dialect named."""
    text = (
        '```json\n{"name": "fetch_rainfall_data", "arguments": {"quarter": "4", "year": 2031}}\n```'
    )
    result = validator.validate(TextResponse(content=text))
    assert result.ok
    assert (result.calls[0].args, result.dialects, result.rescued, result.text) == (
        {"quarter": 4, "year": 2031},
        (Dialect.FENCED_JSON,),
        True,
        "",
    )


def test_rescued_unknown_tool_gets_an_error(validator: ResponseValidator) -> None:
    """A well-formed call of a tool that does not exist is reported, not dropped."""
    result = validator.validate('{"name": "analyze_rainfall", "arguments": {}}')
    [error] = result.errors
    assert error.content.startswith("[ToolError] Unknown tool `analyze_rainfall`.")


def test_call_repeated_on_many_lines_is_collapsed(validator: ResponseValidator) -> None:
    """The same call written 41 times in one reply runs once."""
    line = '{"name": "report", "arguments": {"findings": "Q4 was strong"}}'
    result = validator.validate("\n".join([line] * 41))
    assert (len(result.calls), result.collapsed, result.ok) == (1, 40, True)


def test_schema_pasted_as_arguments_in_text_is_rejected(validator: ResponseValidator) -> None:
    """Real 0.5B output that sends the tool's schema as its arguments is rejected with the shape."""
    text = (
        '{"name": "fetch_rainfall_data", "arguments": {"properties": {"quarter": {"description": '
        '"Quarter number (1-4)", "title": "Quarter", "type": "integer"}}}}'
    )
    [error] = validator.validate(text).errors
    assert "`properties` is a JSON-schema keyword copied from the tool definition" in error.content
    # No example call: it would hold no arguments, a call the tool refuses.
    assert error.content.endswith("Send the call again with a real value for `quarter`, `year`.")


def test_reasoning_only_reply_is_empty(validator: ResponseValidator) -> None:
    """A reply that only thinks is an empty reply; the thinking is kept as reasoning."""
    result = validator.validate("<think>I should fetch the data first.</think>")
    assert (result.needs_retry, result.cause, result.reasoning) == (
        True,
        RetryCause.EMPTY,
        "I should fetch the data first.",
    )


def test_rescued_call_keeps_reasoning_for_the_history() -> None:
    """Reasoning split off a rescued reply is rendered before the canonical call turn."""
    guard = Guardrails([SALES, REPORT])
    text = '<think>Need Q4.</think>{"name": "fetch_rainfall_data", "arguments": {"quarter": 4, "year": 2031}}'
    action = guard.check(text)
    assert isinstance(action, Execute)
    reasoning, turn = action.messages()
    assert (reasoning.type, reasoning.content) == (MessageType.REASONING, "Need Q4.")
    assert (turn.type, turn.content) == (MessageType.TOOL_CALL, "")


def test_unreadable_call_is_quoted_in_the_retry_nudge() -> None:
    """A call-like fragment rescue could not read is quoted back in the retry nudge."""
    guard = Guardrails([SALES, REPORT])
    action = guard.check('{"name": "report", "arguments": {"findings": "a" "b" ]]}')
    assert isinstance(action, RetryWithNudge)
    assert action.nudge.role is Role.USER
    assert action.nudge.content.startswith("Your tool call could not be parsed")
    assert "This part could not be read: " in action.nudge.content


def _real_tools() -> list[ToolSpec]:
    def spec(name: str, *props: str) -> ToolSpec:
        schema = {
            "type": "object",
            "properties": {p: {"type": "string"} for p in props},
            "required": list(props),
        }
        return ToolSpec(name=name, parameters=schema)

    return [
        spec("check_interactions", "patient_id", "medication"),
        spec("convert_currency", "amount", "from_currency", "to_currency"),
        spec("get_forecast", "city"),
        spec("report", "findings"),
        spec("summarize", "content"),
        spec("get_country_info", "country"),
        spec("respond", "message"),
    ]


@pytest.mark.skipif(not DATA.exists(), reason=f"real model output not present at {DATA}")
def test_every_real_reply_gets_a_well_formed_action() -> None:
    """On 288 real Qwen2.5-Coder replies, check() always returns an action whose messages pair
    every call with a result, and Execute only ever carries schema-valid calls."""
    tools = _real_tools()
    by_name = {t.name: t for t in tools}
    kinds: set[str] = set()
    for line in DATA.read_text().splitlines():
        content = json.loads(line)["content"]
        action = Guardrails(tools, options=GuardrailOptions(loop_repeats=None)).check(content)
        kinds.add(type(action).__name__)
        assert not isinstance(action, Fatal | TextAnswer | StepBlocked)
        messages = action.messages()
        if isinstance(action, Execute):
            for call in action.calls:
                assert by_name[call.tool].validate_args(call.args) == call.args
        if isinstance(action, ToolErrors):
            turn, *answers = messages
            assert turn.tool_calls is not None
            assert [m.tool_call_id for m in answers] == [c.call_id for c in turn.tool_calls]
    assert kinds == {"Execute", "RetryWithNudge", "ToolErrors"}
