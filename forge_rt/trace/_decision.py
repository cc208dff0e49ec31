"""Guardrail verdicts in comparable form: what a trace records and what replay compares.

The same functions turn the live run's actions and the replay's actions into
:class:`~forge_rt.trace.Decision` / :class:`~forge_rt.trace.RecordDecision`, so a difference
replay reports is one in what the guardrails decided, never in how it was written down.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import msgspec

from forge_rt.core import Message
from forge_rt.guardrails import (
    Action,
    Execute,
    Fatal,
    RecordOutcome,
    RetryWithNudge,
    StepBlocked,
    TextAnswer,
    ToolErrors,
    retry_reason,
)
from forge_rt.trace._events import CallRecord, Decision, RecordDecision, RefusalRecord

__all__ = ["decision_of", "messages_hash", "record_decision"]


def decision_of(action: Action) -> Decision:
    """``action`` as a :class:`Decision`: its kind, calls, refusals, reason and corrections."""
    match action:
        case Execute():
            return Decision(
                kind="execute",
                calls=[_call(c.tool, c.args, c.call_id) for c in action.calls],
                refused=[RefusalRecord(tool=r.call.tool, reason=r.reason) for r in action.refused],
                dialects=tuple(str(d) for d in action.rescued_dialects),
                collapsed=action.collapsed,
                nudges=[r.nudge.content for r in action.refused],
            )
        case TextAnswer():
            return Decision(kind="text_answer", rule=action.rule or None)
        case Fatal():
            return Decision(kind="fatal", error=type(action.error).__name__)
        case RetryWithNudge():
            return Decision(
                kind="retry_nudge",
                reason=retry_reason(action).value,
                rule=action.rule or None,
                nudges=[action.nudge.content],
            )
        case ToolErrors():
            return Decision(
                kind="tool_errors",
                reason=retry_reason(action).value,
                rule=action.rule or None,
                calls=[_call(c.tool, c.args, c.call_id) for c in action.calls],
                collapsed=action.collapsed,
                nudges=[n.content for n in (*action.errors, *action.held_back)],
            )
        case StepBlocked():
            return Decision(
                kind="step_blocked",
                reason=retry_reason(action).value,
                rule=action.rule or None,
                calls=[_call(c.tool, c.args, c.call_id) for c in action.calls],
                nudges=[n.content for n in (*action.errors, *action.held_back)],
            )
    raise AssertionError(f"unhandled guardrail action {type(action).__name__}")


def record_decision(outcome: RecordOutcome) -> RecordDecision:
    """What recording a batch decided, with a hash of the result messages' text."""
    return RecordDecision(
        done=outcome.done,
        terminal_tool=outcome.terminal_call.tool if outcome.terminal_call is not None else None,
        fatal=type(outcome.fatal).__name__ if outcome.fatal is not None else None,
        failed=outcome.failed,
        messages_hash=_digest(m.content for m in outcome.messages),
    )


_encoder = msgspec.json.Encoder()


def messages_hash(messages: Iterable[Message]) -> str:
    """A short, stable hash of a history (roles, contents, calls): the same prompt, the same
    hash, so two requests can be told apart without writing the history into every line."""
    return _digest(_encoder.encode(m).decode() for m in messages)


def _digest(parts: Iterable[str]) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _call(tool: str, args: dict[str, object], call_id: str) -> CallRecord:
    return CallRecord(tool=tool, args=dict(args), call_id=call_id)
