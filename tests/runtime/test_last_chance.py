"""On the turn's last iteration an answer is not sent back: no iteration is left to answer the
correction, so the run would end unanswered while the answer taken may still be right."""

from __future__ import annotations

import pytest
import trio

from forge_rt.core import ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import MaxIterationsError
from forge_rt.guardrails import Execute, Guardrails, ToolErrors, ToolResult
from forge_rt.runtime import Session
from forge_rt.testing import Reply, ScriptedClient

GAUGE = {"type": "object", "properties": {"gauge": {"type": "string"}}, "required": ["gauge"]}
READING = "Gauge G-7 reads 41.5 bar"


async def read_gauge(gauge: str) -> str:
    return READING


def _workflow() -> Workflow:
    return Workflow(
        name="gauges",
        tools=[ToolDef(spec=ToolSpec(name="read_gauge", parameters=GAUGE), callable=read_gauge)],
        required_steps=["read_gauge"],
        system_prompt_template="You read gauges.",
        constrain="never",
    )


def _call(tool: str, **args: str) -> list[ToolCall]:
    return [ToolCall(tool=tool, args=args)]


# A lookup, an answer that uses nothing it returned, then one that relays it.
REPLIES: list[Reply] = [
    _call("read_gauge", gauge="G-7"),
    _call("respond", message="Everything looks normal."),
    _call("respond", message=READING),
]


async def _run(max_iterations: int) -> str:
    with trio.fail_after(10):
        async with Session.open(ScriptedClient(list(REPLIES))) as session:
            result = await session.run(
                _workflow(), "What does gauge G-7 read?", max_iterations=max_iterations
            )
            return result.output


async def test_with_an_iteration_left_the_answer_is_sent_back() -> None:
    assert await _run(max_iterations=3) == READING


async def test_on_the_last_iteration_the_answer_is_taken() -> None:
    assert await _run(max_iterations=2) == "Everything looks normal."


async def test_a_hard_rule_still_holds_on_the_last_iteration() -> None:
    """Only the answer rules step aside: a call the steps refuse is refused still."""
    replies: list[Reply] = [_call("respond", message="It reads fine.")]
    with pytest.raises(MaxIterationsError), trio.fail_after(10):
        async with Session.open(ScriptedClient(replies)) as session:
            await session.run(_workflow(), "What does gauge G-7 read?", max_iterations=1)


def test_the_guardrails_read_last_chance_per_reply() -> None:
    guard = Guardrails(
        [ToolSpec(name="read_gauge", parameters=GAUGE)],
        required_steps=["read_gauge"],
        respond_tool=True,
    )
    guard.new_turn("What does gauge G-7 read?")
    (ran,) = guard.check(_call("read_gauge", gauge="G-7")).calls  # type: ignore[union-attr]
    guard.record([ToolResult(call=ran, output=READING)])
    answer = _call("respond", message="Everything looks normal.")
    assert isinstance(guard.check(answer, last_chance=True), Execute)
    assert isinstance(guard.check(answer), ToolErrors)
