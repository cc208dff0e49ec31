"""Approval of tool calls: a workflow pauses before a call its policy says to approve.

The pause is in the WorkflowActor, right before such a call would run (a fresh call or one a
cancellation or restart left without a result). It asks an approval callback if the session was
given one, or else waits until the API answers (``WorkflowHandle.approve`` / ``deny``). The
actor's mailbox is busy while its turn runs, so the handle reaches the waiting call through
the :class:`ApprovalGate` the two share, not through a message.

Nothing about a pending approval lives only here: which call waits is derived from the history
(the unanswered call of the last accepted reply) and the policy (its tool's verdict). A session
restored after a restart, resumed, reaches the same call and asks again -- which is what makes
an approval durable. A resumed call is asked with ``resumed=True``: it may have started before
the interruption, and the approver, not the model, decides whether it runs again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
import trio

from actors import quiet_logger
from forge_rt.core import ToolCall, Workflow
from forge_rt.errors import ApprovalNotPendingError, ToolDeclinedError
from forge_rt.guardrails import Allow, Approve, Deny, Policy, ToolResult, apply_policy

__all__ = ["ApprovalCallback", "ApprovalGate", "ApprovalRequest", "gated"]

_log = quiet_logger(__name__)


class ApprovalRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One call waiting for a yes or no.

    ``workflow`` and ``actor`` say whose call it is, ``call_id`` which one (pass it to
    ``WorkflowHandle.approve`` / ``deny``), ``tool`` and ``args`` what would run, ``question``
    what to ask the user (the policy's, or one naming the call). ``resumed`` is set when the
    call was cut off by a cancellation or restart before it had a result: it may have started.
    """

    workflow: str
    actor: str
    call_id: str
    tool: str
    args: dict[str, Any]
    question: str
    resumed: bool = False


ApprovalCallback = Callable[[ApprovalRequest], Awaitable[Allow | Deny]]
"""Decides one approval: ``Allow()`` runs the call, ``Deny(reason)`` answers it declined. It
runs inside the turn, so the turn's deadline and cancellation apply to it."""


class _Waiting:
    def __init__(self, request: ApprovalRequest) -> None:
        self.request = request
        self.answered = trio.Event()
        self.answer: Allow | Deny | None = None


class ApprovalGate:
    """The approvals of one workflow actor: which tools ask, and the calls waiting now.

    ``approve`` maps each tool whose calls need approval to its verdict; ``withheld`` maps each
    denied tool to the policy's reason (a call of one that a resumed history still holds is
    answered declined, never run). ``callback``: who decides; without one, the API does.
    """

    def __init__(
        self,
        *,
        workflow: str,
        actor: str,
        approve: Mapping[str, Approve],
        withheld: Mapping[str, str],
        callback: ApprovalCallback | None,
    ) -> None:
        self.workflow = workflow
        self.actor = actor
        self.approve = dict(approve)
        self.withheld = dict(withheld)
        self._callback = callback
        self._waiting: dict[str, _Waiting] = {}
        self._arrived = trio.Event()  # set (and replaced) whenever a call starts waiting

    def asks(self, tool: str) -> bool:
        """Whether a call of ``tool`` must pass :meth:`ask` before it may run."""
        return tool in self.approve or tool in self.withheld

    async def ask(self, call: ToolCall, *, resumed: bool) -> ToolResult | None:
        """Wait for the decision on ``call``: ``None`` when it may run, else its declined
        result (a :class:`~forge_rt.errors.ToolDeclinedError`, fed back to the model)."""
        if call.tool in self.withheld:
            return _declined(call, f"the policy denies it ({self.withheld[call.tool]})")
        verdict = self.approve[call.tool]
        request = ApprovalRequest(
            workflow=self.workflow,
            actor=self.actor,
            call_id=call.call_id,
            tool=call.tool,
            args=dict(call.args),
            question=verdict.question or _question(call),
            resumed=resumed,
        )
        _log.info("workflow.approval_asked", actor=self.actor, tool=call.tool, call=call.call_id)
        answer = await (self._callback(request) if self._callback else self._wait(request))
        if not isinstance(answer, Allow | Deny):
            raise TypeError(
                f"the approval callback answered {answer!r} for {call.tool}; answer Allow() "
                "to run the call or Deny(reason) to decline it"
            )
        _log.info(
            "workflow.approval_answered",
            actor=self.actor,
            tool=call.tool,
            call=call.call_id,
            approved=isinstance(answer, Allow),
        )
        if isinstance(answer, Deny):
            return _declined(call, f"the user said no ({answer.reason})")
        return None

    async def _wait(self, request: ApprovalRequest) -> Allow | Deny:
        waiting = _Waiting(request)
        self._waiting[request.call_id] = waiting
        self._arrived.set()
        self._arrived = trio.Event()
        try:
            await waiting.answered.wait()  # cancellable: the turn's scope ends the wait
        finally:
            del self._waiting[request.call_id]
        assert waiting.answer is not None  # set before the event
        return waiting.answer

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The calls waiting for an answer from the API now, oldest first."""
        return tuple(w.request for w in self._waiting.values() if w.answer is None)

    async def next_request(self) -> ApprovalRequest:
        """The oldest call waiting for an answer, waiting until there is one (cancellable)."""
        while not self.pending():
            await self._arrived.wait()
        return self.pending()[0]

    def decide(self, call_id: str, answer: Allow | Deny) -> None:
        """Answer the waiting call ``call_id``; raises :class:`ApprovalNotPendingError` when
        no call of that id waits (never asked, already answered, or its turn ended)."""
        waiting = self._waiting.get(call_id)
        if waiting is None or waiting.answer is not None:
            pending = [r.call_id for r in self.pending()]
            raise ApprovalNotPendingError(
                f"workflow {self.actor!r}: no call {call_id!r} is waiting for approval; "
                f"waiting: {pending}",
                call_id=call_id,
                pending=pending,
            )
        waiting.answer = answer
        waiting.answered.set()


def _question(call: ToolCall) -> str:
    args = msgspec.json.encode(call.args).decode()
    return f"Allow the assistant to run {call.tool} with {args}?"


def _declined(call: ToolCall, reason: str) -> ToolResult:
    return ToolResult(
        call=call,
        error=ToolDeclinedError(
            f"{call.tool} was declined: {reason}",
            tool=call.tool,
            call_id=call.call_id,
            reason=reason,
        ),
    )


def gated(
    workflow: Workflow,
    policy: Policy | None,
    *,
    actor: str,
    callback: ApprovalCallback | None,
) -> tuple[Workflow, ApprovalGate]:
    """``workflow`` as ``policy`` lets it run (denied tools removed; see
    :func:`~forge_rt.guardrails.apply_policy`, whose :class:`~forge_rt.errors.PolicyError` it
    raises) and the gate of its actor. Without a policy every tool is allowed."""
    if policy is None:
        return workflow, ApprovalGate(
            workflow=workflow.name, actor=actor, approve={}, withheld={}, callback=callback
        )
    applied = apply_policy(workflow, policy)
    for decision in applied.decisions:
        if not decision.declared:
            _log.info("workflow.tool_needs_undeclared", workflow=workflow.name, tool=decision.tool)
    gate = ApprovalGate(
        workflow=workflow.name,
        actor=actor,
        approve=applied.approve,
        withheld=applied.withheld,
        callback=callback,
    )
    return applied.workflow, gate
