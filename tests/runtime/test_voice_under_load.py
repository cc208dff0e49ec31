"""Voice requests under background load, on the sim over HTTP, in virtual time.

Background workflows generate long constrained tool calls at priority 10; voice workflows arrive
at priority 0 while they do. With one cache line per workflow a preempted call resumes from its
own cached prompt and partial reply, so a voice request's first token comes as soon as on an idle
slot, nothing is decoded twice and almost nothing is prefilled again. (``bench/runtime_bench.py
voice`` runs the issue's larger workload in real time.) The sim keeps time on trio's clock, so
under the autojump clock the figures are virtual and the same on a busy machine.
"""

from __future__ import annotations

import statistics

import trio
import trio.testing

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient
from forge_rt.core import (
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.eval.scenarios._kit import by_conversation, call, plan_oracle
from forge_rt.runtime import Session, SlotStats

STEP = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
BACKGROUND, VOICES = 3, 3


def _workflow(name: str, steps: int) -> Workflow:
    async def step(note: str) -> str:
        await trio.sleep(0.3)
        return f"{len(note)} characters noted"

    tools = [
        ToolDef(spec=ToolSpec(name=f"step{i}", parameters=STEP), callable=step)
        for i in range(1, steps + 1)
    ]
    return Workflow(
        name=name,
        tools=tools,
        required_steps=[f"step{i}" for i in range(1, steps + 1)],
        system_prompt_template="Run every step in order, then respond.",
    )


def _plan(steps: int, words: int):  # type: ignore[no-untyped-def]
    note = " ".join(["word"] * words)
    return plan_oracle(
        [call(f"step{i}", note=note) for i in range(1, steps + 1)] + [call("respond", message="ok")]
    )


async def _run(*, background: bool, lines: bool) -> tuple[list[float], SlotStats, int]:
    plans = {f"background {i}": _plan(3, 48) for i in range(BACKGROUND)}
    plans.update({f"voice {i}": _plan(1, 0) for i in range(VOICES)})
    slots = BACKGROUND + VOICES if lines else 1
    config = SimConfig(
        oracle=by_conversation(plans), prefill_tps=2000, decode_tps=40, n_slots=slots
    )
    ttft: list[float] = []
    async with (
        SimBackend.serve(config) as sim,
        LlamaServerClient(sim.url) as client,
        Session.open(client, cache_lines=slots if lines else None) as session,
    ):

        async def run_voice(i: int) -> None:
            await trio.sleep(1.0 + 1.7 * i)
            arrival, first = trio.current_time(), []

            async def on_chunk(chunk: StreamChunk) -> None:
                if not first and isinstance(chunk, TextDeltaChunk | ToolCallDeltaChunk):
                    first.append(trio.current_time())

            await session.run(_workflow("voice", 1), f"voice {i}", priority=0, on_chunk=on_chunk)
            ttft.append(first[0] - arrival)

        async def run_background(i: int) -> None:
            await session.run(_workflow(f"bg{i}", 3), f"background {i}", priority=10)

        async with trio.open_nursery() as nursery:
            if background:
                for i in range(BACKGROUND):
                    nursery.start_soon(run_background, i)
            for i in range(VOICES):
                nursery.start_soon(run_voice, i)
        return ttft, await session.slot.stats(), sim.stats.generated_tokens


async def test_voice_ttft_under_load_matches_an_idle_slot_and_nothing_is_redone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(600):
        idle, _, _ = await _run(background=False, lines=True)
        loaded, stats, generated = await _run(background=True, lines=True)
    assert stats.preemptions >= VOICES  # the voices really did land on background generations
    assert statistics.median(loaded) <= 1.2 * statistics.median(idle)
    assert max(loaded) <= 1.5 * max(idle)
    assert stats.restarted == 0
    assert stats.tokens_redecoded <= 0.02 * generated
    assert stats.prompt_tokens_reprocessed <= 0.05 * stats.prompt_tokens_resumed


async def test_on_one_slot_every_resume_prefills_its_prompt_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The contrast: without lines the voice call overwrites the KV the preempted call needs."""
    with trio.fail_after(600):
        _, stats, _ = await _run(background=True, lines=False)
    assert stats.preemptions >= VOICES
    assert stats.prompt_tokens_reprocessed >= 0.5 * stats.prompt_tokens_resumed
