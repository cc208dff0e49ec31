"""Guardrails.excluded_calls with ``exclude_refused`` (off by default): which refused calls
stay out of the next constraint, and for how long."""

from __future__ import annotations

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.errors import ToolResolutionError
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    StartsWith,
    ToolErrors,
    ToolResult,
)

READ = ToolSpec(
    name="read_document",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
ADD = ToolSpec(
    name="add",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)


ON = GuardrailOptions(exclude_refused=True)


def _reply(tool: str, **args: object) -> LLMResponse:
    return LLMResponse(result=[ToolCall(tool=tool, args=dict(args))])


def _ran(guard: Guardrails, tool: str, output: str | None = None, **args: object) -> ToolCall:
    action = guard.check(_reply(tool, **args))
    assert isinstance(action, Execute), action
    call = action.calls[0]
    if output is None:
        guard.record([ToolResult(call=call, error=ToolResolutionError(f"no such {args}"))])
    else:
        guard.record([ToolResult(call=call, output=output)])
    return call


def test_a_validator_refusal_is_excluded_for_the_rest_of_the_turn() -> None:
    guard = Guardrails([READ], respond_tool=True, options=ON)
    assert isinstance(guard.check(_reply("read_document", path="/path/to/your/file")), ToolErrors)
    assert [c.args for c in guard.excluded_calls] == [{"path": StartsWith("/path/to/your/file")}]
    _ran(guard, "read_document", "v2 ships in March", path="/memos/agenda.txt")
    assert [c.args for c in guard.excluded_calls] == [{"path": StartsWith("/path/to/your/file")}]
    guard.new_turn()
    assert guard.excluded_calls == ()


def test_a_resolution_failure_is_excluded_until_a_call_succeeds() -> None:
    guard = Guardrails([READ], respond_tool=True, options=ON)
    _ran(guard, "read_document", None, path="/memos/agenda.md")
    assert [c.args for c in guard.excluded_calls] == [{"path": StartsWith("/memos/agenda.md")}]
    _ran(guard, "read_document", None, path="/memos/agenda")
    assert len(guard.excluded_calls) == 2
    _ran(guard, "read_document", "v2 ships in March", path="/memos/agenda.txt")
    assert guard.excluded_calls == ()  # the success may have changed what resolves


def test_a_call_a_constraint_cannot_tell_apart_is_not_excluded() -> None:
    """Numbers are not excludable: excluding add(a=1.5, b=2) would take ``add`` away."""
    guard = Guardrails([ADD], respond_tool=True, options=ON)
    _ran(guard, "add", None, a=1.5, b=2.5)
    assert guard.excluded_calls == ()


def test_off_by_default_nothing_refused_is_excluded() -> None:
    guard = Guardrails([READ], respond_tool=True)
    assert isinstance(guard.check(_reply("read_document", path="/path/to/your/file")), ToolErrors)
    _ran(guard, "read_document", None, path="/memos/agenda.md")
    assert guard.excluded_calls == ()


def test_a_refused_string_is_excluded_by_its_start_and_an_enum_by_its_value() -> None:
    """Free text by its start (the 0.5B, barred from "EUR", wrote "EUR}}"); an enum value as
    itself, which leaves the other values."""
    rate = ToolSpec(
        name="get_rate",
        parameters={
            "type": "object",
            "properties": {
                "base": {"type": "string", "enum": ["EUR", "USD"]},
                "quote": {"type": "string"},
            },
            "required": ["base", "quote"],
        },
    )
    guard = Guardrails([rate], respond_tool=True, options=ON)
    _ran(guard, "get_rate", None, base="USD", quote="EUR")
    assert [c.args for c in guard.excluded_calls] == [{"base": "USD", "quote": StartsWith("EUR")}]
