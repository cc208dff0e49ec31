"""Small builders shared by the guardrail tests: a tool spec, a reply, a call that runs."""

from typing import Any

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.guardrails import Execute, Guardrails, ToolResult


def spec(name: str, **fields: str) -> ToolSpec:
    """A tool whose every field (name -> JSON type) is required."""
    return ToolSpec(
        name=name,
        parameters={
            "type": "object",
            "properties": {k: {"type": t} for k, t in fields.items()},
            "required": list(fields),
        },
    )


def reply(tool: str, **args: Any) -> LLMResponse:
    """A reply holding one native call."""
    return LLMResponse(result=[ToolCall(tool=tool, args=args)])


def ran(guard: Guardrails, tool: str, output: str, **args: Any) -> None:
    """One call of ``tool`` that the guardrails let run, and that returned ``output``."""
    action = guard.check(reply(tool, **args))
    assert isinstance(action, Execute), action
    guard.record([ToolResult(call=action.calls[0], output=output)])
