"""Mailboxes: the bounded queues between an ``ActorRef`` and its actor.

A mailbox belongs to the actor's ref, not to one instance of the actor, so messages queued
while an actor crashes and restarts are handled by the next instance. Both kinds are bounded:
a sender that finds the mailbox full waits in ``send()`` (backpressure) or gets
``MailboxFullError`` from ``send_nowait()``.

- ``FifoMailbox`` (the default) is a trio memory channel: first in, first out.
- ``PriorityMailbox`` hands out the lowest priority number first, FIFO within a priority.

The underscore methods are the kernel's side of a mailbox; user code passes a mailbox to
``spawn()`` and never calls them.
"""

from __future__ import annotations

import abc
import heapq
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._envelope import AskEnvelope

__all__ = ["DEFAULT_CAPACITY", "FifoMailbox", "Mailbox", "PriorityMailbox"]

DEFAULT_CAPACITY = 64
"""Default mailbox size: enough to absorb bursts, small enough that a stuck actor pushes
back on its senders quickly."""


class Mailbox(abc.ABC):
    """A bounded message queue in front of one actor; pass a fresh one to ``spawn(mailbox=)``.

    Sends that find a closed mailbox raise ``trio.ClosedResourceError`` and sends that find it
    full raise ``trio.WouldBlock``; ``ActorRef`` translates both into actor errors.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a mailbox holds at least 1 message, got capacity={capacity}")
        self._capacity = capacity
        self._owner: str | None = None

    @property
    def capacity(self) -> int:
        """How many messages the mailbox holds before senders wait."""
        return self._capacity

    @abc.abstractmethod
    def __len__(self) -> int:
        """Messages accepted and not yet taken by the actor."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {len(self)}/{self._capacity} owner={self._owner!r}>"

    def _bind(self, owner: str) -> None:
        # One mailbox, one actor: two actors sharing a queue would steal each other's messages.
        if self._owner is not None:
            raise ValueError(
                f"this {type(self).__name__} already belongs to actor {self._owner!r}; "
                "pass a new mailbox to each spawn()"
            )
        self._owner = owner

    @abc.abstractmethod
    async def _put(self, item: object, priority: int | None) -> None:
        """Queue ``item``, waiting while the mailbox is full."""

    @abc.abstractmethod
    def _put_nowait(self, item: object, priority: int | None) -> None:
        """Queue ``item`` or raise ``trio.WouldBlock``."""

    @abc.abstractmethod
    def _receiver(self) -> Callable[[], Awaitable[object]]:
        """The actor's receive function: next item, or ``trio.EndOfChannel`` once closed and
        empty. Bound once per incarnation, so the loop pays no attribute lookups.
        """

    @abc.abstractmethod
    def _close(self) -> None:
        """Refuse new items (waiting senders raise ``ClosedResourceError``); keep queued ones."""

    @abc.abstractmethod
    def _take_all(self) -> list[object]:
        """Remove and return every queued item, in the order the actor would have seen them."""

    @abc.abstractmethod
    def _min_priority(self) -> int | None:
        """The lowest priority queued, or None when empty."""


class FifoMailbox(Mailbox):
    """First in, first out; built on a trio memory channel. Priorities are refused: passing
    ``priority=`` to a send raises ``ValueError`` rather than being silently ignored.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(capacity)
        self._send, self._recv = trio.open_memory_channel[object](capacity)

    def __len__(self) -> int:
        return self._send.statistics().current_buffer_used

    def _no_priorities(self, priority: int) -> ValueError:
        return ValueError(
            f"actor {self._owner!r} has a FifoMailbox, which has no priorities; drop "
            f"priority={priority}, or spawn the actor with mailbox=PriorityMailbox()"
        )

    async def _put(self, item: object, priority: int | None) -> None:
        if priority is not None:
            raise self._no_priorities(priority)
        await self._send.send(item)

    def _put_nowait(self, item: object, priority: int | None) -> None:
        if priority is not None:
            raise self._no_priorities(priority)
        self._send.send_nowait(item)

    def _receiver(self) -> Callable[[], Awaitable[object]]:
        return self._recv.receive

    def _close(self) -> None:
        self._send.close()

    def _take_all(self) -> list[object]:
        items: list[object] = []
        while True:
            try:
                items.append(self._recv.receive_nowait())
            except trio.EndOfChannel:
                return items

    def _min_priority(self) -> int | None:
        raise TypeError(
            f"actor {self._owner!r} has a FifoMailbox, which has no priorities; spawn it "
            "with mailbox=PriorityMailbox() to peek at priorities"
        )


class _BlockedSender:
    __slots__ = ("item", "rejected", "task")

    def __init__(self, task: trio.lowlevel.Task, item: object) -> None:
        self.task = task
        self.item = item
        self.rejected = False


class PriorityMailbox(Mailbox):
    """Lowest priority number first, first in first out within a priority; bounded.

    A message's priority is the ``priority=`` argument of ``send``/``send_nowait``/``ask`` when
    given; otherwise the message's own ``priority`` attribute when it has one (an int, e.g. an
    ``IntEnum``); otherwise 0. When the mailbox is full, senders wait, and the waiting sender
    with the lowest priority (then the earliest) gets the next free place.

    ``ActorRef.queued_min_priority()`` peeks at the lowest priority queued in O(1) (amortized:
    asks whose askers gave up are dropped from the front as it looks).
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(capacity)
        self._heap: list[tuple[int, int, object]] = []
        self._blocked: list[tuple[int, int, _BlockedSender]] = []
        self._seq = 0
        self._getter: trio.lowlevel.Task | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._heap)

    def _priority_of(self, item: object, priority: int | None) -> int:
        if priority is not None:
            return priority
        message = item.message if type(item) is AskEnvelope else item
        value: Any = getattr(message, "priority", 0)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(
                f"{type(message).__qualname__}.priority is {value!r}; a priority must be an int "
                "(lower is handled first), or pass priority= to the send"
            )
        return value

    @trio.lowlevel.enable_ki_protection
    async def _put(self, item: object, priority: int | None) -> None:
        prio = self._priority_of(item, priority)
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._push(item, prio)
        except trio.WouldBlock:
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        sender = _BlockedSender(trio.lowlevel.current_task(), item)
        self._seq += 1
        entry = (prio, self._seq, sender)
        heapq.heappush(self._blocked, entry)

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            # Cancelled while waiting for room: the item was never accepted.
            self._blocked.remove(entry)
            heapq.heapify(self._blocked)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if sender.rejected:
            raise trio.ClosedResourceError

    @trio.lowlevel.enable_ki_protection
    def _put_nowait(self, item: object, priority: int | None) -> None:
        self._push(item, self._priority_of(item, priority))

    def _push(self, item: object, prio: int) -> None:
        if self._closed:
            raise trio.ClosedResourceError
        if len(self._heap) >= self._capacity:
            raise trio.WouldBlock
        self._seq += 1
        heapq.heappush(self._heap, (prio, self._seq, item))
        getter = self._getter
        if getter is not None:
            self._getter = None
            trio.lowlevel.reschedule(getter)

    def _pop(self) -> object:
        if self._heap:
            item = heapq.heappop(self._heap)[2]
            self._admit_blocked()
            return item
        if self._closed:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _admit_blocked(self) -> None:
        # A place just freed up: move the most urgent waiting sender's item in and wake it.
        if self._blocked:
            prio, seq, sender = heapq.heappop(self._blocked)
            heapq.heappush(self._heap, (prio, seq, sender.item))
            trio.lowlevel.reschedule(sender.task)

    @trio.lowlevel.enable_ki_protection
    async def _get(self) -> object:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            item = self._pop()
        except trio.WouldBlock:
            pass
        else:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return item
        while True:
            self._getter = trio.lowlevel.current_task()

            def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
                self._getter = None
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
            try:
                return self._pop()
            except trio.WouldBlock:
                # The item that woke us was an abandoned ask dropped by a peek; wait again.
                continue

    def _receiver(self) -> Callable[[], Awaitable[object]]:
        return self._get

    def _close(self) -> None:
        self._closed = True
        for _, _, sender in self._blocked:
            sender.rejected = True
            trio.lowlevel.reschedule(sender.task)
        self._blocked.clear()
        getter = self._getter
        if getter is not None:
            self._getter = None
            trio.lowlevel.reschedule(getter)

    def _take_all(self) -> list[object]:
        items = [entry[2] for entry in sorted(self._heap)]
        self._heap.clear()
        return items

    def _min_priority(self) -> int | None:
        heap = self._heap
        while heap:
            head = heap[0][2]
            if type(head) is AskEnvelope and head.abandoned:
                heapq.heappop(heap)
                self._admit_blocked()
                continue
            return heap[0][0]
        return None
