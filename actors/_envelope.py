"""The envelope an ask travels in: the message, and a slot for the reply.

A tell is queued as the bare message (no allocation); an ask is queued as an ``AskEnvelope``.
The asker parks with ``trio.lowlevel.wait_task_rescheduled`` and the actor reschedules it
with the reply, which costs less than an Event per ask and gives a precise abort hook: an
asker that is cancelled (or times out) marks the envelope abandoned, and the actor skips it
if its handler has not started yet.
"""

from __future__ import annotations

from typing import Any

import trio

from ._errors import ActorError

__all__ = ["AskEnvelope"]


class AskEnvelope:
    """One ask in flight: written by the actor, read by the asker."""

    __slots__ = ("abandoned", "error", "finished", "message", "result", "task")

    def __init__(self, message: Any) -> None:
        self.message = message
        self.task: trio.lowlevel.Task | None = None
        self.abandoned = False
        self.finished = False
        self.result: Any = None
        self.error: ActorError | None = None

    def reply(self, result: Any) -> None:
        """Hand the handler's return value to the asker (dropped if the asker left)."""
        self.result = result
        self._finish()

    def fail(self, error: ActorError) -> None:
        """Make the asker raise ``error`` (dropped if the asker left)."""
        self.error = error
        self._finish()

    def _finish(self) -> None:
        self.finished = True
        task = self.task
        if task is not None:
            self.task = None
            trio.lowlevel.reschedule(task)

    async def wait(self) -> Any:
        """Park until the actor replies. Call right after the envelope was queued: queueing
        was the checkpoint, so a reply that is already there is returned without another one.
        """
        if not self.finished:
            self.task = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort)
        if self.error is not None:
            raise self.error
        return self.result

    def _abort(self, raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
        # The asker was cancelled (its own scope or a timeout): nobody will read a reply now.
        self.task = None
        self.abandoned = True
        return trio.lowlevel.Abort.SUCCEEDED
