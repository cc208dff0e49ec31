"""``ActorSystem``: owns the nursery every actor runs in, names actors, stops them."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._actor import Actor
from ._cell import ActorCell, StopClaim
from ._errors import (
    ActorNotFoundError,
    ActorStoppedError,
    DuplicateActorNameError,
    EscalationError,
    MailboxFullError,
    SystemClosedError,
)
from ._lifecycle import DeadLetter, StopMode, Terminated
from ._logging import quiet_logger
from ._mailbox import FifoMailbox, Mailbox
from ._ref import ActorRef
from ._supervision import Backoff, RestartIntensity, RestartPolicy

__all__ = ["ActorSystem", "Watcher"]

_log = quiet_logger(__name__)

_DEFAULT_BACKOFF = Backoff()


class Watcher:
    """Death watch from outside any actor: ``await watcher.wait()`` returns ``Terminated``."""

    __slots__ = ("_cell",)

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell

    @property
    def ref(self) -> ActorRef[Any]:
        """The watched actor."""
        return self._cell.ref

    async def wait(self) -> Terminated:
        """Wait until the actor stops for good (returns at once if it has) and say why."""
        await self._cell.done.wait()
        terminated = self._cell.terminated
        assert terminated is not None
        return terminated


class ActorSystem:
    """A tree of actors in one trio nursery. Create it with ``ActorSystem.open()``.

    Escalations that reach the root (a top-level actor that crashed more than its
    ``max_restarts``) go to ``on_escalation`` when one is given; otherwise they are kept in
    ``escalations`` and the first is raised by the ``async with`` block on exit, so a failure
    is never lost. Undeliverable messages no ``stop()`` returned go to ``on_dead_letter``, by
    default appended to ``dead_letters``.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        on_escalation: Callable[[EscalationError], None] | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
    ) -> None:
        """Use ``ActorSystem.open()``, which owns the nursery and does the shutdown."""
        self._nursery = nursery
        self._on_escalation = on_escalation
        self._on_dead_letter = on_dead_letter
        self._cells: dict[str, ActorCell] = {}
        self._top_level: dict[str, ActorCell] = {}
        self._closing = False
        self._serial = itertools.count(1)
        self.escalations: list[EscalationError] = []
        """Escalations that reached the root, oldest first (when no ``on_escalation``)."""
        self.dead_letters: list[DeadLetter] = []
        """Undeliverable messages, oldest first (when no ``on_dead_letter``)."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        shutdown: StopMode = "drain",
        on_escalation: Callable[[EscalationError], None] | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
    ) -> AsyncIterator[ActorSystem]:
        """Run a system for the duration of the ``async with`` block.

        When the block ends normally, top-level actors are stopped youngest first with
        ``shutdown`` (``"drain"``: queued messages are handled first). When the block raises
        or is cancelled, every actor is cancelled and the block's exception propagates as
        itself (not wrapped in an ExceptionGroup). Then, if an escalation reached the root and
        no ``on_escalation`` took it, the first one is raised.
        """
        if shutdown not in ("drain", "cancel"):
            raise ValueError(f'shutdown must be "drain" or "cancel", got {shutdown!r}')
        body_error: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                system = cls(nursery, on_escalation=on_escalation, on_dead_letter=on_dead_letter)
                try:
                    yield system
                except BaseException as exc:  # noqa: BLE001 - re-raised below, see comment
                    # Held, not handled: re-raised below once every actor is cancelled, so the
                    # caller sees its own exception rather than a nursery's ExceptionGroup.
                    body_error = exc
                    system._closing = True
                    nursery.cancel_scope.cancel()
                else:
                    await system._shutdown(shutdown)
        except BaseExceptionGroup as group:
            if body_error is None:
                raise
            raise BaseExceptionGroup(
                "the actor system failed while its block raised", [body_error, *group.exceptions]
            ) from None
        if body_error is not None:
            raise body_error
        if system.escalations and on_escalation is None:
            raise system.escalations[0]

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
        """Start a top-level actor and return its ref.

        ``factory`` builds a fresh instance; it is called now and again on every restart.
        ``name`` defaults to the class name with a serial number. ``mailbox`` defaults to
        ``FifoMailbox()``. A crash restarts the actor according to ``restart``, waiting
        ``backoff`` (default ``Backoff()``) between restarts; more than ``max_restarts``
        crashes within ``within`` seconds escalates instead. Returns once the first
        ``on_start`` has returned, so the actor is ready (like OTP's ``start_link``): its
        ``on_start`` must not ask the actor that is spawning it, which is busy waiting here.
        If the first incarnations crash in ``on_start``, spawn waits through the restarts;
        if the actor ends instead, spawn returns its ref all the same (not alive), the failure
        reported to watchers and supervision as usual.
        """
        return await self._spawn(
            factory,
            parent=None,
            name=name,
            mailbox=mailbox,
            restart=restart,
            max_restarts=max_restarts,
            within=within,
            backoff=backoff,
        )

    async def _spawn(
        self,
        factory: Callable[[], Actor],
        *,
        parent: ActorCell | None,
        name: str | None,
        mailbox: Mailbox | None,
        restart: RestartPolicy,
        max_restarts: int,
        within: float,
        backoff: Backoff | None,
    ) -> ActorRef[Any]:
        if self._closing:
            raise SystemClosedError
        if parent is not None and parent.terminated is not None:
            raise ActorStoppedError(
                parent.name, f"actor {parent.name!r} has stopped and cannot spawn children"
            )
        intensity = RestartIntensity(max_restarts, within)
        instance = factory()
        if not isinstance(instance, Actor):
            raise TypeError(
                f"spawn() needs a factory that returns an Actor, got {type(instance).__qualname__} "
                f"from {factory!r}"
            )
        if name is None:
            name = f"{type(instance).__name__}-{next(self._serial)}"
        if name in self._cells:
            raise DuplicateActorNameError(name)
        if mailbox is None:
            mailbox = FifoMailbox()
        mailbox._bind(name)
        cell = ActorCell(
            system=self,
            name=name,
            factory=factory,
            instance=instance,
            mailbox=mailbox,
            parent=parent,
            restart=restart,
            intensity=intensity,
            backoff=_DEFAULT_BACKOFF if backoff is None else backoff,
        )
        self._cells[name] = cell
        if parent is None:
            self._top_level[name] = cell
        else:
            parent.children[name] = cell
        await self._nursery.start(cell.run)
        return cell.ref

    def lookup(self, name: str) -> ActorRef[Any]:
        """The ref of the live actor called ``name``; ``ActorNotFoundError`` if there is none."""
        cell = self._cells.get(name)
        if cell is None:
            raise ActorNotFoundError(name)
        return cell.ref

    async def stop(self, ref: ActorRef[Any], *, mode: StopMode = "drain") -> list[Any]:
        """Stop the actor behind ``ref`` for good and wait until it has; no restart follows.

        Either way new sends raise ``ActorStoppedError`` from now on, the actor's children
        are stopped (youngest first, same mode) and ``on_stop`` runs. ``"drain"`` handles
        what is queued first. ``"cancel"`` cancels the running handler; its asker, if any,
        gets ``ActorStoppedError``.

        Returns the messages accepted but never handled (queued at a cancel, or left by a
        crash while draining), in mailbox order. Asks among them are included for the
        record, but their askers have already received ``ActorStoppedError``: do not resend
        those. A ``"cancel"`` stop that finds the actor already stopping (say in a slow
        ``on_stop``, or waiting for its children) cancels that too: the way to force a stuck
        stop. Stopping a stopped actor returns ``[]``. An actor cannot stop itself this way
        (it would wait for its own end): use ``self.context.stop_self()``.
        """
        if mode not in ("drain", "cancel"):
            raise ValueError(f'mode must be "drain" or "cancel", got {mode!r}')
        cell = ref._cell
        if cell.system is not self:
            raise ValueError(f"actor {cell.name!r} belongs to another ActorSystem")
        if cell.task is trio.lowlevel.current_task():
            raise RuntimeError(
                f"actor {cell.name!r} cannot await its own stop; call "
                "self.context.stop_self() to stop after the current message"
            )
        claim = StopClaim()
        cell.request_stop(mode, claim)
        finished = False
        try:
            await cell.done.wait()
            finished = True
        finally:
            if not finished:
                cell.release_claim(claim)
        return claim.items

    def watch(self, ref: ActorRef[Any]) -> Watcher:
        """Death watch: ``await system.watch(ref).wait()`` gives the ``Terminated`` notice."""
        return Watcher(ref._cell)

    @property
    def actors(self) -> tuple[ActorRef[Any], ...]:
        """Refs of all live actors, in spawn order."""
        return tuple(cell.ref for cell in self._cells.values())

    # -- kernel callbacks -------------------------------------------------------------------

    async def _shutdown(self, mode: StopMode) -> None:
        self._closing = True
        for cell in reversed(list(self._top_level.values())):
            cell.request_stop(mode)
            await cell.done.wait()

    def _forget(self, cell: ActorCell) -> None:
        if self._cells.get(cell.name) is cell:
            del self._cells[cell.name]
        self._top_level.pop(cell.name, None)
        if cell.parent is not None:
            cell.parent.children.pop(cell.name, None)

    def _dead_letter(self, letter: DeadLetter) -> None:
        _log.warning(
            "dead letter", recipient=letter.recipient, message_type=type(letter.message).__name__
        )
        if self._on_dead_letter is None:
            self.dead_letters.append(letter)
        else:
            self._on_dead_letter(letter)

    def _root_escalation(self, error: EscalationError) -> None:
        _log.error("actor escalated to the root", actor=error.child, error=repr(error.error))
        if self._on_escalation is None:
            self.escalations.append(error)
        else:
            self._on_escalation(error)

    def _notify(self, watcher: ActorCell, terminated: Terminated) -> None:
        try:
            watcher.ref.send_nowait(terminated)
        except MailboxFullError:
            self._nursery.start_soon(self._notify_later, watcher, terminated)
        except ActorStoppedError:
            self._dead_letter(DeadLetter(watcher.name, terminated))

    async def _notify_later(self, watcher: ActorCell, terminated: Terminated) -> None:
        try:
            await watcher.ref.send(terminated)
        except ActorStoppedError:
            self._dead_letter(DeadLetter(watcher.name, terminated))
