"""Every error the actor kernel raises, in one place.

The hierarchy::

    ActorError                    base of everything below; catch it to catch any kernel error
    ├── ActorStoppedError         the actor accepts no more messages, or stopped before it replied
    ├── MailboxFullError          send_nowait() found the mailbox full
    ├── ActorNotFoundError        lookup() of a name no live actor has (also a LookupError)
    ├── DuplicateActorNameError   spawn() with a name a live actor already has
    ├── AskTimeoutError           ask(timeout=...) got no reply in time (also a trio.TooSlowError)
    ├── ActorCrashedError         the handler of an ask raised; ``__cause__`` is what it raised
    ├── UnhandledMessageError     an actor got a message it has no handler for (a crash)
    ├── EscalationError           a child crashed too often and gave up (crashes its parent)
    └── SystemClosedError         spawn() on an ActorSystem that is shutting down

Each message says what happened, to which actor, and what to do about it.
"""

from __future__ import annotations

import trio

__all__ = [
    "ActorCrashedError",
    "ActorError",
    "ActorNotFoundError",
    "ActorStoppedError",
    "AskTimeoutError",
    "DuplicateActorNameError",
    "EscalationError",
    "MailboxFullError",
    "SystemClosedError",
    "UnhandledMessageError",
]


def _type_name(tp: type) -> str:
    return tp.__qualname__


class ActorError(Exception):
    """Base class of every error raised by the actor kernel."""


class ActorStoppedError(ActorError):
    """Raised by send/ask when the actor no longer accepts messages (it is stopping or has
    stopped), and raised in an asker whose message the actor will never reply to because it was
    stopped first (queued when stop(mode="cancel") came, or its handler was cancelled).
    """

    def __init__(self, actor: str, detail: str | None = None) -> None:
        self.actor = actor
        if detail is None:
            detail = (
                f"actor {actor!r} is stopped and accepts no messages; "
                "spawn a new actor, or watch it to learn when it stops"
            )
        super().__init__(detail)


class MailboxFullError(ActorError):
    """Raised by send_nowait() when the actor's mailbox is at capacity."""

    def __init__(self, actor: str, capacity: int) -> None:
        self.actor = actor
        self.capacity = capacity
        super().__init__(
            f"mailbox of actor {actor!r} is full ({capacity} messages); await send() to wait "
            "for room, or spawn the actor with a larger mailbox"
        )


class ActorNotFoundError(ActorError, LookupError):
    """Raised by ActorSystem.lookup() when no live actor has the name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"no live actor is named {name!r}; check the name, or spawn it first "
            "(a stopped actor's name is released)"
        )


class DuplicateActorNameError(ActorError):
    """Raised by spawn() when a live actor already has the requested name."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"an actor named {name!r} is already alive; choose another name, "
            "or stop that actor first"
        )


class AskTimeoutError(ActorError, trio.TooSlowError):
    """Raised by ask(timeout=...) when no reply came in time.

    It is also a ``trio.TooSlowError``, so code written against ``trio.fail_after`` catches it.
    The message stays accepted: if its handler had not started it is skipped, if it had started
    it runs to the end and the reply is discarded.
    """

    def __init__(self, actor: str, message_type: type, timeout: float) -> None:
        self.actor = actor
        self.message_type = message_type
        self.timeout = timeout
        super().__init__(
            f"actor {actor!r} did not reply to {_type_name(message_type)} within {timeout}s; "
            "the actor is busy or blocked: raise the timeout or check what the handler awaits"
        )


class ActorCrashedError(ActorError):
    """Raised in an asker when the handler of its message raised; ``__cause__`` holds the
    original exception. The actor itself is then restarted or stopped by its supervision.
    """

    def __init__(self, actor: str, message_type: type, error: BaseException) -> None:
        self.actor = actor
        self.message_type = message_type
        super().__init__(
            f"actor {actor!r} crashed while handling {_type_name(message_type)}: {error!r}; "
            "the traceback is in __cause__, and the actor's restart policy decides what happens "
            "to it next"
        )
        self.__cause__ = error


class UnhandledMessageError(ActorError):
    """Raised inside an actor that received a message type none of its handlers accepts.

    It crashes the actor like any handler exception (an asker sees it as the ``__cause__`` of
    ActorCrashedError).
    """

    def __init__(self, actor: str, actor_type: type, message_type: type, known: list[type]) -> None:
        self.actor = actor
        self.message_type = message_type
        handled = ", ".join(_type_name(t) for t in known) or "nothing"
        super().__init__(
            f"actor {actor!r} ({_type_name(actor_type)}) has no handler for "
            f"{_type_name(message_type)}; add an `async def` method decorated with "
            f"@handles({_type_name(message_type)}) (it handles: {handled})"
        )


class EscalationError(ActorError):
    """A child actor crashed more than ``max_restarts`` times within ``within`` seconds, so its
    supervision gave up. Raised inside the parent (crashing it, so the parent's own supervision
    applies), or, for a top-level actor, raised by ``async with ActorSystem.open()`` on exit.
    ``__cause__`` is the child's last exception.
    """

    def __init__(self, child: str, error: BaseException, max_restarts: int, within: float) -> None:
        self.child = child
        self.error = error
        super().__init__(
            f"actor {child!r} crashed more than {max_restarts} times within {within}s and was "
            f"not restarted again; last error: {error!r}. Fix the crash, or raise max_restarts"
        )
        self.__cause__ = error


class SystemClosedError(ActorError):
    """Raised by spawn() once the ActorSystem is shutting down or has shut down."""

    def __init__(self) -> None:
        super().__init__(
            "the ActorSystem is shutting down and spawns no new actors; spawn inside the "
            "`async with ActorSystem.open()` block"
        )
