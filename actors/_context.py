"""``ActorContext``: what an actor sees of the system around it (``self.context``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._supervision import Backoff, RestartPolicy

if TYPE_CHECKING:
    from ._actor import Actor
    from ._cell import ActorCell
    from ._mailbox import Mailbox
    from ._ref import ActorRef
    from ._system import ActorSystem

__all__ = ["ActorContext"]


class ActorContext:
    """An actor's view of its place in the system; the same object across restarts."""

    __slots__ = ("_cell",)

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell

    @property
    def self_ref(self) -> ActorRef[Any]:
        """This actor's own ref (to hand to others, or to send to itself)."""
        return self._cell.ref

    @property
    def name(self) -> str:
        """This actor's name."""
        return self._cell.name

    @property
    def system(self) -> ActorSystem:
        """The system this actor lives in."""
        return self._cell.system

    @property
    def parent(self) -> ActorRef[Any] | None:
        """The actor that spawned this one, or None for a top-level actor."""
        parent = self._cell.parent
        return None if parent is None else parent.ref

    @property
    def children(self) -> tuple[ActorRef[Any], ...]:
        """Live children, oldest first."""
        return tuple(child.ref for child in self._cell.children.values())

    async def spawn(
        self,
        factory: Callable[[], Actor],
        *,
        name: str | None = None,
        mailbox: Mailbox | None = None,
        restart: RestartPolicy = RestartPolicy.TRANSIENT,
        max_restarts: int = 3,
        within: float = 5.0,
        backoff: Backoff | None = None,
    ) -> ActorRef[Any]:
        """Spawn a child of this actor; same arguments as ``ActorSystem.spawn``.

        The child escalates to this actor when it crashes too often, and is stopped when this
        actor stops or restarts (drained on a graceful stop, cancelled otherwise), so a new
        incarnation should spawn its children again in ``on_start``.
        """
        cell = self._cell
        return await cell.system._spawn(
            factory,
            parent=cell,
            name=name,
            mailbox=mailbox,
            restart=restart,
            max_restarts=max_restarts,
            within=within,
            backoff=backoff,
        )

    def stop_self(self) -> None:
        """End this incarnation once the current handler (or ``on_start``) returns.

        A ``PERMANENT`` actor is then restarted and keeps its mailbox. Any other actor stops
        for good (``StopKind.NORMAL``); messages still queued become dead letters and their
        askers get ``ActorStoppedError``.
        """
        self._cell.stop_self_requested = True

    def watch(self, ref: ActorRef[Any]) -> None:
        """Receive a ``Terminated`` message when ``ref`` stops for good (at once if it has).

        The watch belongs to this actor, not to one incarnation: it survives restarts.
        """
        self._cell.watch(ref._cell)

    def unwatch(self, ref: ActorRef[Any]) -> None:
        """Stop watching ``ref``; a ``Terminated`` already queued stays queued."""
        self._cell.unwatch(ref._cell)
