"""``ActorCell``: the runtime behind one ``ActorRef`` — its task, supervision and stopping.

One trio task per actor runs ``ActorCell.run``: a supervision loop around incarnations
(instances built by the actor's factory). Each incarnation runs ``on_start``, then the message
loop, inside its own cancel scope; ``stop(mode="cancel")`` and a child's escalation cancel that
scope. The loop itself opens no per-message scope or task: it receives from the mailbox and
awaits the cached handler for the message's type.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from ._actor import Actor
from ._context import ActorContext
from ._envelope import AskEnvelope
from ._errors import ActorCrashedError, ActorStoppedError, EscalationError
from ._lifecycle import DeadLetter, StopKind, StopMode, StopReason, Terminated
from ._logging import quiet_logger
from ._mailbox import Mailbox
from ._ref import ActorRef
from ._supervision import Backoff, RestartIntensity, RestartPolicy

if TYPE_CHECKING:
    from ._system import ActorSystem

__all__ = ["ActorCell", "StopClaim"]

_log = quiet_logger(__name__)


class _End(enum.Enum):
    """How one incarnation ended."""

    DRAINED = "drained"  # the mailbox was closed by a stop and is now empty
    STOP_SELF = "stop_self"
    CANCELLED = "cancelled"
    CRASHED = "crashed"


class StopClaim:
    """A ``stop()`` call waiting for an actor to end; the first live claim receives the
    messages the actor left undelivered.
    """

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Any] = []


class ActorCell:
    """Everything the kernel keeps about one actor; the ``ActorRef`` points here."""

    def __init__(
        self,
        *,
        system: ActorSystem,
        name: str,
        factory: Callable[[], Actor],
        instance: Actor,
        mailbox: Mailbox,
        parent: ActorCell | None,
        restart: RestartPolicy,
        intensity: RestartIntensity,
        backoff: Backoff,
    ) -> None:
        self.system = system
        self.name = name
        self.factory = factory
        self.mailbox = mailbox
        self.parent = parent
        self.policy = restart
        self.intensity = intensity
        self.backoff = backoff
        self.ref: ActorRef[Any] = ActorRef(self)
        self.context = ActorContext(self)
        self.children: dict[str, ActorCell] = {}
        self.watchers: set[ActorCell] = set()  # actors to tell when this one terminates
        self.watching: set[ActorCell] = set()  # actors this one watches
        self.task: trio.lowlevel.Task | None = None
        self.done = trio.Event()
        self.terminated: Terminated | None = None
        self.stop_mode: StopMode | None = None
        self.stop_self_requested = False
        self.pending_escalation: EscalationError | None = None
        self.inflight: AskEnvelope | None = None
        self.claims: list[StopClaim] = []
        self._scope: trio.CancelScope | None = None  # the running incarnation's
        self._backoff_scope: trio.CancelScope | None = None
        self._on_stop_scope: trio.CancelScope | None = None
        self._stopping_children = False
        self._first_instance: Actor | None = instance
        self._task_status: trio.TaskStatus[None] | None = None

    # -- requests from outside the actor's task ------------------------------------------

    def stopped_error(self) -> ActorStoppedError:
        """The error for a send that found the mailbox closed."""
        state = "stopping" if self.terminated is None else "stopped"
        return ActorStoppedError(
            self.name,
            f"actor {self.name!r} is {state} and accepts no new messages; spawn a new actor, "
            "or watch it to learn when it stops",
        )

    def request_stop(self, mode: StopMode, claim: StopClaim | None = None) -> None:
        """Start stopping: refuse new messages now; ``"cancel"`` also cancels what runs."""
        if self.terminated is not None:
            return
        if claim is not None:
            self.claims.append(claim)
        if mode == "cancel":
            self.stop_mode = "cancel"
            # Whatever runs now: the incarnation, a backoff sleep, or on_stop (so a second
            # cancel forces an actor whose on_stop hangs).
            for scope in (self._scope, self._backoff_scope, self._on_stop_scope):
                if scope is not None:
                    scope.cancel()
            if self._stopping_children:
                for child in list(self.children.values()):
                    child.request_stop("cancel")
        elif self.stop_mode is None:
            self.stop_mode = "drain"
        self.mailbox._close()

    def release_claim(self, claim: StopClaim) -> None:
        """A ``stop()`` caller left early (cancelled): whatever it was handed is dead letters."""
        if claim in self.claims:
            self.claims.remove(claim)
        for message in claim.items:
            self.system._dead_letter(DeadLetter(self.name, message))
        claim.items = []

    def escalate(self, error: EscalationError) -> None:
        """A child gave up: crash the running incarnation with ``error``."""
        if self.pending_escalation is not None:
            # Crash once; keep the second child's failure visible on the first error.
            self.pending_escalation.add_note(f"also escalated: {error}")
            return
        self.pending_escalation = error
        if self._scope is not None:
            self._scope.cancel()

    def watch(self, target: ActorCell) -> None:
        """Deliver ``Terminated`` to this actor when ``target`` terminates."""
        if target is self:
            raise ValueError(f"actor {self.name!r} cannot watch itself")
        if target.terminated is not None:
            self.system._notify(self, target.terminated)
            return
        target.watchers.add(self)
        self.watching.add(target)

    def unwatch(self, target: ActorCell) -> None:
        """Undo ``watch``."""
        target.watchers.discard(self)
        self.watching.discard(target)

    # -- the actor's task -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Body of the actor's task: supervise incarnations until the actor terminates."""
        self.task = trio.lowlevel.current_task()
        self._task_status = task_status
        # If cancellation from outside (the system torn down) ends us, that is the reason.
        reason = StopReason.cancelled()
        try:
            reason = await self._supervise()
        finally:
            self._terminate(reason)
        # It ended before any on_start() returned; spawn() returns the (dead) ref all the same,
        # the failure having gone to watchers and supervision like any other.
        self._signal_started()

    def _signal_started(self) -> None:
        status = self._task_status
        if status is not None:
            self._task_status = None
            status.started()

    async def _supervise(self) -> StopReason:
        instance = self._first_instance
        self._first_instance = None
        while True:
            ended, error = _End.CRASHED, None
            if instance is None:
                try:
                    instance = self.factory()
                except Exception as exc:  # noqa: BLE001 - supervision boundary: a crash to handle
                    error = exc
            if instance is not None:
                ended, error = await self._run_incarnation(instance)
            if error is not None:
                _log.warning("actor crashed", actor=self.name, error=repr(error))
            final, delay = self._decide(ended, error)
            if final is not None:
                self.mailbox._close()  # refuse new messages as soon as the end is certain
            if instance is not None:
                on_stop_reason = final
                if on_stop_reason is None:
                    on_stop_reason = (
                        StopReason.normal() if error is None else StopReason.crashed(error)
                    )
                await self._stop_children(
                    "drain" if on_stop_reason.kind is StopKind.NORMAL else "cancel"
                )
                stop_error = await self._call_on_stop(instance, on_stop_reason)
                if stop_error is not None:
                    _log.warning("actor on_stop raised", actor=self.name, error=repr(stop_error))
                    if stop_error.__context__ is None:
                        stop_error.__context__ = error
                    if final is None:
                        final, delay = self._decide(_End.CRASHED, stop_error)
                        if final is not None:
                            self.mailbox._close()
                    elif final.kind is StopKind.ESCALATED:
                        final = StopReason.escalated(stop_error)
                    else:
                        final = StopReason.crashed(stop_error)
            if final is not None:
                return final
            if self.pending_escalation is not None:
                # A child gave up while this incarnation was already ending: the restart we
                # are about to do is what the escalation asks for, so it is not counted again.
                _log.error(
                    "escalation during restart",
                    actor=self.name,
                    error=repr(self.pending_escalation),
                )
                self.pending_escalation = None
            instance = None
            if delay > 0:
                _log.info("actor restarting", actor=self.name, delay=delay)
                with trio.CancelScope() as self._backoff_scope:
                    if self.stop_mode == "cancel":
                        self._backoff_scope.cancel()
                    await trio.sleep(delay)
                self._backoff_scope = None
            if self.stop_mode == "cancel":
                return StopReason.cancelled()

    def _decide(self, ended: _End, error: Exception | None) -> tuple[StopReason | None, float]:
        """The final reason if the actor ends here, else None and the delay before restart."""
        if ended is _End.CRASHED:
            assert error is not None
            if self.stop_mode is not None or self.policy is RestartPolicy.TEMPORARY:
                return StopReason.crashed(error), 0.0
            crashes = self.intensity.record_crash(trio.current_time())
            if crashes > self.intensity.max_restarts:
                return StopReason.escalated(error), 0.0
            return None, self.backoff.delay(crashes)
        if self.stop_mode == "cancel" or ended is _End.CANCELLED:
            return StopReason.cancelled(), 0.0
        if (
            ended is _End.STOP_SELF
            and self.policy is RestartPolicy.PERMANENT
            and self.stop_mode is None
        ):
            return None, 0.0
        return StopReason.normal(), 0.0

    async def _run_incarnation(self, instance: Actor) -> tuple[_End, Exception | None]:
        instance._actor_context = self.context
        self.stop_self_requested = False
        ended = _End.CRASHED
        error: Exception | None = None
        finished = False
        scope = trio.CancelScope()
        if self.stop_mode == "cancel":
            scope.cancel()
        self._scope = scope
        try:
            with scope:
                escalation = self.pending_escalation
                if escalation is not None:
                    self.pending_escalation = None
                    raise escalation
                await instance.on_start()
                self._signal_started()
                ended = await self._loop(instance)
            finished = True
        except Exception as exc:  # noqa: BLE001 - supervision boundary: a crash to handle
            error = exc
            finished = True
        finally:
            self._scope = None
            if not finished:
                # Cancelled from outside the actor (the system is torn down) or a
                # BaseException: no supervision, but the asker and on_stop still learn of it.
                self._fail_inflight(None)
                await instance.on_stop(StopReason.cancelled())
        if scope.cancelled_caught:
            escalation = self.pending_escalation
            if escalation is not None:
                self.pending_escalation = None
                ended, error = _End.CRASHED, escalation
            else:
                ended = _End.CANCELLED
        self._fail_inflight(error)
        return ended, error

    async def _loop(self, instance: Actor) -> _End:
        receive = self.mailbox._receiver()
        actor_type = type(instance)
        dispatch = actor_type._actor_dispatch
        name = self.name
        while not self.stop_self_requested:
            try:
                item = await receive()
            except trio.EndOfChannel:
                return _End.DRAINED
            item_type = type(item)
            if item_type is AskEnvelope:
                await self._handle_ask(instance, item)  # type: ignore[arg-type]
                continue
            handler = dispatch.get(item_type)
            if handler is None:
                handler = actor_type._resolve_handler(item_type, name)
            await handler(instance, item)
        return _End.STOP_SELF

    async def _handle_ask(self, instance: Actor, envelope: AskEnvelope) -> None:
        if envelope.abandoned:
            return  # the asker was cancelled before we got here; nobody wants this reply
        message = envelope.message
        self.inflight = envelope
        try:
            actor_type = type(instance)
            handler = actor_type._actor_dispatch.get(type(message))
            if handler is None:
                handler = actor_type._resolve_handler(type(message), self.name)
            result = await handler(instance, message)
        except Exception as exc:
            self.inflight = None
            envelope.fail(ActorCrashedError(self.name, type(message), exc))
            raise
        self.inflight = None
        envelope.reply(result)

    def _fail_inflight(self, error: Exception | None) -> None:
        """The handler of an ask was cut off (cancelled, or crashed by an escalation)."""
        envelope = self.inflight
        if envelope is None:
            return
        self.inflight = None
        message_type = type(envelope.message)
        if error is not None:
            envelope.fail(ActorCrashedError(self.name, message_type, error))
        else:
            envelope.fail(
                ActorStoppedError(
                    self.name,
                    f"actor {self.name!r} was cancelled while handling "
                    f"{message_type.__qualname__}, so it will not reply; the handler did not "
                    "finish",
                )
            )

    async def _call_on_stop(self, instance: Actor, reason: StopReason) -> Exception | None:
        # An exception from on_stop is returned, not dropped: the caller treats it as a crash.
        # A cancel-stop that arrives while on_stop runs cancels it (see request_stop).
        with trio.CancelScope() as self._on_stop_scope:
            try:
                await instance.on_stop(reason)
            except Exception as exc:  # noqa: BLE001 - supervision boundary: a crash to handle
                return exc
            finally:
                self._on_stop_scope = None
        return None

    async def _stop_children(self, mode: StopMode) -> None:
        # Youngest first, like an ExitStack: a younger child may depend on an older one.
        self._stopping_children = True
        try:
            for child in reversed(list(self.children.values())):
                child.request_stop(mode)
                await child.done.wait()
        finally:
            self._stopping_children = False

    def _terminate(self, reason: StopReason) -> None:
        """Final bookkeeping; synchronous so it also runs when the task is being cancelled."""
        self.mailbox._close()
        self._fail_inflight(None)
        undelivered: list[Any] = []
        for item in self.mailbox._take_all():
            if type(item) is AskEnvelope:
                if item.abandoned:
                    continue
                item.fail(
                    ActorStoppedError(
                        self.name,
                        f"actor {self.name!r} stopped ({reason.kind.value}) before handling "
                        f"{type(item.message).__qualname__}; the message was not handled",
                    )
                )
                undelivered.append(item.message)
            else:
                undelivered.append(item)
        if self.claims:
            self.claims[0].items = undelivered
        else:
            for message in undelivered:
                self.system._dead_letter(DeadLetter(self.name, message))
        terminated = Terminated(self.ref, reason)
        self.terminated = terminated
        self.system._forget(self)
        for target in self.watching:
            target.watchers.discard(self)
        self.watching.clear()
        self.done.set()
        for watcher in self.watchers:
            self.system._notify(watcher, terminated)
        self.watchers.clear()
        escalations: list[EscalationError] = []
        if reason.kind is StopKind.ESCALATED:
            assert reason.error is not None
            escalations.append(
                EscalationError(
                    self.name, reason.error, self.intensity.max_restarts, self.intensity.within
                )
            )
        if self.pending_escalation is not None:
            # A child gave up while no incarnation of ours was running to crash: pass it up.
            escalations.append(self.pending_escalation)
            self.pending_escalation = None
        for escalation in escalations:
            parent = self.parent
            if parent is not None and parent.terminated is None:
                _log.error("actor escalated to parent", actor=self.name, parent=parent.name)
                parent.escalate(escalation)
            else:
                self.system._root_escalation(escalation)
        if reason.kind is StopKind.CANCELLED:
            # An orderly cancel (shutdown, a parent stopping its children, stop(mode="cancel")) is
            # no news to a user: debug. A crash or an escalation stays at info.
            _log.debug("actor terminated", actor=self.name, reason=str(reason))
        elif reason.kind is not StopKind.NORMAL:
            _log.info("actor terminated", actor=self.name, reason=str(reason))
