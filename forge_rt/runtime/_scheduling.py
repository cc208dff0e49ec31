"""What a SlotWorker schedules: inference jobs, and the order it runs them in.

Order is priority first (lower number first), then cache affinity (a job whose prompt continues
what the slot last processed keeps the KV cache warm), then age. The starvation bound is in
seconds: a job that has waited ``max_wait_s`` is *overdue* and goes ahead of every job that is
not, oldest overdue first. So under continuous higher-priority load a call waits
``max_wait_s`` plus the call running when it fell due (and the overdue calls older than it),
not forever. An urgent call does not wait for it either: an urgent arrival may cut an overdue
call once (the SlotWorker's rule), after which it runs to its end -- so under continuous urgent
load the bound is ``max_wait_s`` plus two calls, and an urgent call waits for background work
only then.

A full queue sheds the least urgent work (:func:`pick_victim`): the waiting job with the highest
priority number, the youngest of those, makes room for a more urgent arrival; an arrival no
more urgent than every waiting job is the one refused.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Sequence
from typing import Any

import msgspec
import trio

from forge_rt.core import InferenceRequest, LLMResponse, Message, OutputConstraint, StreamChunk
from forge_rt.trace import SlotEventKind, Tracer

__all__ = [
    "DEFAULT_MAX_WAIT_S",
    "InferenceJob",
    "JobFailed",
    "PreemptPolicy",
    "fingerprint",
    "pick_next",
    "pick_victim",
]

_job_ids = itertools.count(1)

# The default starvation bound: long enough that priorities mean something for calls of a few
# seconds to a minute (a 1.5B reply on a laptop CPU), short enough that background work under
# continuous foreground load still runs about once a minute.
DEFAULT_MAX_WAIT_S = 60.0


class PreemptPolicy(enum.StrEnum):
    """When a strictly higher-priority call may interrupt a running one."""

    ALWAYS = "always"
    BEFORE_FIRST_TOKEN = "before_first_token"
    NEVER = "never"


def fingerprint(messages: Sequence[Message]) -> tuple[int, ...]:
    """One hash per message, so "continues the cached prompt" is a cheap prefix test."""
    encode = msgspec.msgpack.encode
    return tuple(hash(encode((m.role, m.content, m.tool_calls, m.tool_call_id))) for m in messages)


class JobFailed(msgspec.Struct, frozen=True):
    """Delivered to a job's caller instead of a final chunk when the call failed."""

    error: BaseException


class InferenceJob:
    """One inference call waiting for, or running on, a slot.

    The caller owns ``receive``; the slot writes stream chunks (none for a ``whole`` job, which
    is fetched as one reply) and then exactly one ``FinalChunk`` or ``JobFailed`` into ``send`` (unbounded, so a slow reader never holds the
    slot). ``abandon()`` is how a caller that went away releases the job without a message.
    """

    __slots__ = (
        "abandoned",
        "affinity_key",
        "attempt_scope",
        "attempts",
        "continuation",
        "cut_since",
        "cut_while_overdue",
        "decoded",
        "finished",
        "first_token_at",
        "fp",
        "id",
        "line",
        "preempt_requested",
        "preemptions",
        "prefill",
        "priority",
        "receive",
        "request",
        "restarts",
        "send",
        "started_at",
        "submitted_at",
        "tracer",
        "whole",
    )

    def __init__(
        self,
        request: InferenceRequest,
        *,
        priority: int,
        affinity_key: str | None = None,
        whole: bool = False,
        tracer: Tracer | None = None,
    ) -> None:
        self.id = next(_job_ids)
        self.tracer = tracer  # the caller's trace, told what happens to the call
        self.request = request
        self.whole = whole
        self.priority = priority
        self.affinity_key = affinity_key
        self.fp = fingerprint(request.messages)
        self.submitted_at = trio.current_time()
        self.started_at: float | None = None
        self.first_token_at: float | None = None
        self.preemptions = 0
        self.attempts = 0
        self.preempt_requested = False
        self.abandoned = False
        self.finished = False
        self.attempt_scope: trio.CancelScope | None = None
        self.prefill = ""
        # For a constrained call continued from ``prefill``: the constraint on the rest.
        self.continuation: OutputConstraint | None = None
        self.decoded = 0  # tokens streamed by earlier attempts and kept (continued from)
        self.restarts = 0  # preemptions that threw the call's work away
        self.cut_while_overdue = False  # an urgent call used its one cut of this overdue call
        self.cut_since: float | None = None  # when the backend first cut its stream mid-reply
        self.line: int | None = None  # the backend KV slot (cache line) of its last attempt
        self.send: trio.MemorySendChannel[StreamChunk | JobFailed]
        self.receive: trio.MemoryReceiveChannel[StreamChunk | JobFailed]
        self.send, self.receive = trio.open_memory_channel(math.inf)

    def abandon(self) -> None:
        """The caller is gone: stop the running attempt (closing its HTTP stream) or unqueue."""
        if self.finished:
            return
        self.abandoned = True
        if self.attempt_scope is not None:
            self.attempt_scope.cancel()

    def traced(self, kind: SlotEventKind, **fields: Any) -> None:
        """Tell the caller's trace what just happened to this call (nothing without one)."""
        if self.tracer is not None:
            fields.setdefault("attempt", self.attempts)
            self.tracer.slot(kind, job=self.id, priority=self.priority, line=self.line, **fields)

    def overdue(self, now: float, max_wait_s: float | None) -> bool:
        """Whether it has waited past the starvation bound (never, with ``None``)."""
        return max_wait_s is not None and now - self.submitted_at >= max_wait_s

    def complete(self, response: LLMResponse) -> None:
        from forge_rt.core import FinalChunk

        self._deliver(FinalChunk(response))

    def fail(self, error: BaseException) -> None:
        self._deliver(JobFailed(error))

    def _deliver(self, outcome: StreamChunk | JobFailed) -> None:
        """Hand the caller its outcome; a caller that already left gets nothing (it cancelled)."""
        self.finished = True
        try:
            self.send.send_nowait(outcome)
        except trio.BrokenResourceError:
            self.abandoned = True
        self.send.close()

    def __repr__(self) -> str:
        return f"<InferenceJob #{self.id} priority={self.priority} preempted={self.preemptions}>"


def continues(job_fp: tuple[int, ...], cached: tuple[int, ...]) -> bool:
    """Whether a prompt starts with everything the slot's KV cache holds."""
    return bool(cached) and len(job_fp) >= len(cached) and job_fp[: len(cached)] == cached


def pick_next(
    queue: Sequence[InferenceJob],
    *,
    now: float,
    cached: tuple[int, ...],
    max_wait_s: float | None,
) -> InferenceJob | None:
    """The job to run next: overdue jobs (oldest first), then the rest by priority; within
    each, cache affinity, then age."""
    best: InferenceJob | None = None
    best_key: tuple[int, int, int, float, int] | None = None
    for job in queue:
        if job.abandoned:
            continue
        if job.overdue(now, max_wait_s):
            tier, priority = 0, 0  # among overdue jobs age alone decides: a bound is a bound
        else:
            tier, priority = 1, job.priority
        key = (
            tier,
            priority,
            0 if continues(job.fp, cached) else 1,
            job.submitted_at,
            job.id,
        )
        if best_key is None or key < best_key:
            best, best_key = job, key
    return best


def pick_victim(queue: Sequence[InferenceJob], arrival: InferenceJob) -> InferenceJob | None:
    """Of a full queue, the job to drop for ``arrival``: the least urgent, youngest first.

    ``None`` when nothing waiting is less urgent than the arrival: then the arrival is refused
    (it is itself the least urgent and youngest). A job preempted mid-call is the last
    candidate of its priority: dropping it would throw away work already done.
    """
    victim: InferenceJob | None = None
    victim_key: tuple[int, int, float, int] | None = None
    for job in queue:
        if job.abandoned or job.priority <= arrival.priority:
            continue
        key = (job.priority, 0 if job.started_at is None else -1, job.submitted_at, job.id)
        if victim_key is None or key > victim_key:
            victim, victim_key = job, key
    return victim
