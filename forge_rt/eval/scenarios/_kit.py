"""Small builders that keep scenario definitions short: tools, judges, oracles."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from forge_rt.backends.sim import Intent, RequestView, SimToolCall
from forge_rt.core import Prerequisite, ToolDef, ToolSpec, Workflow
from forge_rt.eval._scenario import Judge, Verdict

__all__ = [
    "by_conversation",
    "call",
    "contains_all",
    "make_tool",
    "plan_oracle",
    "successful_results",
    "workflow",
]

_ERROR_PREFIX = re.compile(r"^\[(\w*Error|NotExecuted)\]")


def make_tool(
    name: str,
    description: str,
    params: dict[str, str],
    fn: Callable[..., Any],
    *,
    prerequisites: Sequence[str | Prerequisite] = (),
    optional: Sequence[str] = (),
) -> ToolDef:
    """A tool whose parameters are all of a JSON type (``"string"``, ``"integer"``, ...)."""
    schema = {
        "type": "object",
        "properties": {k: {"type": v} for k, v in params.items()},
        "required": [k for k in params if k not in optional],
    }
    return ToolDef(
        spec=ToolSpec(name=name, description=description, parameters=schema),
        callable=fn,
        prerequisites=list(prerequisites),
    )


def workflow(
    name: str,
    tools: Sequence[ToolDef],
    prompt: str,
    *,
    required: Sequence[str] = (),
    terminal: str | Sequence[str] | None = None,
) -> Workflow:
    """A workflow whose terminal is ``respond`` unless ``terminal`` names tools."""
    return Workflow(
        name=name,
        tools=list(tools),
        required_steps=list(required),
        terminal_tool=terminal if isinstance(terminal, str | None) else list(terminal),
        system_prompt_template=prompt,
    )


def _normal(text: str) -> str:
    return re.sub(r"[\s,]+", " ", text.lower())


def contains_all(*facts: str) -> Judge:
    """Correct when the output mentions every fact (case- and comma-insensitive)."""

    def judge(output: str) -> Verdict:
        missing = [f for f in facts if _normal(f) not in _normal(output)]
        if missing:
            return Verdict(False, f"answer lacks {missing}")
        return Verdict(True)

    return judge


def call(tool: str, /, **arguments: Any) -> SimToolCall:
    """An intended tool call, for oracles."""
    return SimToolCall(name=tool, arguments=arguments)


def successful_results(view: RequestView) -> list[tuple[str, str]]:
    """(tool name, result) of every call that succeeded since the last user message."""
    names: dict[str, str] = {}
    out: list[tuple[str, str]] = []
    start = max((i for i, m in enumerate(view.messages) if m.role == "user"), default=0)
    for message in view.messages[start:]:
        for c in message.tool_calls:
            if c.id:
                names[c.id] = c.name
        if message.role == "tool" and not _ERROR_PREFIX.match(message.content):
            out.append((names.get(message.tool_call_id or "", "?"), message.content))
    return out


def plan_oracle(*turn_plans: Sequence[Intent]) -> Callable[[RequestView], Intent]:
    """A perfect model following a fixed plan per user turn, one step per successful result."""

    def oracle(view: RequestView) -> Intent:
        turn = sum(1 for m in view.messages if m.role == "user") - 1
        plan = turn_plans[min(max(turn, 0), len(turn_plans) - 1)]
        done = len(successful_results(view))
        return plan[min(done, len(plan) - 1)]

    return oracle


def by_conversation(
    oracles: dict[str, Callable[[RequestView], Intent]],
) -> Callable[[RequestView], Intent]:
    """Dispatch on the conversation (the first user message), for several workflows on one sim."""

    def oracle(view: RequestView) -> Intent:
        return oracles[view.conversation](view)

    return oracle
