"""Throughput of the actor kernel against raw trio channels, measured in the same run.

    python bench/actors_bench.py [--messages N] [--asks N] [--repeat N]

tell: messages/s through an actor whose handler does nothing, against a raw memory channel
(same capacity as the default mailbox) drained by one consumer task.
ask: round trips/s of ``ActorRef.ask`` against a raw request/reply over a memory channel with
a ``trio.Event`` per request.
tell (PriorityMailbox): the tell figure with the heap-based mailbox, for information.

Each figure is the median of several repetitions; the ratio is what matters, since both sides
run on the same interpreter and machine. Goals: tell >= 0.5x raw, ask >= 0.3x raw.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import (
    DEFAULT_CAPACITY,
    Actor,
    ActorSystem,
    FifoMailbox,
    Mailbox,
    PriorityMailbox,
    handles,
)


class Msg:
    __slots__ = ()


class Sink(Actor):
    """Does nothing with each message, so the kernel's own cost is what gets measured."""

    @handles(Msg)
    async def on_msg(self, msg: Msg) -> None:
        return None


async def raw_tell(n: int) -> float:
    send, receive = trio.open_memory_channel[Msg](DEFAULT_CAPACITY)
    msg = Msg()

    async def consume() -> None:
        async with receive:
            async for _ in receive:
                pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        start = time.perf_counter()
        async with send:
            for _ in range(n):
                await send.send(msg)
    return n / (time.perf_counter() - start)


async def actor_tell(n: int, mailbox: Callable[[], Mailbox] = FifoMailbox) -> float:
    msg = Msg()
    async with ActorSystem.open() as system:
        ref = await system.spawn(Sink, mailbox=mailbox())
        start = time.perf_counter()
        for _ in range(n):
            await ref.send(msg)
        await system.stop(ref)  # drain: returns once every message was handled
        elapsed = time.perf_counter() - start
    return n / elapsed


async def actor_tell_priority(n: int) -> float:
    return await actor_tell(n, PriorityMailbox)


async def raw_ask(n: int) -> float:
    send, receive = trio.open_memory_channel[tuple[Msg, list[Any], trio.Event]](DEFAULT_CAPACITY)
    msg = Msg()

    async def serve() -> None:
        async with receive:
            async for _request, reply, event in receive:
                reply.append(None)
                event.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        start = time.perf_counter()
        async with send:
            for _ in range(n):
                reply: list[Any] = []
                event = trio.Event()
                await send.send((msg, reply, event))
                await event.wait()
    return n / (time.perf_counter() - start)


async def actor_ask(n: int) -> float:
    msg = Msg()
    async with ActorSystem.open() as system:
        ref = await system.spawn(Sink)
        start = time.perf_counter()
        for _ in range(n):
            await ref.ask(msg)
        elapsed = time.perf_counter() - start
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--asks", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    rows = []
    for label, unit, raw_fn, actor_fn, n, goal in (
        ("tell", "msg/s", raw_tell, actor_tell, args.messages, 0.5),
        ("ask", "asks/s", raw_ask, actor_ask, args.asks, 0.3),
        ("tell (PriorityMailbox)", "msg/s", raw_tell, actor_tell_priority, args.messages, None),
    ):
        # Interleave the two sides per repetition so drift in machine load hits both alike.
        raw_rates, actor_rates = [], []
        for _ in range(args.repeat):
            raw_rates.append(trio.run(raw_fn, n))
            actor_rates.append(trio.run(actor_fn, n))
        raw = statistics.median(raw_rates)
        actor = statistics.median(actor_rates)
        goal_note = "no goal, for information" if goal is None else f"goal >= {goal}"
        rows.append(
            f"{label}: {actor:.0f} {unit} vs raw {raw:.0f} {unit} -> ratio {actor / raw:.2f} "
            f"({goal_note})"
        )
    print(f"median of {args.repeat} runs, python {sys.version.split()[0]}, trio {trio.__version__}")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
