"""Sending, asking and dispatch: ordering, backpressure, replies, timeouts, cancellation."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from actors import (
    Actor,
    ActorCrashedError,
    ActorNotFoundError,
    ActorStoppedError,
    ActorSystem,
    AskTimeoutError,
    DuplicateActorNameError,
    FifoMailbox,
    MailboxFullError,
    UnhandledMessageError,
    handles,
)


@dataclass(frozen=True)
class Note:
    sender: int
    seq: int


@dataclass(frozen=True)
class Echo:
    value: object


@dataclass
class Hold:
    """Blocks the handler until ``release`` is set; ``entered`` tells the test it got there."""

    entered: trio.Event = field(default_factory=trio.Event)
    release: trio.Event = field(default_factory=trio.Event)


@dataclass(frozen=True)
class Fail:
    reason: str


class Recorder(Actor):
    def __init__(self, log: list[object]) -> None:
        self.log = log

    @handles(Note)
    async def on_note(self, msg: Note) -> None:
        self.log.append(msg)

    @handles(Echo)
    async def on_echo(self, msg: Echo) -> object:
        self.log.append(msg)
        return msg.value

    @handles(Hold)
    async def on_hold(self, msg: Hold) -> str:
        self.log.append("hold")
        msg.entered.set()
        await msg.release.wait()
        return "released"

    @handles(Fail)
    async def on_fail(self, msg: Fail) -> None:
        raise ValueError(msg.reason)


async def test_messages_from_one_sender_arrive_in_send_order() -> None:
    """Each sender's messages are handled in the order it sent them, despite interleaving."""
    log: list[object] = []
    with trio.fail_after(5):
        async with ActorSystem.open() as system:
            ref = await system.spawn(lambda: Recorder(log), mailbox=FifoMailbox(capacity=3))

            async def sender(sender_id: int) -> None:
                for seq in range(40):
                    await ref.send(Note(sender_id, seq))
                    if seq % 7 == 0:
                        await trio.lowlevel.checkpoint()

            async with trio.open_nursery() as nursery:
                for sender_id in range(3):
                    nursery.start_soon(sender, sender_id)
    for sender_id in range(3):
        seqs = [note.seq for note in log if isinstance(note, Note) and note.sender == sender_id]
        assert list(range(40)) == seqs


async def test_send_blocks_while_mailbox_is_full() -> None:
    """A sender waits in send() while the mailbox is full and continues once there is room."""
    log: list[object] = []
    hold = Hold()
    with trio.fail_after(5):
        async with ActorSystem.open() as system:
            ref = await system.spawn(lambda: Recorder(log), mailbox=FifoMailbox(capacity=2))
            await ref.send(hold)
            await hold.entered.wait()
            await ref.send(Note(0, 0))
            await ref.send(Note(0, 1))
            sent = trio.Event()

            async def third() -> None:
                await ref.send(Note(0, 2))
                sent.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(third)
                await trio.testing.wait_all_tasks_blocked()
                assert not sent.is_set()
                assert ref.queued == 2
                hold.release.set()
            assert sent.is_set()
    assert ["hold", Note(0, 0), Note(0, 1), Note(0, 2)] == log


async def test_send_nowait_raises_when_mailbox_is_full() -> None:
    """send_nowait on a full mailbox raises MailboxFullError naming the actor and capacity."""
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="busy", mailbox=FifoMailbox(capacity=1))
        ref.send_nowait(hold)
        await hold.entered.wait()
        ref.send_nowait(Note(0, 0))
        with pytest.raises(
            MailboxFullError,
            match=r"^mailbox of actor 'busy' is full \(1 messages\); await send\(\) to wait for room",
        ):
            ref.send_nowait(Note(0, 1))
        hold.release.set()


async def test_ask_returns_the_handler_result() -> None:
    """ask() returns what the handler returned."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]))
        assert await ref.ask(Echo(42)) == 42


async def test_ask_timeout_raises_and_skips_the_unstarted_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask that times out before its handler starts raises AskTimeoutError and is skipped."""
    log: list[object] = []
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder(log), name="slow")
        await ref.send(hold)
        with pytest.raises(
            AskTimeoutError, match=r"^actor 'slow' did not reply to Echo within 1\.5s; "
        ):
            await ref.ask(Echo("late"), timeout=1.5)
        assert trio.current_time() == 1.5
        hold.release.set()
        assert await ref.ask(Echo("after")) == "after"
    assert ["hold", Echo("after")] == log


async def test_asker_cancelled_while_handler_runs_discards_the_reply() -> None:
    """Cancelling an asker whose handler is running lets the handler finish; the reply is dropped."""
    log: list[object] = []
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder(log))
        with trio.CancelScope() as scope:

            async def cancel_when_entered() -> None:
                await hold.entered.wait()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_entered)
                await ref.ask(hold)
        assert scope.cancelled_caught
        hold.release.set()
        assert await ref.ask(Echo("ok")) == "ok"
    assert ["hold", Echo("ok")] == log


async def test_asker_cancelled_before_handler_starts_skips_the_message() -> None:
    """An asker cancelled while its message is queued makes the actor skip that message."""
    log: list[object] = []
    hold = Hold()
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder(log))
        await ref.send(hold)
        await hold.entered.wait()
        with trio.CancelScope() as scope:

            async def cancel_once_queued() -> None:
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_once_queued)
                await ref.ask(Echo("skipped"))
        assert scope.cancelled_caught
        hold.release.set()
        assert await ref.ask(Echo("next")) == "next"
    assert ["hold", Echo("next")] == log


async def test_crash_during_ask_surfaces_to_the_asker_with_cause() -> None:
    """A handler exception reaches the asker as ActorCrashedError with the original as cause."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="fragile")
        with pytest.raises(
            ActorCrashedError,
            match=r"^actor 'fragile' crashed while handling Fail: ValueError\('bad input'\); ",
        ) as info:
            await ref.ask(Fail("bad input"))
        assert isinstance(info.value.__cause__, ValueError)
        assert Fail == info.value.message_type
        assert info.value.actor == "fragile"


async def test_message_without_handler_crashes_with_unhandled_message_error() -> None:
    """A message type with no handler crashes the actor with a typed UnhandledMessageError."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="picky")
        with pytest.raises(ActorCrashedError) as info:
            await ref.ask(3.5)
        cause = info.value.__cause__
        assert isinstance(cause, UnhandledMessageError)
        assert str(cause).startswith(
            "actor 'picky' (Recorder) has no handler for float; add an `async def` method "
            "decorated with @handles(float) (it handles: Note, Echo, Hold, Fail)"
        )


class Animal:
    pass


class Dog(Animal):
    pass


class Puppy(Dog):
    pass


class Zoo(Actor):
    @handles(Animal)
    async def on_animal(self, msg: Animal) -> str:
        return "animal"

    @handles(Dog)
    async def on_dog(self, msg: Dog) -> str:
        return "dog"


class PettingZoo(Zoo):
    async def on_dog(self, msg: Dog) -> str:
        return "petted dog"


async def test_dispatch_follows_the_message_mro() -> None:
    """The most specific handler along the message's MRO wins; subclasses fall back to bases."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(Zoo)
        assert [
            await ref.ask(Animal()),
            await ref.ask(Dog()),
            await ref.ask(Puppy()),
        ] == ["animal", "dog", "dog"]


async def test_overriding_a_handler_method_keeps_its_registration() -> None:
    """A subclass that overrides a handler method (without @handles) gets its own version called."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(PettingZoo)
        assert await ref.ask(Puppy()) == "petted dog"


class LoggingMixin:
    """A plain (non-Actor) mixin contributing a handler."""

    @handles(bytes)
    async def on_bytes(self, msg: bytes) -> str:
        return msg.decode()


class MixedZoo(LoggingMixin, Zoo):
    pass


async def test_handlers_on_plain_mixins_are_registered() -> None:
    """A @handles method on a mixin that is not an Actor still handles its messages."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(MixedZoo)
        assert await ref.ask(b"hi") == "hi"
        assert await ref.ask(Dog()) == "dog"


async def test_send_to_a_stopped_actor_raises() -> None:
    """send, send_nowait and ask to a stopped actor raise ActorStoppedError naming it."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="gone")
        await system.stop(ref)
        assert not ref.is_alive
        expected = r"^actor 'gone' is stopped and accepts no new messages; spawn a new actor"
        with pytest.raises(ActorStoppedError, match=expected):
            await ref.send(Note(0, 0))
        with pytest.raises(ActorStoppedError, match=expected):
            ref.send_nowait(Note(0, 0))
        with pytest.raises(ActorStoppedError, match=expected):
            await ref.ask(Echo(1))


async def test_lookup_finds_live_actors_by_name() -> None:
    """lookup() returns the ref of a live actor and raises ActorNotFoundError otherwise."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="finder")
        assert ref is system.lookup("finder")
        with pytest.raises(ActorNotFoundError, match=r"^no live actor is named 'nobody'; "):
            system.lookup("nobody")


async def test_a_stopped_actors_name_is_released() -> None:
    """After an actor stops, lookup fails and the name can be spawned again."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="reused")
        await system.stop(ref)
        with pytest.raises(ActorNotFoundError):
            system.lookup("reused")
        again = await system.spawn(lambda: Recorder([]), name="reused")
        assert again is system.lookup("reused")


async def test_duplicate_names_are_refused() -> None:
    """Spawning a second live actor with a taken name raises DuplicateActorNameError."""
    async with ActorSystem.open() as system:
        await system.spawn(lambda: Recorder([]), name="twin")
        with pytest.raises(
            DuplicateActorNameError, match=r"^an actor named 'twin' is already alive; "
        ):
            await system.spawn(lambda: Recorder([]), name="twin")


async def test_default_names_are_class_name_and_serial() -> None:
    """An unnamed actor is named after its class with a serial number."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]))
        assert ref.name == "Recorder-1"


async def test_factory_must_return_an_actor() -> None:
    """spawn() refuses a factory that does not build an Actor."""
    async with ActorSystem.open() as system:
        with pytest.raises(TypeError, match=r"^spawn\(\) needs a factory that returns an Actor"):
            await system.spawn(lambda: object())  # type: ignore[arg-type,return-value]


async def test_a_mailbox_serves_one_actor_only() -> None:
    """Passing one mailbox instance to two spawns is refused."""
    mailbox = FifoMailbox()
    async with ActorSystem.open() as system:
        await system.spawn(lambda: Recorder([]), name="first", mailbox=mailbox)
        with pytest.raises(ValueError, match=r"^this FifoMailbox already belongs to actor 'first'"):
            await system.spawn(lambda: Recorder([]), name="second", mailbox=mailbox)


async def test_fifo_mailbox_refuses_a_priority() -> None:
    """send(priority=...) to a FIFO mailbox raises instead of silently ignoring the priority."""
    async with ActorSystem.open() as system:
        ref = await system.spawn(lambda: Recorder([]), name="plain")
        with pytest.raises(
            ValueError, match=r"^actor 'plain' has a FifoMailbox, which has no priorities"
        ):
            await ref.send(Note(0, 0), priority=1)
        with pytest.raises(TypeError, match=r"^actor 'plain' has a FifoMailbox"):
            ref.queued_min_priority()
