"""A small shop workflow and scripted runs of it, recorded into traces for the trace tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from forge_rt.core import ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolResolutionError
from forge_rt.runtime import Session, WorkflowResult
from forge_rt.testing import Reply, ScriptedClient
from forge_rt.trace import TraceSink

ITEM = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}


async def lookup(item: str) -> str:
    if item == "unicorn":
        raise ToolResolutionError("no such item: unicorn; look up a real item")
    if item == "broken":
        raise RuntimeError("stock service down")
    return f"{item}: in stock"


async def order(item: str) -> str:
    return f"ordered {item}"


def shop(
    *,
    name: str = "shop",
    steps: tuple[str, ...] = ("lookup", "order"),
    order_tool: Callable[..., Awaitable[str]] = order,
) -> Workflow:
    return Workflow(
        name=name,
        tools=[
            ToolDef(spec=ToolSpec(name="lookup", parameters=ITEM), callable=lookup),
            ToolDef(spec=ToolSpec(name="order", parameters=ITEM), callable=order_tool),
        ],
        required_steps=list(steps),
        system_prompt_template="You order things.",
        constrain="never",
    )


def call(tool: str, **args: str) -> list[ToolCall]:
    return [ToolCall(tool=tool, args=args)]


# Text first (a retry nudge), a lookup, a premature answer (refused: `order` is pending), the
# order, and the answer: every kind of verdict a plain run meets, in five replies.
NUDGED_AND_BLOCKED: list[Reply] = [
    "I think I will look it up",
    call("lookup", item="tea"),
    call("respond", message="done"),
    call("order", item="tea"),
    call("respond", message="ordered tea"),
]

# An unknown tool (tool errors), a lookup that says it was called wrong, one that fails, then
# the steps and the answer.
TOOL_TROUBLE: list[Reply] = [
    call("fly", item="tea"),
    call("lookup", item="unicorn"),
    call("lookup", item="broken"),
    call("lookup", item="tea"),
    call("order", item="tea"),
    call("respond", message="ordered tea"),
]


async def record(
    trace: Path | TraceSink, replies: list[Reply], *, name: str = "shop1"
) -> WorkflowResult:
    """Run one turn of the shop on ``replies`` with its trace going to ``trace``."""
    async with Session.open(ScriptedClient(list(replies)), trace=trace) as session:
        return await session.run(shop(), "order tea", name=name)
