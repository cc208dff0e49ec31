"""Stopping: drain vs cancel, undelivered messages, death watch, stop_self, shutdown."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorCrashedError,
    ActorStoppedError,
    ActorSystem,
    DeadLetter,
    FifoMailbox,
    RestartPolicy,
    StopKind,
    StopReason,
    SystemClosedError,
    Terminated,
    handles,
)


@dataclass(frozen=True)
class Item:
    n: int


@dataclass
class Hold:
    entered: trio.Event = field(default_factory=trio.Event)
    release: trio.Event = field(default_factory=trio.Event)


@dataclass(frozen=True)
class Crash:
    pass


@dataclass(frozen=True)
class Leave:
    pass


class Worker(Actor):
    def __init__(self, log: list[object], name: str = "worker") -> None:
        self.log = log
        self.name = name

    async def on_stop(self, reason: StopReason) -> None:
        self.log.append((self.name, "stop", reason.kind))

    @handles(Item)
    async def on_item(self, msg: Item) -> int:
        self.log.append(msg)
        return msg.n

    @handles(Hold)
    async def on_hold(self, msg: Hold) -> None:
        msg.entered.set()
        await msg.release.wait()

    @handles(Crash)
    async def on_crash(self, msg: Crash) -> None:
        raise RuntimeError("crash")

    @handles(Leave)
    async def on_leave(self, msg: Leave) -> None:
        self.context.stop_self()


async def test_drain_stop_handles_queued_messages_then_stops() -> None:
    """stop(mode="drain") refuses new sends, handles what is queued, then runs on_stop."""
    log: list[object] = []
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker(log), name="drainer")
        await ref.send(hold)
        await hold.entered.wait()
        for n in range(3):
            await ref.send(Item(n))
        async with trio.open_nursery() as nursery:
            results: list[list[object]] = []

            async def stop() -> None:
                results.append(await system.stop(ref, mode="drain"))

            nursery.start_soon(stop)
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(
                ActorStoppedError, match=r"^actor 'drainer' is stopping and accepts no new messages"
            ):
                await ref.send(Item(99))
            assert ref.is_alive
            hold.release.set()
    assert results == [[]]
    assert log == [Item(0), Item(1), Item(2), ("worker", "stop", StopKind.NORMAL)]
    assert not ref.is_alive


async def test_cancel_stop_returns_undelivered_messages_and_fails_askers() -> None:
    """stop(mode="cancel") cancels the running handler, returns queued messages in order,
    and fails every pending asker with ActorStoppedError."""
    log: list[object] = []
    hold = Hold()
    outcomes: dict[str, BaseException] = {}
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker(log), name="canceller")

        async def ask(key: str, message: object) -> None:
            with pytest.raises(ActorStoppedError) as info:
                await ref.ask(message)
            outcomes[key] = info.value

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "running", hold)
            await hold.entered.wait()
            await ref.send(Item(1))
            nursery.start_soon(ask, "queued", Item(2))
            await trio.testing.wait_all_tasks_blocked()
            await ref.send(Item(3))
            undelivered = await system.stop(ref, mode="cancel")
    assert undelivered == [Item(1), Item(2), Item(3)]
    assert log == [("worker", "stop", StopKind.CANCELLED)]
    assert str(outcomes["running"]) == (
        "actor 'canceller' was cancelled while handling Hold, so it will not reply; "
        "the handler did not finish"
    )
    assert str(outcomes["queued"]) == (
        "actor 'canceller' stopped (cancelled) before handling Item; the message was not handled"
    )


async def test_a_sender_waiting_for_room_is_refused_by_a_stop() -> None:
    """A sender blocked on a full mailbox gets ActorStoppedError when the actor stops, and its
    message is not among the undelivered ones (it was never accepted)."""
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker([]), mailbox=FifoMailbox(capacity=1))
        await ref.send(hold)
        await hold.entered.wait()
        await ref.send(Item(1))
        refused: list[ActorStoppedError] = []

        async def blocked_sender() -> None:
            with pytest.raises(ActorStoppedError) as info:
                await ref.send(Item(2))
            refused.append(info.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked_sender)
            await trio.testing.wait_all_tasks_blocked()
            assert await system.stop(ref, mode="cancel") == [Item(1)]
    assert len(refused) == 1


async def test_stopping_a_stopped_actor_returns_nothing() -> None:
    """A second stop() of the same actor returns [] without error."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker([]))
        await system.stop(ref, mode="cancel")
        assert await system.stop(ref) == []


async def test_a_stop_caller_that_is_cancelled_leaves_undelivered_to_dead_letters() -> None:
    """If the stop() caller is cancelled before the actor ends, undelivered messages become
    dead letters instead of vanishing."""
    hold = Hold()

    class SlowStop(Worker):
        async def on_stop(self, reason: StopReason) -> None:
            await trio.sleep_forever()

    async with ActorSystem.open(shutdown="cancel") as system:
        ref = await system.spawn(lambda: SlowStop([]), name="slow")
        await ref.send(hold)
        await hold.entered.wait()
        await ref.send(Item(7))
        with trio.CancelScope() as scope:

            async def cancel_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_soon)
                await system.stop(ref, mode="cancel")
    assert scope.cancelled_caught
    assert system.dead_letters == [DeadLetter("slow", Item(7))]


async def test_an_actor_cannot_await_its_own_stop() -> None:
    """system.stop(self_ref) from inside a handler raises and points to stop_self()."""

    class Suicidal(Actor):
        @handles(Item)
        async def on_item(self, msg: Item) -> None:
            await self.context.system.stop(self.context.self_ref)

    async with ActorSystem.open() as system:
        ref = await system.spawn(Suicidal, name="self")
        with pytest.raises(ActorCrashedError) as info:
            await ref.ask(Item(0))
        assert str(info.value.__cause__) == (
            "actor 'self' cannot await its own stop; call self.context.stop_self() to stop "
            "after the current message"
        )


@pytest.mark.parametrize(
    ("how", "kind"),
    [
        ("drain", StopKind.NORMAL),
        ("cancel", StopKind.CANCELLED),
        ("crash", StopKind.CRASHED),
        ("stop_self", StopKind.NORMAL),
    ],
)
async def test_death_watch_reports_why_an_actor_stopped(how: str, kind: StopKind) -> None:
    """system.watch(ref).wait() returns Terminated with the reason the actor ended."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker([]), restart=RestartPolicy.TEMPORARY)
        watcher = system.watch(ref)
        if how in ("drain", "cancel"):
            await system.stop(ref, mode=how)  # type: ignore[arg-type]
        elif how == "crash":
            await ref.send(Crash())
        else:
            await ref.send(Leave())
        terminated = await watcher.wait()
    assert terminated.ref is ref
    assert terminated.reason.kind is kind
    if kind is StopKind.CRASHED:
        assert isinstance(terminated.reason.error, RuntimeError)
    else:
        assert terminated.reason.error is None


async def test_watching_a_stopped_actor_returns_at_once() -> None:
    """A watch started after the actor stopped still gives its Terminated notice."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker([]))
        await system.stop(ref)
        assert (await system.watch(ref).wait()).reason.kind is StopKind.NORMAL


class Watchdog(Actor):
    """Watches a ref given in on_start and forwards Terminated notices to a channel."""

    def __init__(self, target: object, out: trio.MemorySendChannel[Terminated]) -> None:
        self.target = target
        self.out = out

    async def on_start(self) -> None:
        self.context.watch(self.target)  # type: ignore[arg-type]

    @handles(Terminated)
    async def on_terminated(self, msg: Terminated) -> None:
        self.out.send_nowait(msg)


async def test_an_actor_watching_another_receives_terminated() -> None:
    """context.watch(ref) delivers a Terminated message to the watching actor."""
    send, receive = trio.open_memory_channel[Terminated](1)
    async with ActorSystem.open() as system:
        target = await system.spawn(lambda: Worker([]), name="target")
        await system.spawn(lambda: Watchdog(target, send))
        await system.stop(target, mode="cancel")
        notice = await receive.receive()
    assert notice.ref is target
    assert notice.reason.kind is StopKind.CANCELLED


async def test_stop_self_leaves_queued_messages_as_dead_letters() -> None:
    """After stop_self() a non-permanent actor stops; messages still queued become dead
    letters and their askers get ActorStoppedError."""
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker([]), name="quitter")
        await ref.send(hold)
        await hold.entered.wait()
        await ref.send(Leave())
        await ref.send(Item(1))
        async with trio.open_nursery() as nursery:

            async def ask_late() -> None:
                with pytest.raises(ActorStoppedError):
                    await ref.ask(Item(2))

            nursery.start_soon(ask_late)
            await trio.testing.wait_all_tasks_blocked()
            hold.release.set()
            await system.watch(ref).wait()
    assert system.dead_letters == [DeadLetter("quitter", Item(1)), DeadLetter("quitter", Item(2))]


class Family(Actor):
    """Spawns two children in on_start."""

    def __init__(self, log: list[object]) -> None:
        self.log = log

    async def on_start(self) -> None:
        for name in ("older", "younger"):
            await self.context.spawn(lambda name=name: Worker(self.log, name), name=name)

    async def on_stop(self, reason: StopReason) -> None:
        self.log.append(("family", "stop", reason.kind))


@pytest.mark.parametrize(
    ("mode", "kind"), [("drain", StopKind.NORMAL), ("cancel", StopKind.CANCELLED)]
)
async def test_stopping_a_parent_stops_its_children_first(mode: str, kind: StopKind) -> None:
    """A parent's stop stops its children youngest first, in the same mode, before on_stop."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        family = await system.spawn(lambda: Family(log))
        assert [child.name for child in family._cell.context.children] == ["older", "younger"]
        await system.stop(family, mode=mode)  # type: ignore[arg-type]
        assert [ref.name for ref in system.actors] == []
    assert log == [("younger", "stop", kind), ("older", "stop", kind), ("family", "stop", kind)]


async def test_leaving_the_block_drains_every_actor() -> None:
    """On a normal exit the system drains top-level actors, youngest first."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        first = await system.spawn(lambda: Worker(log, "first"))
        second = await system.spawn(lambda: Worker(log, "second"))
        for n in range(3):
            await first.send(Item(n))
            await second.send(Item(10 + n))
    assert log[-2:] == [("second", "stop", StopKind.NORMAL), ("first", "stop", StopKind.NORMAL)]
    assert sorted(entry.n for entry in log if isinstance(entry, Item)) == [0, 1, 2, 10, 11, 12]


async def test_shutdown_cancel_leaves_queued_messages_as_dead_letters() -> None:
    """With shutdown="cancel" queued messages are not handled but recorded as dead letters."""
    hold = Hold()
    async with ActorSystem.open(shutdown="cancel") as system:
        ref = await system.spawn(lambda: Worker([]), name="busy")
        await ref.send(hold)
        await hold.entered.wait()
        await ref.send(Item(1))
    assert system.dead_letters == [DeadLetter("busy", Item(1))]


async def test_an_exception_in_the_block_cancels_actors_and_propagates_as_itself() -> None:
    """A failing block cancels every actor (on_stop sees CANCELLED) and raises its own
    exception, not an ExceptionGroup."""
    log: list[object] = []

    async def fail_inside() -> None:
        async with ActorSystem.open() as system:
            await system.spawn(lambda: Worker(log))
            raise KeyError("boom")

    with pytest.raises(KeyError, match=r"^'boom'$"):
        await fail_inside()
    assert log == [("worker", "stop", StopKind.CANCELLED)]


async def test_spawn_after_shutdown_raises() -> None:
    """spawn() on a system that has shut down raises SystemClosedError."""
    async with ActorSystem.open() as system:
        pass
    with pytest.raises(SystemClosedError, match=r"^the ActorSystem is shutting down"):
        await system.spawn(lambda: Worker([]))


async def test_on_stop_failure_makes_a_graceful_stop_a_crash() -> None:
    """An exception raised by on_stop is not dropped: the actor's end is reported as a crash."""

    class BadStop(Worker):
        async def on_stop(self, reason: StopReason) -> None:
            raise OSError("cannot flush")

    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: BadStop([]))
        watcher = system.watch(ref)
        await system.stop(ref)
        terminated = await watcher.wait()
    assert terminated.reason.kind is StopKind.CRASHED
    assert isinstance(terminated.reason.error, OSError)


async def test_dead_letters_can_go_to_a_callback() -> None:
    """on_dead_letter receives dead letters instead of the dead_letters list."""
    letters: list[DeadLetter] = []
    hold = Hold()
    async with ActorSystem.open(shutdown="cancel", on_dead_letter=letters.append) as system:
        ref = await system.spawn(lambda: Worker([]), name="w")
        await ref.send(hold)
        await hold.entered.wait()
        await ref.send(Item(5))
    assert letters == [DeadLetter("w", Item(5))]
    assert system.dead_letters == []


async def test_permanent_actor_restarts_after_stop_self_and_keeps_its_mailbox(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A PERMANENT actor that calls stop_self() is restarted; queued messages reach the new one."""
    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Worker(log), restart=RestartPolicy.PERMANENT)
        await ref.send(Leave())
        assert await ref.ask(Item(1)) == 1
        assert ref.is_alive
    assert log == [
        ("worker", "stop", StopKind.NORMAL),
        Item(1),
        ("worker", "stop", StopKind.NORMAL),
    ]


async def test_an_actor_asking_itself_fails_instead_of_deadlocking() -> None:
    """ask() on an actor's own ref from its handler raises rather than waiting forever."""

    class Narcissist(Actor):
        @handles(Item)
        async def on_item(self, msg: Item) -> None:
            await self.context.self_ref.ask(Leave())

    async with ActorSystem.open() as system:
        ref = await system.spawn(Narcissist, name="echo")
        with pytest.raises(ActorCrashedError) as info:
            await ref.ask(Item(0))
        assert str(info.value.__cause__) == (
            "actor 'echo' asked itself and would wait forever for its own reply; call the "
            "method directly, or send() the message"
        )


async def test_cancelling_the_block_from_outside_cancels_the_actors() -> None:
    """An outer cancel scope around the system cancels every actor and is absorbed by its scope."""
    log: list[object] = []
    with trio.move_on_after(0) as scope:
        async with ActorSystem.open() as system:
            await system.spawn(lambda: Worker(log))
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert log == [("worker", "stop", StopKind.CANCELLED)]


async def test_a_cancel_stop_forces_an_on_stop_that_hangs() -> None:
    """A second stop(mode="cancel") cancels an on_stop() that does not return."""

    class Stuck(Worker):
        async def on_stop(self, reason: StopReason) -> None:
            self.log.append("stopping")
            await trio.sleep_forever()

    log: list[object] = []
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Stuck(log))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(system.stop, ref)
            await trio.testing.wait_all_tasks_blocked()
            assert log == ["stopping"]
            assert await system.stop(ref, mode="cancel") == []
        assert not ref.is_alive
