"""The runtime over real HTTP: a slot call preempted, abandoned or timed out at any moment, or a
budget probe cancelled at any moment, leaks nothing.

Each sweep replays the same call against the sim with the interruption one trio scheduling step
later each time (see ``leak_support``); after each replay, and after the whole sweep, nothing may
be left for the garbage collector to finalise: no half-read response, no unsent request body.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from leak_support import (
    StepTrigger,
    cancel_at_every_step,
    installed,
    nothing_left_behind,
    sweep_steps,
)

from actors import ActorSystem
from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient, VLLMClient
from forge_rt.core import InferenceRequest, Message, TextResponse
from forge_rt.errors import InferenceDeadlineError
from forge_rt.runtime import Available, LlamaServerSource, SlotWorker, VLLMMetricsSource

BACKGROUND = InferenceRequest(messages=(Message.user("background"),))
VOICE = InferenceRequest(messages=(Message.user("voice"),))
# Several chunks, so interruptions land between chunks as well as before the first.
REPLY = "The forecast for Paris is mild, with a light breeze and a few clouds."


@asynccontextmanager
async def slot_on_sim(**config: object) -> AsyncIterator[SlotWorker]:
    """A SlotWorker whose client talks to a sim that answers every request with ``REPLY``."""
    sim_config = SimConfig(script={"*": [REPLY] * 10_000}, **config)  # type: ignore[arg-type]
    async with (
        SimBackend.serve(sim_config) as sim,
        LlamaServerClient(sim.url) as client,
        ActorSystem.open() as system,
    ):
        yield await SlotWorker.start(system, client)


def _text(response: object) -> str:
    result = getattr(response, "result", None)
    assert isinstance(result, TextResponse)
    return result.content


async def test_preemption_at_any_step_leaks_nothing_and_both_calls_finish() -> None:
    """A voice call arriving at any step of a background call preempts it cleanly: both answer."""
    preempted_replays = 0
    with nothing_left_behind("after the sweep"):
        async with slot_on_sim() as slot:

            async def replay(step: int) -> bool:
                nonlocal preempted_replays
                before = (await slot.stats()).preemptions
                arrive = trio.Event()
                answers: list[str] = []

                async def voice() -> None:
                    await arrive.wait()
                    answers.append(_text(await slot.infer(VOICE, priority=0)))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(voice)
                    trigger = StepTrigger(step, arrive.set)
                    with installed(trigger):
                        answers.append(_text(await slot.infer(BACKGROUND, priority=10)))
                    arrived_in_time = trigger.fired
                    arrive.set()
                assert answers.count(REPLY) == 2
                preempted_replays += (await slot.stats()).preemptions > before
                return arrived_in_time

            await sweep_steps(replay)
    assert preempted_replays > 5  # the sweep really preempted the call, at many points


async def test_a_caller_leaving_at_any_step_leaks_nothing() -> None:
    """A caller cancelled while queued, while its call starts or while it streams leaks nothing."""
    with nothing_left_behind("after the sweep"):
        async with slot_on_sim() as slot:
            replays = await cancel_at_every_step(lambda: slot.infer(BACKGROUND))
            # The slot is still good for the next caller.
            assert _text(await slot.infer(VOICE)) == REPLY
    assert replays > 5


async def test_a_deadline_mid_stream_leaks_nothing(autojump_clock: trio.abc.Clock) -> None:
    """A call whose deadline passes while it streams ends typed, and nothing is left behind."""
    with nothing_left_behind("after the deadline"):
        async with slot_on_sim(decode_tps=5.0) as slot:
            with pytest.raises(InferenceDeadlineError) as caught:
                await slot.infer(BACKGROUND, deadline=1.0)
            assert caught.value.started
            assert _text(await slot.infer(VOICE)) == REPLY


async def test_a_budget_probe_cancelled_at_any_step_leaks_nothing() -> None:
    """The BudgetActor's llama-server probe (three GETs) cancelled at any step leaks nothing."""
    with nothing_left_behind("after the sweep"):
        async with SimBackend.serve(SimConfig()) as sim, LlamaServerClient(sim.url) as client:
            source = LlamaServerSource(client)
            replays = await cancel_at_every_step(source.read)
            assert isinstance(await source.read(), Available)
    assert replays > 10  # all three requests were interrupted


async def test_a_vllm_budget_probe_cancelled_at_any_step_leaks_nothing() -> None:
    """The BudgetActor's vLLM probe (/metrics, then /v1/models) cancelled at any step leaks
    nothing."""
    with nothing_left_behind("after the sweep"):
        async with SimBackend.serve(SimConfig()) as sim, VLLMClient(sim.url) as client:
            source = VLLMMetricsSource(client)
            replays = await cancel_at_every_step(source.read)
            assert isinstance(await source.read(), Available)
    assert replays > 5  # both requests were interrupted
