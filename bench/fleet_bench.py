"""A fleet of backends: makespan on 1, 2 and 4 simulated servers, and voice under load on 2.

Real time, real HTTP: each backend is a simulated llama-server with realistic rates (prefill
3000 tok/s, decode 120 tok/s) on this machine, so the figures are ratios against the one-backend
baseline and the idle fleet measured in the same run, never absolute claims.

    python bench/fleet_bench.py             # all three
    python bench/fleet_bench.py makespan    # one of: makespan, voice, kill

``voice`` runs twice: on backends of one KV slot each, and with two cache lines a backend (each
sim with two slots, ``Session.open(cache_lines=2)``), so the voice conversation's prompt stays
cached beside the background work it preempts.

``kill`` starts 1,000 workflows on 3 backends and kills one of them (its sim stops listening and
drops every connection, for good) once 300 have finished, while it is writing a reply; it counts the workflows that finish,
fail or never end, and the calls the fleet continued or restarted on another backend.

Goals (issue 34): 32 workflows x 4 steps take >= 1.9x less time on 2 backends than on 1 and
>= 3.6x less on 4; a voice request's time to first token on a loaded 2-backend fleet is <= 1.1x
the idle fleet's (median and max); with one of 3 backends killed mid-run, 0 of 1,000 workflows
lost and 0 hung.
"""

from __future__ import annotations

import statistics
import sys
from contextlib import AsyncExitStack
from typing import Any

import structlog
import trio

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
from forge_rt.errors import ForgeError
from forge_rt.eval.scenarios._kit import by_conversation, call, plan_oracle
from forge_rt.runtime import Fleet, Session

structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))

STEP = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "note": {"type": "string"}},
    "required": ["n"],
}


def _workflow(name: str, steps: int, tool_s: float, constrain: str = "never") -> Workflow:
    async def step(n: int, note: str = "") -> str:
        await trio.sleep(tool_s)
        return f"step {n} done"

    return Workflow(
        name=name,
        tools=[
            ToolDef(spec=ToolSpec(name=f"step{i}", parameters=STEP), callable=step)
            for i in range(1, steps + 1)
        ],
        required_steps=[f"step{i}" for i in range(1, steps + 1)],
        system_prompt_template="Run every step in order, then respond.",
        constrain=constrain,
    )


def _plan(steps: int, words: int) -> Any:
    note = " ".join(["word"] * words)
    intents = [call(f"step{i}", n=i, note=note) for i in range(1, steps + 1)]
    return plan_oracle([*intents, call("respond", message="ok")])


async def _fleet(
    stack: AsyncExitStack, n: int, plans: dict[str, Any], lines: int | None = None
) -> Session:
    config = SimConfig(
        oracle=by_conversation(plans), prefill_tps=3000, decode_tps=120, n_slots=lines or 1
    )
    clients = []
    for _ in range(n):
        sim = await stack.enter_async_context(SimBackend.serve(config))
        clients.append(await stack.enter_async_context(LlamaServerClient(sim.url)))
    return await stack.enter_async_context(Session.open(clients=clients, cache_lines=lines))


async def _makespan(backends: int, workflows: int = 32, steps: int = 4) -> float:
    plans = {f"job {i}": _plan(steps, 24) for i in range(workflows)}
    async with AsyncExitStack() as stack:
        session = await _fleet(stack, backends, plans)
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(workflows):
                flow = _workflow(f"job{i}", steps, 0.2)
                nursery.start_soon(lambda f=flow, i=i: session.run(f, f"job {i}", priority=10))
        return trio.current_time() - start


async def _voice(background: bool, lines: int | None, voices: int = 5) -> list[float]:
    plans = {f"background {i}": _plan(3, 48) for i in range(6)}
    plans.update({f"voice {i}": _plan(1, 0) for i in range(voices)})
    ttft: list[float] = []
    async with AsyncExitStack() as stack:
        session = await _fleet(stack, 2, plans, lines)

        async def voice(i: int) -> None:
            await trio.sleep(1.0 + 1.7 * i)
            arrival, first = trio.current_time(), []

            async def on_chunk(chunk: StreamChunk) -> None:
                if not first and isinstance(chunk, TextDeltaChunk | ToolCallDeltaChunk):
                    first.append(trio.current_time())

            await session.run(
                _workflow("voice", 1, 0.1), f"voice {i}", priority=0, on_chunk=on_chunk
            )
            ttft.append(first[0] - arrival)

        async with trio.open_nursery() as nursery:
            if background:
                for i in range(6):
                    flow = _workflow(f"bg{i}", 3, 0.3)
                    nursery.start_soon(
                        lambda f=flow, i=i: session.run(f, f"background {i}", priority=10)
                    )
            for i in range(voices):
                nursery.start_soon(voice, i)
    return ttft


async def _mid_reply(sim: SimBackend) -> None:
    """Return while ``sim`` is writing a reply: a kill then cuts one mid-stream."""
    slot = sim.stats.slots[0]
    while True:
        before = slot.generated_tokens
        await trio.sleep(0.005)
        if slot.is_processing and slot.generated_tokens > before:
            return


async def _kill(workflows: int = 1000, steps: int = 2, kill_after: int = 300) -> str:
    plans = {f"job {i}": _plan(steps, 24) for i in range(workflows)}
    config = SimConfig(oracle=by_conversation(plans), prefill_tps=20000, decode_tps=400)
    finished: list[str] = []
    lost: list[str] = []

    async def streamed(chunk: StreamChunk) -> None:
        """The workflows stream their replies, constrained: text a cut call can go on from (a
        call fetched whole, or native tool-call deltas, restart instead)."""

    async with AsyncExitStack() as stack:
        sims = [await stack.enter_async_context(SimBackend.serve(config)) for _ in range(3)]
        clients = [await stack.enter_async_context(LlamaServerClient(sim.url)) for sim in sims]
        session = await stack.enter_async_context(
            Session.open(clients=clients, max_queue=workflows)
        )
        fleet = session.slot
        assert isinstance(fleet, Fleet)
        dead = trio.Event()  # never set while the run lasts: the killed backend stays down
        killed = trio.Event()

        async def one(i: int) -> None:
            try:
                await session.run(
                    _workflow(f"job{i}", steps, 0.05, constrain="always"),
                    f"job {i}",
                    priority=10,
                    on_chunk=streamed,
                )
            except ForgeError as exc:
                lost.append(type(exc).__name__)
                return
            finished.append(f"job {i}")
            if len(finished) == kill_after:
                killed.set()

        start = trio.current_time()
        async with trio.open_nursery() as backends:
            with trio.move_on_after(600) as hung:  # a workflow still running then never ends
                async with trio.open_nursery() as nursery:
                    for i in range(workflows):
                        nursery.start_soon(one, i)
                    await killed.wait()
                    await _mid_reply(sims[1])
                    backends.start_soon(lambda: sims[1].restart(0.0, until=dead))
            wall = trio.current_time() - start
            backends.cancel_scope.cancel()
        dead.set()
        in_flight = workflows - len(finished) - len(lost)
        return (
            f"kill: {workflows} workflows x {steps} steps on 3 backends, one killed after "
            f"{kill_after} finished: {len(finished)} finished, {len(lost)} lost "
            f"({', '.join(sorted(set(lost))) or 'none'}), "
            f"{in_flight if hung.cancelled_caught else 0} hung; the fleet continued "
            f"{fleet.continued} cut calls and restarted {fleet.restarted} on another backend; "
            f"failovers per backend {fleet.failovers}; {wall:.1f} s"
        )


def main(which: list[str]) -> None:
    if not which or "makespan" in which:
        one, two, four = (trio.run(_makespan, n) for n in (1, 2, 4))
        print(
            f"makespan, 32 workflows x 4 steps: 1 backend {one:.2f} s, 2 {two:.2f} s "
            f"({one / two:.2f}x shorter, goal >= 1.9x), 4 {four:.2f} s ({one / four:.2f}x, "
            "goal >= 3.6x)"
        )
    if not which or "voice" in which:
        for lines in (None, 2):
            idle = trio.run(_voice, False, lines)
            loaded = trio.run(_voice, True, lines)
            med = statistics.median(loaded) / statistics.median(idle)
            top = max(loaded) / max(idle)
            print(
                f"voice TTFT on a 2-backend fleet, {lines or 'no'} cache lines a backend: idle "
                f"median {statistics.median(idle) * 1000:.0f} ms max {max(idle) * 1000:.0f} ms; "
                f"under 6 background workflows median {statistics.median(loaded) * 1000:.0f} ms "
                f"({med:.2f}x, goal <= 1.1x) max {max(loaded) * 1000:.0f} ms ({top:.2f}x, "
                "goal <= 1.1x)"
            )
    if not which or "kill" in which:
        print(trio.run(_kill))


if __name__ == "__main__":
    main(sys.argv[1:])
