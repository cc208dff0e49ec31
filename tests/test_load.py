"""Load: 1,000 workflows with mixed priorities on one slot, and 200 concurrent proxy clients.
Nothing is lost, every answer is right, and priority still orders the waits."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).parent / "proxy"))
sys.path.insert(0, str(Path(__file__).parent / "runtime"))
from proxy_support import client_proxy
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


async def test_two_hundred_concurrent_proxy_clients() -> None:
    client = ScriptedClient(lambda request: "pong")
    statuses: list[int] = []
    body = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
    with trio.fail_after(120):
        async with client_proxy(client, max_queue=256) as url:
            limits = httpx.Limits(max_connections=200)
            async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

                async def one(n: int) -> None:
                    stream = n % 2 == 0
                    response = await http.post(
                        "/v1/chat/completions", json={**body, "stream": stream}
                    )
                    statuses.append(response.status_code)
                    if not stream:
                        assert response.json()["choices"][0]["message"]["content"] == "pong"

                async with trio.open_nursery() as nursery:
                    for n in range(200):
                        nursery.start_soon(one, n)
    assert statuses == [200] * 200
