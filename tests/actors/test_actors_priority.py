"""PriorityMailbox: lowest number first, FIFO within a priority, bounded, peekable."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from actors import Actor, ActorRef, ActorSystem, MailboxFullError, PriorityMailbox, handles


@dataclass(frozen=True)
class Job:
    label: str


@dataclass(frozen=True)
class Urgent:
    label: str
    priority: int


class Level(enum.IntEnum):
    HIGH = 0
    LOW = 9


@dataclass(frozen=True)
class Leveled:
    label: str
    priority: Level


@dataclass(frozen=True)
class Sloppy:
    priority: str = "high"


@dataclass
class Hold:
    entered: trio.Event = field(default_factory=trio.Event)
    release: trio.Event = field(default_factory=trio.Event)


class Scheduler(Actor):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    @handles(Job, Urgent, Leveled)
    async def on_job(self, msg: Job | Urgent | Leveled) -> str:
        self.log.append(msg.label)
        return msg.label

    @handles(Hold)
    async def on_hold(self, msg: Hold) -> None:
        msg.entered.set()
        await msg.release.wait()


async def busy_scheduler(
    system: ActorSystem, log: list[str], capacity: int = 16
) -> tuple[ActorRef[Any], Hold]:
    """Spawn a Scheduler and park it in a handler so sends queue up behind it."""
    hold = Hold()
    ref = await system.spawn(
        lambda: Scheduler(log), name="scheduler", mailbox=PriorityMailbox(capacity)
    )
    await ref.send(hold)
    await hold.entered.wait()
    return ref, hold


async def test_lower_priority_number_is_handled_first_fifo_within() -> None:
    """Messages come out by ascending priority, and in send order within one priority."""
    log: list[str] = []
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, log)
        for label, priority in [("c1", 5), ("a1", 1), ("c2", 5), ("b1", 3), ("a2", 1), ("d", 0)]:
            await ref.send(Job(label), priority=priority)
        hold.release.set()
    assert log == ["d", "a1", "a2", "b1", "c1", "c2"]


async def test_priority_comes_from_the_message_attribute_unless_overridden() -> None:
    """Without priority=, a message's own int priority attribute is used; an argument wins."""
    log: list[str] = []
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, log)
        await ref.send(Urgent("late", 7))
        await ref.send(Urgent("overridden", 7), priority=0)
        await ref.send(Leveled("enum", Level.HIGH))
        await ref.send(Job("default zero"))
        hold.release.set()
    assert log == ["overridden", "enum", "default zero", "late"]


async def test_a_non_int_priority_attribute_is_refused() -> None:
    """A message whose priority attribute is not an int raises TypeError at send."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Scheduler([]), mailbox=PriorityMailbox())
        with pytest.raises(
            TypeError, match=r"^Sloppy\.priority is 'high'; a priority must be an int"
        ):
            await ref.send(Sloppy())


async def test_asks_are_ordered_by_priority_too() -> None:
    """ask(priority=...) queues by priority like send."""
    log: list[str] = []
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, log)
        replies: list[str] = []

        async def ask(label: str, priority: int) -> None:
            replies.append(await ref.ask(Job(label), priority=priority))

        async with trio.open_nursery() as nursery:
            for label, priority in [("low", 9), ("high", 1)]:
                nursery.start_soon(ask, label, priority)
                await trio.testing.wait_all_tasks_blocked()
            hold.release.set()
    assert log == ["high", "low"]
    assert replies == ["high", "low"]


async def test_priority_mailbox_applies_backpressure() -> None:
    """A full priority mailbox makes send wait and send_nowait raise MailboxFullError."""
    log: list[str] = []
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, log, capacity=2)
        ref.send_nowait(Job("a"), priority=5)
        ref.send_nowait(Job("b"), priority=5)
        with pytest.raises(
            MailboxFullError, match=r"^mailbox of actor 'scheduler' is full \(2 messages\)"
        ):
            ref.send_nowait(Job("c"), priority=0)
        sent = trio.Event()

        async def blocked() -> None:
            await ref.send(Job("c"), priority=0)
            sent.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked)
            await trio.testing.wait_all_tasks_blocked()
            assert not sent.is_set()
            hold.release.set()
    assert log == ["a", "c", "b"]


async def test_waiting_senders_are_admitted_most_urgent_first() -> None:
    """When room frees up, the blocked sender with the lowest priority gets in first."""
    log: list[str] = []
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, log, capacity=1)
        await ref.send(Job("queued"), priority=5)
        async with trio.open_nursery() as nursery:
            for label, priority in [("low", 8), ("high", 2), ("mid", 4)]:
                nursery.start_soon(partial(ref.send, Job(label), priority=priority))
                await trio.testing.wait_all_tasks_blocked()
            hold.release.set()
    assert log == ["queued", "high", "mid", "low"]


async def test_a_cancelled_blocked_sender_is_not_delivered() -> None:
    """A sender cancelled while waiting for room never gets its message accepted."""
    log: list[str] = []
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, log, capacity=1)
        await ref.send(Job("queued"), priority=5)
        with trio.move_on_after(0) as scope:
            await ref.send(Job("gave up"), priority=0)
        assert scope.cancelled_caught
        hold.release.set()
    assert log == ["queued"]


async def test_queued_min_priority_peeks_at_the_most_urgent_message() -> None:
    """queued_min_priority() is the lowest priority queued, None when empty."""
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, [])
        assert ref.queued_min_priority() is None
        await ref.send(Job("x"), priority=6)
        await ref.send(Job("y"), priority=2)
        assert ref.queued_min_priority() == 2
        assert ref.queued == 2
        hold.release.set()


async def test_queued_min_priority_ignores_asks_whose_asker_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask that timed out no longer counts as queued work for the peek."""
    async with ActorSystem.open() as system:
        ref, hold = await busy_scheduler(system, [])
        await ref.send(Job("background"), priority=7)
        with trio.move_on_after(1):
            await ref.ask(Job("impatient"), priority=1)
        assert ref.queued_min_priority() == 7
        hold.release.set()


async def test_priority_mailbox_returns_undelivered_in_priority_order() -> None:
    """stop(mode="cancel") returns a priority mailbox's messages in the order they would run."""
    async with ActorSystem.open() as system:
        ref, _ = await busy_scheduler(system, [])
        for label, priority in [("b", 2), ("a", 1), ("c", 2)]:
            await ref.send(Job(label), priority=priority)
        undelivered = await system.stop(ref, mode="cancel")
    assert undelivered == [Job("a"), Job("b"), Job("c")]
