"""One guarded inference step, shared by the WorkflowActor's loop and the proxy.

An attempt is one inference on the SlotWorker and the Guardrails' verdict on its reply (rescue,
validation, step and prerequisite enforcement, the loop guard). :meth:`GuardedStep.run` repeats
attempts until a reply is accepted -- calls to run, or a text answer -- handing each rejected
reply to the caller, who appends its correction to the history it owns. A budget that runs out
ends the step with its typed error, raised.

What differs between the two users stays with them, as two hooks: ``prepare`` builds each
attempt's request (the actor checks its iteration budget and compacts first; the proxy starts a
new stream-gate attempt), ``on_rejected`` records a rejected reply (the actor appends the
correction to its history and tells its stream listener to discard what it saw; the proxy may
find that a partly streamed reply is already the answer). Everything else is here once: the
slot call, the usage accounting, the verdict, and the counting of retries by
:class:`~forge_rt.guardrails.RetryReason`, the vocabulary ``RunStats``, the proxy's metrics and
the eval's records share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec
import trio

from forge_rt.core import InferenceRequest, LLMResponse, StreamChunk
from forge_rt.guardrails import (
    Execute,
    Fatal,
    Guardrails,
    Rejection,
    RetryReason,
    TextAnswer,
    retry_reason,
)
from forge_rt.runtime._slot import SlotWorker

__all__ = ["Accepted", "GuardedStep", "Rejected", "RunStats", "SlotCall"]

ChunkSink = Callable[[StreamChunk], Awaitable[None]]
ResponseHook = Callable[[LLMResponse], Awaitable[None]]
Prepare = Callable[[], Awaitable[InferenceRequest]]


class RunStats(msgspec.Struct, kw_only=True):
    """What one turn (or one proxy request) cost and which guardrails fired.

    ``retries`` is keyed by :class:`~forge_rt.guardrails.RetryReason` values; ``rescued`` by the
    dialect a call was rescued from. The eval records these.
    """

    iterations: int = 0
    inferences: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    retries: dict[str, int] = msgspec.field(default_factory=dict)
    rescued: dict[str, int] = msgspec.field(default_factory=dict)
    collapsed: int = 0
    compactions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    constraint: str | None = None
    wall_s: float = 0.0

    def count_retry(self, cause: str) -> None:
        self.retries[cause] = self.retries.get(cause, 0) + 1


class SlotCall(msgspec.Struct, frozen=True, kw_only=True):
    """How a step's inferences go through the slot (see ``SlotWorker.infer``).

    ``deadline`` is in seconds for each inference, ``deadline_at`` a point on trio's clock by
    which every inference must be done (a request's whole deadline); the nearer one applies.
    ``whole`` fetches replies in one piece for a caller that streams nothing.
    """

    priority: int = 0
    deadline: float | None = None
    deadline_at: float | None = None
    on_chunk: ChunkSink | None = None
    affinity_key: str | None = None
    whole: bool = False

    def deadline_now(self) -> float | None:
        """The deadline, in seconds from now, for an inference that starts now."""
        if self.deadline_at is None:
            return self.deadline
        left = self.deadline_at - trio.current_time()
        return left if self.deadline is None else min(left, self.deadline)


class Accepted(msgspec.Struct, frozen=True, kw_only=True):
    """A reply the guardrails accepted: ``action`` says what to do with it."""

    action: Execute | TextAnswer
    response: LLMResponse


class Rejected(msgspec.Struct, frozen=True, kw_only=True):
    """A reply the guardrails rejected; ``action.messages()`` is its correction."""

    action: Rejection
    response: LLMResponse
    reason: RetryReason


RejectedHook = Callable[[Rejected], Awaitable[Accepted | None]]


class GuardedStep:
    """Inference through ``slot``, checked by ``guardrails``, counted in ``stats``.

    ``on_response`` sees every reply before it is checked (usage reporting, token calibration).
    """

    def __init__(
        self,
        slot: SlotWorker,
        guardrails: Guardrails,
        stats: RunStats,
        *,
        on_response: ResponseHook | None = None,
    ) -> None:
        self._slot = slot
        self.guardrails = guardrails
        self.stats = stats
        self._on_response = on_response

    async def attempt(self, request: InferenceRequest, call: SlotCall) -> Accepted | Rejected:
        """One inference and its verdict; an exhausted budget raises its typed error."""
        response = await self._slot.infer(
            request,
            priority=call.priority,
            deadline=call.deadline_now(),
            on_chunk=call.on_chunk,
            affinity_key=call.affinity_key,
            whole=call.whole,
        )
        stats = self.stats
        stats.inferences += 1
        stats.prompt_tokens += response.usage.prompt_tokens or 0
        stats.completion_tokens += response.usage.completion_tokens or 0
        if self._on_response is not None:
            await self._on_response(response)
        action = self.guardrails.check(response)
        match action:
            case Execute():
                stats.collapsed += action.collapsed
                for dialect in action.rescued_dialects:
                    stats.rescued[str(dialect)] = stats.rescued.get(str(dialect), 0) + 1
                return Accepted(action=action, response=response)
            case TextAnswer():
                return Accepted(action=action, response=response)
            case Fatal():
                raise action.error
            case _:
                reason = retry_reason(action)
                stats.count_retry(reason.value)
                return Rejected(action=action, response=response, reason=reason)

    async def run(self, prepare: Prepare, call: SlotCall, on_rejected: RejectedHook) -> Accepted:
        """Attempts until one is accepted (or ``on_rejected`` accepts a rejected one)."""
        while True:
            verdict = await self.attempt(await prepare(), call)
            if isinstance(verdict, Accepted):
                return verdict
            accepted = await on_rejected(verdict)
            if accepted is not None:
                return accepted
