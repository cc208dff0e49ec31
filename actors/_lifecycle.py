"""Why an actor stopped, and the records the kernel hands out when it does."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ._ref import ActorRef

__all__ = ["DeadLetter", "StopKind", "StopMode", "StopReason", "Terminated"]

StopMode = Literal["drain", "cancel"]
"""How to stop an actor: ``"drain"`` handles what is queued first, ``"cancel"`` stops now."""


class StopKind(enum.Enum):
    """The four ways an actor's life (or one incarnation of it) ends."""

    NORMAL = "normal"
    """Graceful: a drain stop, or ``stop_self()``."""
    CANCELLED = "cancelled"
    """Immediate: ``stop(mode="cancel")``, a parent cancelling its children, or system teardown."""
    CRASHED = "crashed"
    """An exception ended it and supervision did not restart it (``error`` holds it)."""
    ESCALATED = "escalated"
    """It crashed too often; supervision gave up and escalated ``error`` to the parent."""


@dataclass(frozen=True, slots=True)
class StopReason:
    """Why an actor stopped: a ``kind``, and for crashes and escalations the ``error``.

    Passed to ``Actor.on_stop`` and carried by ``Terminated``. Build them with the class
    methods; compare with ``reason.kind is StopKind.CRASHED``.
    """

    kind: StopKind
    error: BaseException | None = None

    @classmethod
    def normal(cls) -> StopReason:
        """A graceful stop."""
        return cls(StopKind.NORMAL)

    @classmethod
    def cancelled(cls) -> StopReason:
        """An immediate stop."""
        return cls(StopKind.CANCELLED)

    @classmethod
    def crashed(cls, error: BaseException) -> StopReason:
        """A crash with ``error``."""
        return cls(StopKind.CRASHED, error)

    @classmethod
    def escalated(cls, error: BaseException) -> StopReason:
        """Supervision gave up after ``error``, the last of too many crashes."""
        return cls(StopKind.ESCALATED, error)

    def __str__(self) -> str:
        if self.error is None:
            return self.kind.value
        return f"{self.kind.value}: {self.error!r}"


@dataclass(frozen=True, slots=True)
class Terminated:
    """Death-watch notice: the actor behind ``ref`` has stopped for good, for ``reason``.

    Returned by ``Watcher.wait()``, and delivered as a message to actors that called
    ``context.watch(ref)`` (handle it with ``@handles(Terminated)``).
    """

    ref: ActorRef[Any]
    reason: StopReason


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that was accepted but could not be delivered, and that no ``stop()`` call
    returned: left in the mailbox of an actor that stopped on its own (crash without restart,
    ``stop_self()``, escalation, a parent stopping it, system shutdown).

    If the message was an ask, its asker has already received ``ActorStoppedError``.
    """

    recipient: str
    message: Any
