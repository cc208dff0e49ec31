"""``ActorRef``: the handle through which everything talks to an actor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import trio

from ._envelope import AskEnvelope
from ._errors import AskTimeoutError, MailboxFullError

if TYPE_CHECKING:
    from ._cell import ActorCell

__all__ = ["ActorRef"]

M = TypeVar("M", contravariant=True)


class ActorRef(Generic[M]):
    """Address of one actor, valid across its restarts; ``M`` is the message type it takes.

    Refs are cheap to pass around and compare by identity (one ref per actor). Messages from
    one sender are handled in the order that sender sent them (per priority, for a
    ``PriorityMailbox``). Every message a send accepts is handled exactly once, returned by
    ``ActorSystem.stop(ref, mode="cancel")``, or recorded as a dead letter; a rejected send
    raises.
    """

    __slots__ = ("_cell", "_put", "_put_nowait")

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell
        # Bound once: the send path is the hot path.
        self._put = cell.mailbox._put
        self._put_nowait = cell.mailbox._put_nowait

    @property
    def name(self) -> str:
        """The actor's name, unique among live actors of its system."""
        return self._cell.name

    @property
    def is_alive(self) -> bool:
        """False once the actor has stopped for good (restarts do not count as stopping)."""
        return self._cell.terminated is None

    @property
    def queued(self) -> int:
        """Messages in the mailbox that the actor has not taken yet."""
        return len(self._cell.mailbox)

    def queued_min_priority(self) -> int | None:
        """The lowest (most urgent) priority queued, or None when nothing is queued.

        Only for a ``PriorityMailbox`` (``TypeError`` otherwise); counts accepted messages, not
        senders still waiting for room. Cheap enough to call per generated token.
        """
        return self._cell.mailbox._min_priority()

    async def send(self, message: M, *, priority: int | None = None) -> None:
        """Queue ``message`` (tell), waiting while the mailbox is full.

        Raises ``ActorStoppedError`` if the actor is stopping or stopped, also when that
        happens while this send waits for room (the message is then not accepted).
        """
        try:
            await self._put(message, priority)
        except trio.ClosedResourceError as exc:
            raise self._cell.stopped_error() from exc

    def send_nowait(self, message: M, *, priority: int | None = None) -> None:
        """Queue ``message`` now, or raise ``MailboxFullError`` (full) / ``ActorStoppedError``."""
        try:
            self._put_nowait(message, priority)
        except trio.WouldBlock as exc:
            raise MailboxFullError(self._cell.name, self._cell.mailbox.capacity) from exc
        except trio.ClosedResourceError as exc:
            raise self._cell.stopped_error() from exc

    async def ask(
        self,
        message: M,
        *,
        # The timeout is part of ask's contract (it raises AskTimeoutError, and an asker gone
        # before the handler starts makes the actor skip the message), so it is a parameter.
        timeout: float | None = None,  # noqa: ASYNC109
        priority: int | None = None,
    ) -> Any:
        """Send ``message`` and wait for the handler's return value.

        ``timeout`` (seconds, covering any wait for mailbox room too) raises
        ``AskTimeoutError``. If the asker is cancelled or times out before the handler starts,
        the actor skips the message; if the handler already runs, it finishes and the reply
        is discarded. A handler exception raises ``ActorCrashedError`` (``__cause__`` is the
        exception); a stop that prevents the reply raises ``ActorStoppedError``. An actor
        asking itself raises ``RuntimeError`` (it would deadlock).
        """
        if self._cell.task is trio.lowlevel.current_task():
            raise RuntimeError(
                f"actor {self._cell.name!r} asked itself and would wait forever for its own "
                "reply; call the method directly, or send() the message"
            )
        envelope = AskEnvelope(message)
        if timeout is None:
            try:
                await self._put(envelope, priority)
            except trio.ClosedResourceError as exc:
                raise self._cell.stopped_error() from exc
            return await envelope.wait()
        with trio.move_on_after(timeout):
            try:
                await self._put(envelope, priority)
            except trio.ClosedResourceError as exc:
                raise self._cell.stopped_error() from exc
            return await envelope.wait()
        raise AskTimeoutError(self._cell.name, type(message), timeout)

    def __repr__(self) -> str:
        state = "alive" if self._cell.terminated is None else "stopped"
        return f"<ActorRef {self._cell.name!r} {state}>"
