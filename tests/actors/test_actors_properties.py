"""Property tests: random interleavings of sends, asks, crashes and stops lose nothing.

Each example runs a whole actor system under ``trio.run`` with an autojumping MockClock, so
timing-dependent interleavings (timeouts, backoffs, handler delays) are explored without real
sleeps, and every example is reproducible.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actors import (
    Actor,
    ActorCrashedError,
    ActorStoppedError,
    ActorSystem,
    AskTimeoutError,
    Backoff,
    DeadLetter,
    EscalationError,
    FifoMailbox,
    MailboxFullError,
    PriorityMailbox,
    RestartPolicy,
    handles,
)

MS = 0.001


@dataclass(frozen=True)
class Msg:
    id: int
    crash: bool
    work: int


class Boom(Exception):
    pass


class Subject(Actor):
    """Records every message it is handed before doing anything else with it."""

    def __init__(self, handled: list[int]) -> None:
        self.handled = handled

    @handles(Msg)
    async def on_msg(self, msg: Msg) -> int:
        self.handled.append(msg.id)
        if msg.work:
            await trio.sleep(msg.work * MS)
        if msg.crash:
            raise Boom(msg.id)
        return msg.id


@dataclass(frozen=True)
class Op:
    kind: Literal["send", "send_nowait", "ask"]
    crash: bool
    work: int
    delay: int
    priority: int
    timeout: int | None


@dataclass(frozen=True)
class Scenario:
    senders: list[list[Op]]
    priority_mailbox: bool
    capacity: int
    policy: RestartPolicy
    max_restarts: int
    stop_at: int | None
    stop_mode: Literal["drain", "cancel"]
    shutdown: Literal["drain", "cancel"]


ops = st.builds(
    Op,
    kind=st.sampled_from(["send", "send_nowait", "ask"]),
    crash=st.booleans(),
    work=st.integers(0, 2),
    delay=st.integers(0, 3),
    priority=st.integers(0, 3),
    timeout=st.one_of(st.none(), st.integers(1, 6)),
)

scenarios = st.builds(
    Scenario,
    senders=st.lists(st.lists(ops, max_size=10), min_size=1, max_size=3),
    priority_mailbox=st.booleans(),
    capacity=st.integers(1, 4),
    policy=st.sampled_from(list(RestartPolicy)),
    max_restarts=st.integers(0, 6),
    stop_at=st.one_of(st.none(), st.integers(0, 25)),
    stop_mode=st.sampled_from(["drain", "cancel"]),
    shutdown=st.sampled_from(["drain", "cancel"]),
)


@dataclass
class Record:
    handled: list[int] = field(default_factory=list)
    accepted_tells: set[int] = field(default_factory=set)
    messages: dict[int, Msg] = field(default_factory=dict)
    ask_outcomes: dict[int, str] = field(default_factory=dict)
    returned: list[Any] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)


async def run_scenario(scenario: Scenario, record: Record) -> None:
    ids = itertools.count()
    escalations: list[EscalationError] = []
    with trio.fail_after(10_000):
        async with ActorSystem.open(
            shutdown=scenario.shutdown,
            on_escalation=escalations.append,
            on_dead_letter=record.dead.append,
        ) as system:
            ref = await system.spawn(
                lambda: Subject(record.handled),
                mailbox=PriorityMailbox(scenario.capacity)
                if scenario.priority_mailbox
                else FifoMailbox(scenario.capacity),
                restart=scenario.policy,
                max_restarts=scenario.max_restarts,
                within=20 * MS,
                backoff=Backoff(initial=1 * MS, maximum=4 * MS),
            )

            async def sender(script: list[Op]) -> None:
                for op in script:
                    await trio.sleep(op.delay * MS)
                    msg = Msg(next(ids), op.crash, op.work)
                    record.messages[msg.id] = msg
                    priority = op.priority if scenario.priority_mailbox else None
                    if op.kind == "ask":
                        timeout = None if op.timeout is None else op.timeout * MS
                        try:
                            await ref.ask(msg, timeout=timeout, priority=priority)
                        except ActorCrashedError:
                            record.ask_outcomes[msg.id] = "crashed"
                        except ActorStoppedError:
                            record.ask_outcomes[msg.id] = "stopped"
                        except AskTimeoutError:
                            record.ask_outcomes[msg.id] = "timeout"
                        else:
                            record.ask_outcomes[msg.id] = "reply"
                        continue
                    try:
                        if op.kind == "send":
                            await ref.send(msg, priority=priority)
                        else:
                            ref.send_nowait(msg, priority=priority)
                    except (ActorStoppedError, MailboxFullError):
                        continue
                    record.accepted_tells.add(msg.id)

            async def stopper(at: int) -> None:
                await trio.sleep(at * MS)
                record.returned.extend(await system.stop(ref, mode=scenario.stop_mode))

            async with trio.open_nursery() as nursery:
                for script in scenario.senders:
                    nursery.start_soon(sender, script)
                if scenario.stop_at is not None:
                    nursery.start_soon(stopper, scenario.stop_at)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios)
def test_no_accepted_message_is_lost_or_duplicated(scenario: Scenario) -> None:
    """Every accepted tell is handled, returned by stop() or dead-lettered exactly once; every
    ask gets one outcome consistent with what happened to its message."""
    record = Record()
    trio.run(run_scenario, scenario, record, clock=trio.testing.MockClock(autojump_threshold=0))
    handled = Counter(record.handled)
    for outcome in set(record.ask_outcomes.values()):
        event(f"ask {outcome}")
    event(f"returned by stop: {bool(record.returned)}")
    event(f"dead letters: {bool(record.dead)}")
    event(f"crashes handled: {any(record.messages[i].crash for i in record.handled)}")
    returned = Counter(message.id for message in record.returned)
    dead = Counter(letter.message.id for letter in record.dead)
    assert all(count == 1 for count in handled.values()), "a message was handled twice"
    assert all(count == 1 for count in returned.values()), "a message was returned twice"
    for msg_id, msg in record.messages.items():
        fates = handled[msg_id] + returned[msg_id] + dead[msg_id]
        outcome = record.ask_outcomes.get(msg_id)
        if outcome is None and msg_id in record.accepted_tells:
            assert fates == 1, f"accepted tell {msg} had {fates} fates"
        elif outcome is None:
            assert fates == 0, f"refused tell {msg} was delivered"
        elif outcome == "reply":
            assert (handled[msg_id], fates) == (1, 1)
            assert not msg.crash
        elif outcome == "crashed":
            assert (handled[msg_id], fates) == (1, 1)
            assert msg.crash
        else:  # stopped or timeout: at most one fate (it may have started, or be listed)
            assert fates <= 1, f"ask {msg} ({outcome}) had {fates} fates"


@settings(max_examples=100, deadline=None)
@given(priorities=st.lists(st.integers(-3, 3), max_size=30))
def test_priority_mailbox_order_is_priority_then_fifo(priorities: list[int]) -> None:
    """Whatever priorities are queued, they are handled sorted by (priority, send order)."""
    handled: list[int] = []

    async def main() -> None:
        gate = trio.Event()

        class Gated(Subject):
            async def on_start(self) -> None:
                await gate.wait()

        async with ActorSystem.open() as system, trio.open_nursery() as nursery:
            # spawn() returns once on_start has, so spawn in the background and fill the
            # mailbox while on_start holds the actor back.
            nursery.start_soon(
                partial(system.spawn, lambda: Gated(handled), mailbox=PriorityMailbox(64))
            )
            await trio.testing.wait_all_tasks_blocked()
            [ref] = system.actors
            for index, priority in enumerate(priorities):
                ref.send_nowait(Msg(index, crash=False, work=0), priority=priority)
            gate.set()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    expected = [index for _, index in sorted((p, i) for i, p in enumerate(priorities))]
    assert handled == expected
