"""On the embedded real model: the server dies while calls are queued on it, its supervisor
starts it again, and the queued calls complete -- the SlotWorker rides out the restart."""

from __future__ import annotations

import os
import signal

import pytest
import trio
import trio.testing

from actors import ActorSystem
from forge_rt.backends.local import DEFAULT_MODEL, LocalModelServer
from forge_rt.backends.managed import RestartPolicy
from forge_rt.clients import LlamaServerClient
from forge_rt.core import InferenceRequest, Message, Sampling, StreamChunk, TextDeltaChunk
from forge_rt.runtime import SlotWorker

pytestmark = pytest.mark.slow


def _request(text: str, max_tokens: int) -> InferenceRequest:
    return InferenceRequest(
        messages=(Message.user(text),),
        sampling=Sampling(temperature=0.0, max_tokens=max_tokens, seed=1),
    )


async def test_a_killed_embedded_server_is_restarted_and_the_queued_calls_complete() -> None:
    policy = RestartPolicy(backoff_s=0.1)
    async with LocalModelServer.start(DEFAULT_MODEL, restart=policy) as server:
        first_pid = server.backend.pid
        with trio.fail_after(600):
            async with LlamaServerClient(server.url) as client, ActorSystem.open() as system:
                slot = await SlotWorker.start(system, client)
                streaming = trio.Event()
                outcomes: dict[str, object] = {}

                async def on_chunk(chunk: StreamChunk) -> None:
                    if isinstance(chunk, TextDeltaChunk):
                        streaming.set()

                async def running() -> None:
                    # Cut mid-reply by the kill: continued from its partial text once the
                    # server is back, not failed.
                    reply = await slot.infer(_request("Count to fifty.", 200), on_chunk=on_chunk)
                    outcomes["running"] = reply.raw_text

                async def queued(name: str) -> None:
                    reply = await slot.infer(_request(f"Say {name}.", 8))
                    outcomes[name] = reply.raw_text

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(running)
                    await streaming.wait()
                    for name in ("one", "two", "three"):
                        nursery.start_soon(queued, name)
                    await trio.testing.wait_all_tasks_blocked()  # the three are queued
                    os.kill(first_pid, signal.SIGKILL)
                stats = await slot.stats()
        assert server.backend.restarts == 1
        assert stats.backend_cuts == 1
        assert stats.failed == 0
        assert server.backend.pid != first_pid
    assert all(
        isinstance(outcomes[n], str) and outcomes[n] for n in ("running", "one", "two", "three")
    )
