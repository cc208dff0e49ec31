"""A workflow actor's durable side: what it commits to a SessionStore, and how it comes back.

The actor commits before it acknowledges: each message is in the store before the actor's
history (and the caller's ``on_message`` sink) has it; the iteration count as it is spent; each
tool result of a batch as the tool returns, before the batch's results are recorded. So a
process killed at any point restarts with every accepted message, every finished tool result
and the budgets it had used, and a turn that was running resumes (the calls of its last reply
that have no result run again, or, for ``idempotent=False`` tools, are answered as interrupted).

Compaction and the forgetting of a finished turn's nudges change only the history in memory:
the store keeps the whole log, and :func:`restored_history` drops what the actor would have
dropped; compaction, deterministic, runs again on the next iteration.
"""

from __future__ import annotations

from typing import Any

import msgspec

from forge_rt.core import Message, Role, StepTracker, ToolCall
from forge_rt.errors import (
    RestoredToolError,
    StoreSchemaError,
    ToolInterruptedError,
    ToolResolutionError,
)
from forge_rt.guardrails import Budgets, ToolResult
from forge_rt.store import SessionStore, StoredSession

__all__ = [
    "STATE_VERSION",
    "ControlState",
    "SessionLog",
    "StoredResult",
    "decode_state",
    "restored_history",
]

STATE_VERSION = 1
"""The layout of :class:`ControlState`; a stored state of another version is refused."""


class StoredResult(msgspec.Struct, frozen=True, kw_only=True):
    """One finished call of a batch that had not been recorded yet."""

    call: ToolCall
    output: str | None = None
    error: str | None = None
    error_type: str | None = None  # "resolution", "interrupted", or the exception's class name

    @classmethod
    def of(cls, result: ToolResult) -> StoredResult:
        error = result.error
        if error is None:
            return cls(call=result.call, output=result.output)
        if isinstance(error, ToolResolutionError):
            kind = "resolution"
        elif isinstance(error, ToolInterruptedError):
            kind = "interrupted"
        elif isinstance(error, RestoredToolError):
            kind = error.type_name
        else:
            kind = type(error).__name__
        return cls(call=result.call, error=str(error), error_type=kind)

    def result(self) -> ToolResult:
        if self.error is None:
            return ToolResult(call=self.call, output=self.output)
        error: BaseException
        if self.error_type == "resolution":
            error = ToolResolutionError(self.error)
        elif self.error_type == "interrupted":
            error = ToolInterruptedError(self.error, tool=self.call.tool, call_id=self.call.call_id)
        else:
            error = RestoredToolError(self.error, type_name=self.error_type or "Exception")
        return ToolResult(call=self.call, error=error)


class ControlState(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a workflow actor needs besides its messages to carry on after a restart."""

    version: int = STATE_VERSION
    iteration: int = 0
    turn_open: bool = False  # a turn started and has not ended (cancelled or killed mid-way)
    completed_steps: tuple[str, ...] = ()
    step_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    budgets: Budgets | None = None  # None: nothing used yet
    finished: tuple[StoredResult, ...] = ()  # the running batch's results, not yet recorded
    running: str | None = None  # the call id of a non-idempotent tool that had started

    def tracker(self) -> StepTracker:
        return StepTracker.restore(self.completed_steps, self.step_calls)


_encode_state = msgspec.json.Encoder().encode
_decode_state = msgspec.json.Decoder(ControlState).decode


class SessionLog:
    """The store, the session's name and the version last committed: one actor's writer."""

    def __init__(self, store: SessionStore, name: str, workflow: str, *, version: int = 0) -> None:
        self.store = store
        self.name = name
        self.workflow = workflow
        self.version = version

    async def commit(self, messages: list[Message], state: ControlState) -> None:
        self.version = await self.store.commit(
            self.name,
            workflow=self.workflow,
            messages=messages,
            state=_encode_state(state),
            status="in_turn" if state.turn_open else "idle",
            expect_version=self.version,
        )


def decode_state(stored: StoredSession, store: SessionStore) -> ControlState:
    """The stored session's control state (a session with no commit of state yet: empty)."""
    if not stored.state:
        return ControlState()
    state = _decode_state(stored.state)
    if state.version != STATE_VERSION:
        raise StoreSchemaError(
            f"session {stored.info.name!r} in {store.description} holds control state version "
            f"{state.version}; this forge_rt reads version {STATE_VERSION}",
            store=store.description,
            found=state.version,
            supported=STATE_VERSION,
        )
    return state


def restored_history(messages: tuple[Message, ...], state: ControlState) -> list[Message]:
    """The history the actor had in memory when it last committed.

    A finished turn's nudges and failed attempts (``transient``) were forgotten; an open turn's
    own are kept (they are the corrections the model has seen in it).
    """
    if not state.turn_open:
        return [m for m in messages if not m.transient]
    last_user = max((i for i, m in enumerate(messages) if m.role is Role.USER), default=0)
    return [m for i, m in enumerate(messages) if i >= last_user or not m.transient]
