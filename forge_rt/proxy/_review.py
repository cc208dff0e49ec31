"""The proxy's last look at a reply the guardrails accepted, before any of it is returned.

The :class:`~forge_rt.guardrails.Guardrails` judge a reply on its own. The proxy knows two
things more, and :class:`ReplyReview` acts on them.

**Guardrail text.** The corrections the proxy wrote into its private history may come back in
the reply (:mod:`~forge_rt.proxy._leaks`). Text that is returned as content -- a ``respond``
message, prose beside calls, a committed answer -- ends where the guardrail text begins; a
``respond`` message that is nothing *but* guardrail text, and a client tool's argument that
holds any, are rejected like arguments that fail their schema (the model is told, the client
sees nothing), since neither can be cut into something true.

**The request's history.** A client runs the calls it gets and sends the whole history back
with the next request, so the proxy sees which calls were already answered. Small models loop
by re-sending one of those (``get_weather("Lyon")`` six times over). A call identical to one
answered in the history -- same tool, same arguments after validation, the guardrails'
:func:`call_key` -- is never returned again:

- beside a fresh call (or, with the synthetic ``respond`` tool, an answer) it is dropped: the
  rest is returned, and the client has the dropped call's result already;
- alone, it is answered *from the history*, out of the client's sight: the proxy appends the
  call and its earlier result, with the guardrails' note that it was already made and which
  call moves the task on, and asks again -- exactly what the client would have done, re-running
  it, minus a round trip and minus the client's history filling with repeats;
- the same call insisted on again in this request gets the loop guard's warning (the guardrails'
  :class:`~forge_rt.guardrails.LoopGuard`, two replies) and, where the backend is constrained,
  its tool is left out of the constraint for the rest of the request, so the next reply cannot
  be that call; a third time the loop guard ends the request with
  :class:`~forge_rt.errors.ToolLoopError` (a 502 naming the call).

Every rejection here is a hidden retry like the guardrails' own, and all of them together are
bounded by the proxy's retry budget (an :class:`~forge_rt.guardrails.ErrorTracker` that,
unlike the guardrails' row, a valid reply does not reset): past it the request ends with
:class:`~forge_rt.errors.ToolCallError`. So a review can end a loop but never start one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from actors import quiet_logger
from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ArgumentError,
    LLMResponse,
    Message,
    MessageType,
    Role,
    TextResponse,
    ToolArgumentError,
    ToolCall,
    ToolSpec,
)
from forge_rt.guardrails import (
    ErrorTracker,
    Execute,
    Guardrails,
    LoopGuard,
    Nudge,
    RetryReason,
    StepBlocked,
    TextAnswer,
    ToolErrors,
    bad_args_nudge,
    held_back_nudge,
)

# The guardrails' own loop knowledge, which forge_rt.guardrails does not export (yet).
from forge_rt.guardrails._nudges import repeat_note
from forge_rt.guardrails._validator import call_key
from forge_rt.proxy._leaks import cut, marked_argument
from forge_rt.runtime import Accepted, Rejected

__all__ = ["ReplyReview", "answered_calls"]

log = quiet_logger(__name__)

_Key = tuple[str, bytes]

# How many replies in a row the same already-answered call may fill before the loop guard
# warns (the first is answered from the history, the second warned, a third ends the request).
_LOOP_REPEATS = 2

_ECHO_PROBLEM = (
    "Expected your own content, got the text of a correction copied back; write the real "
    "value, not the error message"
)


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


def answered_calls(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> dict[_Key, str]:
    """The calls of ``messages`` that a tool result answers, by :func:`call_key`, each with its
    latest result."""
    specs = {t.name: t for t in tools}
    calls: dict[str, ToolCall] = {}
    answered: dict[_Key, str] = {}
    for message in messages:
        if message.role is Role.ASSISTANT and message.tool_calls:
            calls.update((c.call_id, c) for c in message.tool_calls)
        elif message.role is Role.TOOL and message.tool_call_id in calls:
            call = calls[message.tool_call_id]
            answered[call_key(_validated(call, specs))] = message.content
    return answered


def _raw(response: LLMResponse) -> str:
    """The reply as the model sent it: its text, else its calls as JSON."""
    if response.raw_text:
        return response.raw_text
    if isinstance(response.result, TextResponse):
        return response.result.content
    calls = [{"name": c.tool, "arguments": c.args} for c in response.result]
    return msgspec.json.encode(calls).decode()


class ReplyReview:
    """Reviews one request's accepted replies (see the module docstring).

    ``guardrails`` are the request's (their tools and next-step advice); ``history`` is the
    conversation as the client sent it; ``respond`` says the synthetic ``respond`` tool is
    offered, so its calls are answers, not client calls; ``max_retries`` bounds the review's
    hidden retries.
    """

    def __init__(
        self,
        guardrails: Guardrails,
        history: Sequence[Message],
        *,
        respond: bool,
        max_retries: int,
    ) -> None:
        self._guard = guardrails
        self._history = history
        self._respond = respond
        self._specs = {t.name: t for t in guardrails.tools}
        self._answered: dict[_Key, str] | None = None
        self._loop = LoopGuard(_LOOP_REPEATS)
        self._budget = ErrorTracker(max_retries=max_retries, max_tool_errors=0)
        self.avoid: frozenset[str] = frozenset()
        """Tools the loop guard warned about: the constraint should leave them out now."""

    @property
    def blocked(self) -> tuple[ToolCall, ...]:
        """The repeated calls the review's loop guard blocked: one more of them ends the
        request, so the next constraint excludes them."""
        return self._loop.blocked

    def _is_answer(self, call: ToolCall) -> bool:
        return self._respond and call.tool == RESPOND_TOOL_NAME

    def check(self, accepted: Accepted) -> Accepted | Rejected:
        """``accepted`` as it may be returned (cut, or with repeats dropped), or the rejection
        to retry with. Raises ToolLoopError or ToolCallError when the review's budget is spent.
        """
        action = accepted.action
        if isinstance(action, TextAnswer):
            text, leaked = cut(action.text)
            if not leaked:
                return accepted
            log.info("proxy.guardrail_text_cut", kept_chars=len(text), where="answer")
            kept = msgspec.structs.replace(action, text=text)
            return Accepted(action=kept, response=accepted.response)
        return self._calls(action, accepted.response)

    def _calls(self, action: Execute, response: LLMResponse) -> Accepted | Rejected:
        calls: list[ToolCall] = []
        marked: dict[str, str] = {}
        for call in action.calls:
            if self._is_answer(call):
                message, leaked = cut(call.args["message"])
                if leaked and not message.strip():
                    marked[call.call_id] = "$.message"
                elif leaked:
                    log.info("proxy.guardrail_text_cut", kept_chars=len(message), where="respond")
                    call = msgspec.structs.replace(call, args={**call.args, "message": message})
            else:
                path = marked_argument(call.args)
                if path is not None:
                    marked[call.call_id] = path
            calls.append(call)
        text, leaked = cut(action.text)
        if leaked:
            log.info("proxy.guardrail_text_cut", kept_chars=len(text), where="prose")
        if marked:
            return self._echoed(calls, marked, text, response)
        if self._answered is None:
            self._answered = answered_calls(self._history, self._guard.tools)
        answered = self._answered
        repeated = [c for c in calls if not self._is_answer(c) and call_key(c) in answered]
        dropped = {c.call_id for c in repeated}
        kept = [c for c in calls if c.call_id not in dropped]
        if repeated and not kept:
            return self._repeated(repeated, answered, text, response)
        if repeated:
            log.info(
                "proxy.repeated_calls_dropped",
                tools=[c.tool for c in repeated],
                reason="already answered in the request's history",
            )
        final = msgspec.structs.replace(action, calls=kept, text=text)
        return Accepted(action=final, response=response)

    def _echoed(
        self, calls: list[ToolCall], marked: dict[str, str], text: str, response: LLMResponse
    ) -> Rejected:
        """Reject a reply whose arguments carry guardrail text, as invalid arguments are."""
        self._budget.record_retry(_raw(response), "guardrail text copied into the arguments")
        errors = [
            Nudge(
                kind=MessageType.RETRY_NUDGE,
                role=Role.TOOL,
                content=bad_args_nudge(
                    self._specs[c.tool], [ArgumentError(marked[c.call_id], _ECHO_PROBLEM)]
                ),
                call_id=c.call_id,
                tool=c.tool,
            )
            for c in calls
            if c.call_id in marked
        ]
        blocked = list(dict.fromkeys(c.tool for c in calls if c.call_id in marked))
        held = [
            Nudge(
                kind=MessageType.RETRY_NUDGE,
                role=Role.TOOL,
                content=held_back_nudge(c.tool, blocked),
                call_id=c.call_id,
                tool=c.tool,
            )
            for c in calls
            if c.call_id not in marked
        ]
        log.info("proxy.guardrail_text_rejected", tools=blocked)
        action = ToolErrors(
            calls=calls, errors=errors, held_back=held, text=text, rule="placeholders"
        )
        return Rejected(action=action, response=response, reason=RetryReason.INVALID_CALL)

    def _repeated(
        self,
        repeated: list[ToolCall],
        answered: Mapping[_Key, str],
        text: str,
        response: LLMResponse,
    ) -> Rejected:
        """Answer a reply of already-answered calls from the history, or warn, or end."""
        warned = self._loop.observe(repeated, text=text, next_step=self._guard.next_step)
        self._budget.record_retry(_raw(response), "calls already answered in the history")
        if warned is None:
            errors = [
                Nudge(
                    kind=MessageType.STEP_NUDGE,
                    role=Role.TOOL,
                    content=answered[call_key(c)]
                    + repeat_note(c.tool, self._guard.next_step(avoid=c.tool)),
                    call_id=c.call_id,
                    tool=c.tool,
                )
                for c in repeated
            ]
            log.info("proxy.repeat_answered_from_history", tools=[c.tool for c in repeated])
            action = StepBlocked(
                calls=repeated, errors=errors, reason="loop", text=text, rule="loop_guard"
            )
            return Rejected(action=action, response=response, reason=RetryReason.LOOP)
        self.avoid |= {c.tool for c in repeated if self._loop.streak(c) >= self._loop.max_repeats}
        log.info("proxy.repeat_warned", tools=sorted(self.avoid))
        warned = msgspec.structs.replace(warned, rule="loop_guard")
        return Rejected(action=warned, response=response, reason=RetryReason.LOOP)
