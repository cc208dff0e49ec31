"""Supervision: restarts, restart policies, intensity, backoff, escalation."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorCrashedError,
    ActorRef,
    ActorSystem,
    Backoff,
    EscalationError,
    RestartPolicy,
    StopKind,
    StopReason,
    Terminated,
    handles,
)


@dataclass(frozen=True)
class Bump:
    pass


@dataclass(frozen=True)
class Crash:
    pass


@dataclass(frozen=True)
class Leave:
    """Ask the actor to stop_self()."""


class Counter(Actor):
    """Counts Bumps; reports which incarnation it is; logs its lifecycle."""

    serial = itertools.count(1)

    def __init__(self, log: list[object]) -> None:
        self.log = log
        self.count = 0
        self.incarnation = next(Counter.serial)

    async def on_start(self) -> None:
        self.log.append(("start", self.incarnation))

    async def on_stop(self, reason: StopReason) -> None:
        self.log.append(("stop", self.incarnation, reason.kind))

    @handles(Bump)
    async def on_bump(self, msg: Bump) -> tuple[int, int]:
        self.count += 1
        return self.incarnation, self.count

    @handles(Crash)
    async def on_crash(self, msg: Crash) -> None:
        raise RuntimeError(f"crash in incarnation {self.incarnation}")

    @handles(Leave)
    async def on_leave(self, msg: Leave) -> None:
        self.context.stop_self()


@pytest.fixture(autouse=True)
def _fresh_serial() -> None:
    Counter.serial = itertools.count(1)


async def test_crash_restarts_a_fresh_instance(autojump_clock: trio.testing.MockClock) -> None:
    """After a crash the next message is handled by a new instance whose state starts over."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Counter(log))
        assert await ref.ask(Bump()) == (1, 1)
        assert await ref.ask(Bump()) == (1, 2)
        with pytest.raises(ActorCrashedError):
            await ref.ask(Crash())
        assert await ref.ask(Bump()) == (2, 1)
    assert log == [
        ("start", 1),
        ("stop", 1, StopKind.CRASHED),
        ("start", 2),
        ("stop", 2, StopKind.NORMAL),
    ]


async def test_crashing_message_is_consumed_not_redelivered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The message that crashed a handler is not given to the next instance."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Counter(log))
        await ref.send(Crash())
        assert await ref.ask(Bump()) == (2, 1)


async def test_messages_queued_during_a_crash_reach_the_next_instance(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The mailbox survives a restart: messages sent during backoff go to the new instance."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Counter(log), backoff=Backoff(initial=1.0))
        await ref.send(Crash())
        await trio.sleep(0.5)  # inside the 1 s backoff: no instance is running
        assert log[-1] == ("stop", 1, StopKind.CRASHED)
        await ref.send(Bump())
        await ref.send(Bump())
        assert await ref.ask(Bump()) == (2, 3)


async def test_backoff_grows_between_restarts(autojump_clock: trio.testing.MockClock) -> None:
    """Restarts wait initial * factor**(n-1) seconds, capped at maximum."""
    log: list[object] = []
    starts: list[float] = []

    class Timed(Counter):
        async def on_start(self) -> None:
            starts.append(trio.current_time())

    async with ActorSystem.open() as system:
        ref = await system.spawn(
            lambda: Timed(log),
            backoff=Backoff(initial=1.0, factor=2.0, maximum=3.0),
            max_restarts=10,
            within=100.0,
        )
        for _ in range(4):
            await ref.send(Crash())
        await ref.ask(Bump())
    assert starts == [0.0, 1.0, 3.0, 6.0, 9.0]


@pytest.mark.parametrize(
    ("policy", "ending", "restarted"),
    [
        (RestartPolicy.PERMANENT, Crash(), True),
        (RestartPolicy.PERMANENT, Leave(), True),
        (RestartPolicy.TRANSIENT, Crash(), True),
        (RestartPolicy.TRANSIENT, Leave(), False),
        (RestartPolicy.TEMPORARY, Crash(), False),
        (RestartPolicy.TEMPORARY, Leave(), False),
    ],
    ids=lambda value: getattr(value, "value", type(value).__name__),
)
async def test_restart_policy_decides_whether_an_ending_restarts(
    autojump_clock: trio.testing.MockClock,
    policy: RestartPolicy,
    ending: object,
    restarted: bool,
) -> None:
    """PERMANENT restarts after a crash or stop_self, TRANSIENT after a crash only, TEMPORARY never."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Counter(log), restart=policy)
        watcher = system.watch(ref)
        await ref.send(ending)
        if restarted:
            assert await ref.ask(Bump()) == (2, 1)
            assert ref.is_alive
        else:
            terminated = await watcher.wait()
            expected = StopKind.CRASHED if isinstance(ending, Crash) else StopKind.NORMAL
            assert expected is terminated.reason.kind
            assert not ref.is_alive


async def test_too_many_crashes_escalate_at_the_root(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """More than max_restarts crashes within the window end the actor as escalated, and the
    system's async with block raises EscalationError on exit."""
    seen: list[Terminated] = []

    async def crash_three_times() -> None:
        async with ActorSystem.open() as system:
            ref = await system.spawn(lambda: Counter([]), name="flaky", max_restarts=2, within=10.0)
            watcher = system.watch(ref)
            for _ in range(3):
                await ref.send(Crash())
            seen.append(await watcher.wait())

    with pytest.raises(
        EscalationError, match=r"^actor 'flaky' crashed more than 2 times within 10\.0s"
    ) as info:
        await crash_three_times()
    [terminated] = seen
    assert terminated.reason.kind is StopKind.ESCALATED
    assert isinstance(terminated.reason.error, RuntimeError)
    assert info.value.child == "flaky"
    assert info.value.__cause__ is terminated.reason.error


async def test_crashes_outside_the_window_do_not_escalate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Crashes spread wider than `within` seconds keep being restarted."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Counter(log), max_restarts=1, within=5.0)
        for _ in range(4):
            await ref.send(Crash())
            await trio.sleep(6.0)
        assert await ref.ask(Bump()) == (5, 1)


async def test_on_escalation_takes_root_escalations(autojump_clock: trio.testing.MockClock) -> None:
    """With on_escalation, a root escalation is handed to it and the block exits cleanly."""
    seen: list[EscalationError] = []
    async with ActorSystem.open(on_escalation=seen.append) as system:
        ref = await system.spawn(lambda: Counter([]), name="once", max_restarts=0)
        await ref.send(Crash())
        await system.watch(ref).wait()
    assert [error.child for error in seen] == ["once"]
    assert system.escalations == []


class Parent(Actor):
    """Spawns a flaky child in on_start, reports it on ``spawned``, logs its own stops."""

    def __init__(
        self, log: list[object], spawned: trio.MemorySendChannel[ActorRef[object]]
    ) -> None:
        self.log = log
        self.spawned = spawned

    async def on_start(self) -> None:
        child = await self.context.spawn(
            lambda: Counter(self.log), name="child", max_restarts=1, within=10.0
        )
        self.spawned.send_nowait(child)

    async def on_stop(self, reason: StopReason) -> None:
        self.log.append(("parent stop", reason.kind, reason.error))


def child_channel() -> tuple[
    trio.MemorySendChannel[ActorRef[object]], trio.MemoryReceiveChannel[ActorRef[object]]
]:
    return trio.open_memory_channel[ActorRef[object]](math.inf)


async def test_escalation_crashes_the_parent_which_restarts_per_its_policy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child that exceeds its intensity crashes its parent with EscalationError; the
    parent restarts and spawns a fresh child."""
    log: list[object] = []
    spawned, children = child_channel()
    async with ActorSystem.open() as system:
        parent = await system.spawn(lambda: Parent(log, spawned), name="parent")
        first_child = await children.receive()
        child_watch = system.watch(first_child)
        await first_child.send(Crash())
        await first_child.send(Crash())
        assert (await child_watch.wait()).reason.kind is StopKind.ESCALATED
        second_child = await children.receive()
        assert parent.is_alive
        assert second_child is system.lookup("child")
        assert await second_child.ask(Bump()) == (3, 1)
    parent_stops = [
        entry for entry in log if isinstance(entry, tuple) and entry[0] == "parent stop"
    ]
    _, kind, error = parent_stops[0]
    assert kind is StopKind.CRASHED
    assert isinstance(error, EscalationError)
    assert error.child == "child"
    assert isinstance(error.__cause__, RuntimeError)


async def test_escalation_from_a_temporary_parent_stops_it_as_crashed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A TEMPORARY parent crashed by an escalation stops for good; watchers see the EscalationError."""
    spawned, children = child_channel()
    async with ActorSystem.open() as system:
        parent = await system.spawn(
            lambda: Parent([], spawned), name="parent", restart=RestartPolicy.TEMPORARY
        )
        watcher = system.watch(parent)
        child = await children.receive()
        for _ in range(2):
            await child.send(Crash())
        terminated = await watcher.wait()
        assert terminated.reason.kind is StopKind.CRASHED
        assert isinstance(terminated.reason.error, EscalationError)
        assert system.escalations == []


async def test_escalation_climbs_to_the_root_through_parents(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A parent that itself exceeds its intensity because of escalations escalates further up."""
    spawned, children = child_channel()

    async def escalate_twice() -> None:
        async with ActorSystem.open() as system:
            parent = await system.spawn(lambda: Parent([], spawned), name="parent", max_restarts=0)
            child = await children.receive()
            for _ in range(2):
                await child.send(Crash())
            await system.watch(parent).wait()

    with pytest.raises(EscalationError) as info:
        await escalate_twice()
    assert info.value.child == "parent"
    assert isinstance(info.value.error, EscalationError)
    assert info.value.error.child == "child"


async def test_a_failing_factory_counts_as_a_crash(autojump_clock: trio.testing.MockClock) -> None:
    """A factory that raises on restart is treated as another crash (and can escalate)."""
    calls = itertools.count()

    def factory() -> Counter:
        if next(calls) > 0:
            raise OSError("cannot build")
        return Counter([])

    seen: list[EscalationError] = []
    async with ActorSystem.open(on_escalation=seen.append) as system:
        ref = await system.spawn(factory, name="fragile", max_restarts=2)
        await ref.send(Crash())
        terminated = await system.watch(ref).wait()
    assert StopKind.ESCALATED is terminated.reason.kind
    assert isinstance(terminated.reason.error, OSError)
    assert next(calls) == 3


async def test_on_start_crash_is_supervised(autojump_clock: trio.testing.MockClock) -> None:
    """An exception from on_start is a crash: on_stop runs and the actor restarts."""
    log: list[object] = []

    class Shaky(Counter):
        async def on_start(self) -> None:
            await super().on_start()
            if self.incarnation == 1:
                raise RuntimeError("bad start")

    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Shaky(log))
        assert await ref.ask(Bump()) == (2, 1)
    assert log[:3] == [("start", 1), ("stop", 1, StopKind.CRASHED), ("start", 2)]


def test_backoff_rejects_shrinking_or_negative_delays() -> None:
    """Backoff validates its parameters with messages saying what is allowed."""
    with pytest.raises(ValueError, match=r"^Backoff factor must be >= 1"):
        Backoff(factor=0.5)
    with pytest.raises(ValueError, match=r"^Backoff delays must be >= 0"):
        Backoff(initial=-1)
    assert [Backoff().delay(n) for n in (1, 2, 3)] == [0.01, 0.02, 0.04]


async def test_an_escalation_during_the_parents_restart_is_not_counted_twice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child escalating while its parent is already restarting does not crash the parent's
    next incarnation: that restart is what the escalation asked for."""
    release_younger = trio.Event()
    spawned, children = child_channel()
    builds: list[int] = []

    class SlowToStop(Counter):
        async def on_stop(self, reason: StopReason) -> None:
            await release_younger.wait()

    class Household(Counter):
        def __init__(self) -> None:
            super().__init__([])
            builds.append(self.incarnation)

        async def on_start(self) -> None:
            older = await self.context.spawn(lambda: Counter([]), max_restarts=0)
            await self.context.spawn(lambda: SlowToStop([]))
            spawned.send_nowait(older)

    async with ActorSystem.open() as system:
        parent = await system.spawn(Household, name="household")
        older = await children.receive()
        await parent.send(Crash())  # the parent now stops its children, youngest first
        await trio.testing.wait_all_tasks_blocked()
        await older.send(Crash())  # the older child gives up meanwhile
        await system.watch(older).wait()
        release_younger.set()
        await children.receive()
        assert parent.is_alive
        assert len(builds) == 2
