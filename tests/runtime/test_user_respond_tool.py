"""A workflow's own tool named ``respond`` is the workflow's: the runtime runs it, never answers it."""

from __future__ import annotations

from typing import Any

import trio

from forge_rt.core import ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.runtime import WorkflowRunner
from forge_rt.testing import ScriptedClient

MESSAGE = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


async def test_a_user_tool_named_respond_runs_as_the_terminal_tool(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The user's ``respond`` runs (its output is the result) instead of being echoed back."""
    sent: list[dict[str, Any]] = []

    async def respond(message: str) -> str:
        sent.append({"message": message})
        return f"delivered: {message}"

    workflow = Workflow(
        name="notify",
        tools=[ToolDef(spec=ToolSpec(name="respond", parameters=MESSAGE), callable=respond)],
        terminal_tool="respond",
        respond_tool=False,
        system_prompt_template="Tell the user.",
        constrain="never",
    )
    call = ToolCall(tool="respond", args={"message": "hello"}, call_id="c1")
    result = await WorkflowRunner(ScriptedClient([[call]])).run(workflow, "greet them")
    assert sent == [{"message": "hello"}]
    assert result.output == "delivered: hello"
