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


def _plan_position(
    view: RequestView, turn_plans: Sequence[Sequence[Intent]]
) -> tuple[Sequence[Intent], int]:
    """The plan of the current user turn and how many of its steps have succeeded.

    A user message that answers an assistant reply while the turn's plan is unfinished is a
    retry nudge (the guardrails send those on the user channel), not a new turn: the model
    carries on with its plan. A step is done when a call of that step's tool succeeded; the
    success of some other tool (an unplanned ``respond``, say) does not move the plan on.
    """

    def plan_of(turn: int) -> Sequence[Intent]:
        return turn_plans[min(max(turn, 0), len(turn_plans) - 1)]

    turn, done = -1, 0
    names: dict[str, str] = {}
    previous: str | None = None
    for message in view.messages:
        for c in message.tool_calls:
            if c.id:
                names[c.id] = c.name
        if message.role == "user":
            nudge = turn >= 0 and previous == "assistant" and done < len(plan_of(turn))
            if not nudge:
                turn, done = turn + 1, 0
        elif message.role == "tool" and not _ERROR_PREFIX.match(message.content):
            plan = plan_of(turn)
            step = plan[done] if done < len(plan) else None
            if isinstance(step, SimToolCall) and names.get(message.tool_call_id or "") == step.name:
                done += 1
        previous = message.role
    return plan_of(turn), done


def plan_oracle(*turn_plans: Sequence[Intent]) -> Callable[[RequestView], Intent]:
    """A perfect model following a fixed plan per user turn, one step per successful call of it.

    Retry nudges do not restart the plan, and a turn's plan resumes where it stands (see
    :func:`_plan_position`); once the plan is done its last step is repeated.
    """

    def oracle(view: RequestView) -> Intent:
        plan, done = _plan_position(view, turn_plans)
        return plan[min(done, len(plan) - 1)]

    return oracle


def by_conversation(
    oracles: dict[str, Callable[[RequestView], Intent]],
) -> Callable[[RequestView], Intent]:
    """Dispatch on the conversation (the first user message), for several workflows on one sim."""

    def oracle(view: RequestView) -> Intent:
        return oracles[view.conversation](view)

    return oracle
