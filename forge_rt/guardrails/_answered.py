"""Calls already answered: the rule ``answered_calls``.

A caller that owns the loop (a proxy client) runs the calls it gets and sends the whole history
back with the next request. Small models loop by sending one of those calls again. A runtime
runs the calls itself, and a call of a tool that is not idempotent (it books, sends, writes)
must not run twice because the model asked twice. :class:`AnsweredCalls` remembers every call the
history answered, and every such write that succeeded in this turn -- by :func:`call_key`, with
its latest result -- and judges a reply's calls against them:

- beside a fresh call (or an answer) a repeat is dropped: the caller has its result already;
- alone, it is answered from the history, out of the caller's sight, with the earlier result
  and a note saying what moves the task on;
- insisted on, a :class:`LoopGuard` of two warns, then ends the turn with
  :class:`~forge_rt.errors.ToolLoopError`; the warned tools leave the next constraint;
- every reply answered so counts against the turn's retry budget, which a valid reply does not
  reset (else two answered calls alternated would never end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from forge_rt.core import Message, MessageType, Role, ToolArgumentError, ToolCall, ToolSpec
from forge_rt.guardrails._actions import StepBlocked
from forge_rt.guardrails._errors_budget import ErrorTracker
from forge_rt.guardrails._loop_guard import LoopGuard
from forge_rt.guardrails._nudges import Nudge, repeat_note
from forge_rt.guardrails._validator import CallKey, call_key

__all__ = ["ANSWERED_REPEATS", "AnsweredCalls", "answered_calls"]

ANSWERED_REPEATS = 2
"""Replies in a row the same answered call may fill before the warning: the first is answered
from the history, the second warned, a third ends the turn."""


def _validated(call: ToolCall, specs: Mapping[str, ToolSpec]) -> ToolCall:
    """``call`` with its arguments as validation leaves them (as a reply's calls are), or as
    written when its tool is not offered now or they do not validate."""
    spec = specs.get(call.tool)
    if spec is None:
        return call
    try:
        args = spec.validate_args(call.args)
    except ToolArgumentError:
        return call
    return msgspec.structs.replace(call, args=args)


def answered_calls(
    messages: Sequence[Message], specs: Mapping[str, ToolSpec]
) -> dict[CallKey, str]:
    """The calls of ``messages`` that a tool result answers, by :func:`call_key`, each with its
    latest result."""
    calls: dict[str, ToolCall] = {}
    answered: dict[CallKey, str] = {}
    for message in messages:
        if message.role is Role.ASSISTANT and message.tool_calls:
            calls.update((c.call_id, c) for c in message.tool_calls)
        elif message.role is Role.TOOL and message.tool_call_id in calls:
            call = calls[message.tool_call_id]
            answered[call_key(_validated(call, specs))] = message.content
    return answered


class AnsweredCalls:
    """What a history answered, and the verdicts on a reply that calls it again (see the module
    docstring). ``max_retries`` bounds the replies answered from the history in one turn."""

    def __init__(self, max_retries: int) -> None:
        self._answered: dict[CallKey, str] = {}  # from the caller's history
        self._written: dict[CallKey, str] = {}  # this turn's writes that succeeded
        self._loop = LoopGuard(ANSWERED_REPEATS)
        self._budget = ErrorTracker(max_retries=max_retries, max_tool_errors=0)
        self._max_retries = max_retries
        self.warned: frozenset[str] = frozenset()
        """Tools whose answered call was insisted on past the warning: the next constraint
        leaves them out."""

    def observe(self, messages: Sequence[Message], specs: Mapping[str, ToolSpec]) -> None:
        """Take the calls ``messages`` answered; a new turn starts its rows and budget."""
        self._answered = answered_calls(messages, specs)
        self.new_turn()

    def new_turn(self) -> None:
        """A new user turn: its writes, rows and budget start over (asked again in a new turn,
        the same write is the user's wish, not a repeat)."""
        self._written = {}
        self._loop = LoopGuard(ANSWERED_REPEATS)
        self._budget = ErrorTracker(max_retries=self._max_retries, max_tool_errors=0)
        self.warned = frozenset()

    def wrote(self, call: ToolCall, output: str) -> None:
        """``call``, of a tool that is not idempotent, succeeded with ``output`` this turn."""
        self._written[call_key(call)] = output

    @property
    def blocked(self) -> tuple[ToolCall, ...]:
        """The repeats the warning blocked: one more ends the turn, so a constraint excludes
        them."""
        return self._loop.blocked

    def again(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """The calls of ``calls`` the history answered, or that wrote this turn already."""
        return [c for c in calls if self._result(c) is not None]

    def _result(self, call: ToolCall) -> str | None:
        key = call_key(call)
        written = self._written.get(key)
        return written if written is not None else self._answered.get(key)

    def judge(
        self,
        repeated: Sequence[ToolCall],
        *,
        raw: str,
        text: str,
        next_step: Callable[..., str],
    ) -> StepBlocked:
        """The verdict on a reply made only of ``repeated`` answered calls: answered from the
        history, or the loop guard's warning. Raises ToolLoopError on a third insistence and
        ToolCallError once the turn's budget is spent."""
        self._budget.record_retry(raw, "calls already answered in the history")
        warned = self._loop.observe(repeated, text=text, next_step=next_step)
        if warned is not None:
            self.warned |= {
                c.tool for c in repeated if self._loop.streak(c) >= self._loop.max_repeats
            }
            return warned
        errors = [
            Nudge(
                kind=MessageType.STEP_NUDGE,
                role=Role.TOOL,
                content=(self._result(c) or "") + repeat_note(c.tool, next_step(avoid=c.tool)),
                call_id=c.call_id,
                tool=c.tool,
            )
            for c in repeated
        ]
        return StepBlocked(calls=list(repeated), errors=errors, reason="loop", text=text)
