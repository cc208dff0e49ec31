"""Load: 1,000 workflows with mixed priorities on one slot. Nothing is lost, every answer is
right, and priority still orders the waits."""

from __future__ import annotations

import random
from typing import Any

import trio
from runtime_support import Tools

from forge_rt.core import InferenceRequest, ToolCall
from forge_rt.runtime import Session
from forge_rt.testing import ScriptedClient

PRIORITIES = (0, 10, 20)


def _reply(request: InferenceRequest) -> list[ToolCall]:
    """get_weather for the city the user named, then respond with what the tool said."""
    last = request.messages[-1]
    if last.type.value == "user_input":
        return [ToolCall(tool="get_weather", args={"city": last.content})]
    return [ToolCall(tool="respond", args={"message": last.content})]


async def test_a_thousand_workflows_on_one_slot(autojump_clock: Any) -> None:
    tools = Tools()
    client = ScriptedClient(_reply, prefill_s=0.05)
    draw = random.Random(7)
    results: dict[int, str] = {}
    async with Session.open(client, max_queue=1024) as session:

        async def one(n: int) -> None:
            result = await session.run(
                tools.workflow(), f"City{n}", priority=draw.choice(PRIORITIES)
            )
            results[n] = result.output

        with trio.fail_after(10_000):
            async with trio.open_nursery() as nursery:
                for n in range(1000):
                    nursery.start_soon(one, n)
        stats = await session.slot.stats()
    assert len(results) == 1000
    assert all(results[n] == f"22C and sunny in City{n}" for n in range(1000))
    assert (stats.completed, stats.failed, stats.rejected, stats.evicted) == (2000, 0, 0, 0)
    assert stats.waits[0].mean_s < stats.waits[10].mean_s < stats.waits[20].mean_s
