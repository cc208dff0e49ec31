"""Three specialist agents and a high-priority voice request sharing one inference slot.

One ``Session`` owns one SlotWorker: every agent's inference calls queue there, lowest priority
number first, and a call of strictly higher priority preempts the one that is generating. The
background agents run at priority 10; once the first of their replies is in, a voice request
arrives at priority 0 and is served next -- its time to first token is printed beside theirs::

    python examples/shared_slot.py                   # simulated backend, 0.5B speed (~30 s)
    python examples/shared_slot.py --sim-speed 10    # the same, ten times faster
    python examples/shared_slot.py --backend local   # the embedded Qwen2.5-Coder-0.5B

The agents (their tools and tasks) are the ones ``forge-rt demo`` runs, from ``forge_rt.demo``;
``examples/single_workflow.py`` shows how to define your own. A model that fails a task is
reported and the script still exits 0; a backend that fails exits 1.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
import trio

from forge_rt.backends.sim import SimBackend
from forge_rt.clients import LlamaServerClient
from forge_rt.core import (
    FinalChunk,
    LLMClient,
    Sampling,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
)
from forge_rt.demo import AGENTS, AgentSpec, DemoConfig, demo_sim_config
from forge_rt.errors import (
    BackendError,
    BackendStartError,
    ForgeError,
    MaxIterationsError,
    PrerequisiteError,
    StepEnforcementError,
    ToolCallError,
    ToolExecutionError,
    ToolLoopError,
    WorkflowCancelledError,
)
from forge_rt.runtime import Session

BACKGROUND_PRIORITY = 10
VOICE_PRIORITY = 0  # lower number = more urgent
MODEL_FAILURES = (
    ToolCallError,
    ToolExecutionError,
    StepEnforcementError,
    PrerequisiteError,
    ToolLoopError,
    MaxIterationsError,
    WorkflowCancelledError,  # its deadline passed
)


@asynccontextmanager
async def open_client(backend: str, sim_speed: float) -> AsyncIterator[LLMClient]:
    """The embedded model, or the simulated one (0.5B timing, small-model mistakes)."""
    if backend == "local":
        from forge_rt.backends.local import LocalModelServer

        async with (
            LocalModelServer.start("qwen2.5-coder-0.5b", n_ctx=4096, n_parallel=1) as server,
            LlamaServerClient(server.url) as client,
        ):
            yield client
    else:
        config = demo_sim_config(DemoConfig(backend="sim", sim_speed=sim_speed))
        async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
            yield client


class Agent:
    """One agent's run on the shared slot, and the times to first token of its inferences."""

    def __init__(self, spec: AgentSpec, priority: int) -> None:
        self.spec = spec
        self.priority = priority
        self.outcome = "not run"
        self.ttfts: list[float] = []
        self.replied = trio.Event()  # set when its first inference has finished (or it ended)
        self._asked_at = 0.0
        self._waiting = False

    def on_message(self, message: object) -> None:
        # The loop asks for its next inference right after appending a message.
        self._asked_at, self._waiting = trio.current_time(), True

    async def on_chunk(self, chunk: StreamChunk) -> None:
        if self._waiting and isinstance(chunk, TextDeltaChunk | ToolCallDeltaChunk):
            self.ttfts.append(trio.current_time() - self._asked_at)
            self._waiting = False
        if isinstance(chunk, FinalChunk):
            self.replied.set()

    async def run(self, session: Session) -> None:
        handle = await session.start(
            self.spec.workflow(tool_seconds=0.3), name=self.spec.name, priority=self.priority
        )
        try:
            result = await handle.send(
                self.spec.task,
                deadline=300,
                on_chunk=self.on_chunk,
                on_message=self.on_message,
            )
        except MODEL_FAILURES as exc:
            self.outcome = f"failed  {type(exc).__name__}"
        else:
            self.outcome = f"done    {result.output}"
        finally:
            self.replied.set()  # also when it ended without a reply: nobody waits forever


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sim", "local"], default="sim")
    parser.add_argument("--sim-speed", type=float, default=1.0, help="x the 0.5B model's speed")
    args = parser.parse_args(argv)
    background = [Agent(spec, BACKGROUND_PRIORITY) for spec in AGENTS if spec.background]
    voice = Agent(next(spec for spec in AGENTS if not spec.background), VOICE_PRIORITY)
    try:
        async with (
            open_client(args.backend, args.sim_speed) as client,
            Session.open(
                client,
                slot_policy="always",
                max_iterations=8,
                sampling=Sampling(temperature=0.2, max_tokens=256),
            ) as session,
        ):
            async with trio.open_nursery() as nursery:
                for agent in background:
                    nursery.start_soon(agent.run, session)
                # The voice request arrives once the slot is busy with background work.
                first_reply = trio.Event()
                for agent in background:
                    nursery.start_soon(_relay, agent.replied, first_reply)
                await first_reply.wait()
                await trio.sleep(0.2)
                print("voice request arrives")
                nursery.start_soon(voice.run, session)
            stats = await session.slot.stats()
    except (BackendError, BackendStartError) as exc:
        print(f"backend failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except ForgeError as exc:
        print(f"could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for agent in [*background, voice]:
        print(f"{agent.spec.name:<11} priority {agent.priority:>2}  {agent.outcome}")
    waits = ", ".join(f"priority {p}: {w.mean_s:.2f} s" for p, w in sorted(stats.waits.items()))
    print(f"slot: {stats.completed} inferences, {stats.preemptions} preemptions")
    print(f"mean queue wait: {waits}")
    background_ttfts = [t for agent in background for t in agent.ttfts]
    if voice.ttfts and background_ttfts:
        print(
            f"voice first token {voice.ttfts[0]:.2f} s after its request; background median "
            f"{statistics.median(background_ttfts):.2f} s"
        )
    return 0


async def _relay(source: trio.Event, target: trio.Event) -> None:
    """Set ``target`` once ``source`` is set (the first of several events wins)."""
    await source.wait()
    target.set()


if __name__ == "__main__":
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sys.exit(trio.run(main, sys.argv[1:]))
