"""Every simulated backend fault, through the runtime and through the proxy, streamed and not:
each call completes or ends in a typed error (0 hung, 0 lost), the calls queued behind a faulted
one complete, and nothing is left behind (tasks, threads, file descriptors).

The runtime half runs on trio's MockClock against the sim (its faults wait on trio's clock), so
a hang costs virtual seconds; the proxy half runs on real sockets with a short stall limit.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from leak_support import LiveTasks, installed
from proxy_support import proxy_config

from actors import ActorSystem
from forge_rt.backends.sim import Fault, SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient
from forge_rt.core import InferenceRequest, Message, Sampling, TextResponse
from forge_rt.errors import ForgeError
from forge_rt.proxy import BackendConfig, serve_proxy
from forge_rt.runtime import SlotWorker

BEHIND = 4  # calls queued behind the faulted one


def _request(text: str) -> InferenceRequest:
    return InferenceRequest(messages=(Message.user(text),), sampling=Sampling(max_tokens=64))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("whole", [False, True], ids=["streamed", "whole"])
@pytest.mark.parametrize("fault", list(Fault), ids=[f.value for f in Fault])
async def test_runtime_every_fault_ends_typed_or_completes(
    fault: Fault, whole: bool, autojump_clock: trio.testing.MockClock
) -> None:
    words = " ".join(f"w{i}" for i in range(12))
    config = SimConfig(script={"*": [words] * (BEHIND + 3)}, slow_drip_interval_s=1.0)
    tasks = LiveTasks()
    threads, fds = threading.active_count(), _fds()
    outcomes: list[object] = []
    with installed(tasks):
        async with (
            SimBackend.serve(config) as sim,
            LlamaServerClient(sim.url) as client,
            ActorSystem.open() as system,
        ):
            slot = await SlotWorker.start(system, client)
            await slot.infer(_request("warm"), whole=whole)  # the backend is known to answer
            sim.inject(fault)

            async def call(text: str) -> None:
                try:
                    reply = await slot.infer(_request(text), whole=whole)
                except ForgeError as exc:
                    outcomes.append(exc)
                else:
                    assert isinstance(reply.result, TextResponse)
                    outcomes.append(reply.result.content)

            with trio.fail_after(3600):  # virtual seconds: a hang would be caught here
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(call, "faulted")
                    await sim.wait_until(lambda s: sum(s.faults.values()) >= 1)
                    for n in range(BEHIND):
                        nursery.start_soon(call, f"behind {n}")
    assert len(outcomes) == BEHIND + 1  # nothing lost: every call has an outcome
    faulted = [o for o in outcomes if not isinstance(o, str)]
    assert len(faulted) <= 1, faulted  # only the faulted call may fail, and then typed
    assert sum(isinstance(o, str) and o == words for o in outcomes) >= BEHIND
    assert tasks.alive == set()
    assert threading.active_count() <= threads
    assert _fds() <= fds


def _body(stream: bool) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,  # the whole-call stall limit: 1 s + 4 tokens at 2 tok/s
        "stream": stream,
    }


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("fault", list(Fault), ids=[f.value for f in Fault])
async def test_proxy_every_fault_is_answered_and_the_requests_behind_complete(
    fault: Fault, stream: bool
) -> None:
    """The faulted request gets an answer -- a 200 or an error in the API's shape, a stream
    that ends -- and the requests behind it all get 200."""
    config = SimConfig(script={"*": ["fine thanks"] * (BEHIND + 3)}, slow_drip_interval_s=0.05)
    statuses: list[int] = []
    with trio.fail_after(60):
        async with SimBackend.serve(config) as sim:
            backend = BackendConfig(url=sim.url, kind="llamaserver")
            async with (
                serve_proxy(proxy_config(backend=backend, stall_s=1.0)) as url,
                httpx.AsyncClient(base_url=url, timeout=30) as http,
            ):
                assert (await http.post("/v1/chat/completions", json=_body(False))).is_success
                sim.inject(fault)

                async def request() -> None:
                    response = await http.post("/v1/chat/completions", json=_body(stream))
                    if not response.is_success:
                        assert "error" in response.json()
                    statuses.append(response.status_code)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(request)
                    await sim.wait_until(lambda s: sum(s.faults.values()) >= 1)
                    for _ in range(BEHIND):
                        nursery.start_soon(request)
    assert len(statuses) == BEHIND + 1
    assert sum(s == 200 for s in statuses) >= BEHIND
