"""SlotWorker: the only path to one inference slot, scheduling calls with priorities and preemption.

Two actors per slot. The *scheduler* (``SlotWorkerActor``) owns the queue and decides what runs
next; the *executor* runs one attempt at a time, streaming chunks straight to the caller. A
strictly higher-priority arrival cancels the running attempt's cancel scope (which closes its HTTP
stream, so the backend stops generating); the preempted job is re-queued and re-run -- continued
from its partial text where the backend supports assistant prefill (a constrained call under
the rest of its constraint, :func:`~forge_rt.guardrails.continuation_constraint`), otherwise
restarted after a ``ResetChunk`` tells the caller to discard what it saw. The caller sees only
latency. Only restarts waste work, so only they count toward ``max_preemptions``, and a call at
``urgent_priority`` preempts regardless.

Admission and starvation (``runtime/_scheduling.py``): a full queue sheds its least urgent,
youngest call for a more urgent arrival, and a call that has waited ``max_wait_s`` goes ahead
of everything but urgent calls.

Scheduling is per inference call, not per workflow: while one workflow runs its tools, another
workflow's call uses the slot.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from actors import Actor, ActorRef, ActorSystem, handles, quiet_logger
from forge_rt.core import (
    FinalChunk,
    InferenceRequest,
    LLMClient,
    LLMResponse,
    PromptProgressChunk,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    ToolCallDeltaChunk,
    Workflow,
)
from forge_rt.errors import (
    BackendError,
    FaultKind,
    InferenceDeadlineError,
    InferenceStalledError,
    SlotEvictedError,
    SlotQueueFullError,
    StreamError,
)
from forge_rt.guardrails import continuation_constraint
from forge_rt.runtime._cache_lines import CacheLine, pick_line
from forge_rt.runtime._scheduling import (
    DEFAULT_MAX_WAIT_S,
    InferenceJob,
    JobFailed,
    PreemptPolicy,
    continues,
    pick_next,
    pick_victim,
)
from forge_rt.trace import Tracer

if TYPE_CHECKING:
    from forge_rt.runtime._workflow_actor import WorkflowResult

__all__ = [
    "BackendRetry",
    "PriorityWaits",
    "SlotPool",
    "SlotStats",
    "SlotWorker",
    "SlotWorkerActor",
    "StallLimits",
]

_log = quiet_logger(__name__)

# One runs; the others let a preempting call start while a preempted attempt unwinds.
_EXECUTORS = 3


_RETRIED_KINDS = frozenset(
    {
        FaultKind.CONNECT_REFUSED,
        FaultKind.CONNECT_TIMEOUT,
        FaultKind.RESET_BEFORE_FIRST_BYTE,
        FaultKind.RESET_MID_STREAM,  # only while retry-safe: nothing of it reached the caller
    }
)


class BackendRetry(msgspec.Struct, frozen=True, kw_only=True):
    """Riding out a backend that is briefly away (a restart, a reload), for ``window_s`` seconds.

    A call that failed before anything reached its caller -- the connection refused, reset
    before the response began or before its first chunk (a server killed mid-prefill), or a
    503 -- is tried again after a backoff that starts at
    ``first_backoff_s``, doubles up to ``max_backoff_s`` and is jittered (half to all of it), until
    the window is spent; then the last error goes to the caller. The embedded model restarts in
    about 3 s on the development machine; the 30 s default covers that ten times over. Faults
    that would only repeat (a 4xx, a 500, a stall) are never retried here, and neither is a
    backend the slot has never reached: a wrong URL fails at once instead of after the window.
    """

    window_s: float = 30.0
    first_backoff_s: float = 0.1
    max_backoff_s: float = 2.0

    def covers(self, outcome: object, elapsed_s: float) -> bool:
        """Whether ``outcome`` is worth another try, ``elapsed_s`` into the window."""
        if not isinstance(outcome, _Failed) or elapsed_s > self.window_s:
            return False
        error = outcome.error
        if not isinstance(error, BackendError) or not error.retry_safe:
            return False
        return error.kind in _RETRIED_KINDS or error.status == 503


class _Reached:
    """Whether the slot's backend has ever answered (shared by its executors)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False


DEFAULT_RETRY = BackendRetry()
"""What a SlotWorker rides out unless told otherwise: 30 s of a backend being away."""


class StallLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How long a running call may produce nothing before the slot gives up on it.

    The first token may take ``first_token_s`` plus one second per ``prefill_floor_tps`` prompt
    tokens (estimated at four characters each, tool schemas included): prefill grows with the
    prompt, so a fixed limit would either cut long prompts or wait too long on short ones. A
    backend that reports its progress on the prompt (llama-server, asked by
    :class:`~forge_rt.clients.LlamaServerClient`) restarts that wait with each report, for the
    tokens it says are left (:meth:`prefill_limit`): a prefill slowed by a crowded CPU keeps
    going as long as it moves, and a server that stops moving is caught. After the first token,
    each next chunk must come within ``between_chunks_s``. ``None`` turns a limit off. The
    defaults leave a wide margin over
    the embedded Qwen2.5-Coder on the 2-core development CPU (about 160 prompt tokens/s and
    20 generated tokens/s for the 0.5B, a third of that for the 1.5B, idle): a prefill floor eight
    times slower than the 0.5B's and a gap between tokens 500 times longer than its usual one.

    A call fetched whole (``whole=True``) streams nothing to watch between, so it gets one limit
    for the whole call: the first-token limit plus its ``max_tokens`` (``assumed_max_tokens``
    when the request sets none) at ``decode_floor_tps`` -- ten times slower than the 0.5B
    generates. A hung backend then ends the call in minutes, not at the client's read timeout.
    """

    first_token_s: float | None = 30.0
    prefill_floor_tps: float = 20.0
    between_chunks_s: float | None = 30.0
    decode_floor_tps: float = 2.0
    assumed_max_tokens: int = 2048

    def first_token_limit(self, request: InferenceRequest) -> float:
        if self.first_token_s is None:
            return math.inf
        size = sum(len(m.content) for m in request.messages) + sum(
            len(spec.description) + len(str(spec.json_schema())) for spec in request.tools
        )
        return self.first_token_s + size / 4 / self.prefill_floor_tps

    def prefill_limit(self, progress: PromptProgressChunk) -> float:
        """How long the rest of the prompt may take after a progress report: the first-token
        base plus the tokens it says are left, at the prefill floor."""
        if self.first_token_s is None:
            return math.inf
        return self.first_token_s + progress.remaining / self.prefill_floor_tps

    def whole_call_limit(self, request: InferenceRequest) -> float:
        if self.first_token_s is None or self.between_chunks_s is None:
            return math.inf
        tokens = request.sampling.max_tokens or self.assumed_max_tokens
        return self.first_token_limit(request) + tokens / self.decode_floor_tps


ChunkSink = Callable[[StreamChunk], Awaitable[None]]


class PriorityWaits(msgspec.Struct, kw_only=True):
    """Queue waits (submission to first start) of one priority level, in seconds."""

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0

    @property
    def mean_s(self) -> float:
        return self.total_s / self.count if self.count else 0.0


class SlotStats(msgspec.Struct, kw_only=True):
    """A snapshot of one slot's work.

    Of the calls cut mid-reply -- ``preemptions``, and ``backend_cuts``: streams the backend
    closed mid-reply (a restart) within the retry window -- ``continued`` ones resumed from their
    partial text (nothing lost) and ``restarted`` ones began again; ``evicted`` calls were dropped from the full queue for a
    more urgent arrival, ``rejected`` arrivals refused by it; ``tokens_redecoded`` counts the tokens those restarts threw
    away, to be generated again. ``prompt_tokens_reprocessed`` is what the backend reported
    processing (prompt minus cached tokens) for the attempts that finished preempted calls,
    out of ``prompt_tokens_resumed`` in their prompts: the prefill that preemption cost.
    """

    name: str
    queue_depth: int
    running: bool
    submitted: int
    completed: int
    failed: int
    abandoned: int
    rejected: int
    evicted: int
    preemptions: int
    continued: int
    restarted: int
    backend_cuts: int
    tokens_redecoded: int
    prompt_tokens_reprocessed: int
    prompt_tokens_resumed: int
    cache_hits: int
    busy_s: float
    uptime_s: float
    waits: dict[int, PriorityWaits]

    @property
    def busy_fraction(self) -> float:
        return self.busy_s / self.uptime_s if self.uptime_s > 0 else 0.0


# --- messages ----------------------------------------------------------------------------------


class _Submit(msgspec.Struct):
    job: InferenceJob


class _Accepted(msgspec.Struct):
    pass


class _Rejected(msgspec.Struct):
    error: SlotQueueFullError


class _RunJob(msgspec.Struct):
    job: InferenceJob


class _Completed(msgspec.Struct):
    response: LLMResponse


class _Preempted(msgspec.Struct):
    partial_text: str
    continuable: bool
    tokens: int  # tokens this attempt streamed before it was cut


class _CutOff(msgspec.Struct):
    """The backend closed the stream mid-reply (a restart, a crash), after part of it reached
    the caller: continued from the partial text, or restarted, like a preemption."""

    error: BackendError
    partial_text: str
    continuable: bool
    tokens: int


class _Abandoned(msgspec.Struct):
    pass


class _Failed(msgspec.Struct):
    error: BaseException


_Outcome = _Completed | _Preempted | _CutOff | _Abandoned | _Failed


class _AttemptDone(msgspec.Struct):
    job: InferenceJob
    outcome: _Outcome
    executor: ActorRef[Any]


class _GetStats(msgspec.Struct):
    pass


class Recheck(msgspec.Struct):
    """Ask the scheduler to look at its queue again (a budget changed, room may have freed)."""


# --- executor ------------------------------------------------------------------------------------


class _SlotExecutor(Actor):
    """Runs one attempt at a time on the backend and reports how it ended."""

    def __init__(
        self,
        client: LLMClient,
        scheduler: ActorRef[Any],
        slot_id: int | None,
        *,
        name: str,
        limits: StallLimits,
        retry: BackendRetry | None,
        reached: _Reached,
    ) -> None:
        self._client = client
        self._scheduler = scheduler
        self._slot_id = slot_id
        self._name = name
        self._limits = limits
        self._retry = retry
        self._reached = reached
        self._jitter = random.Random()

    @handles(_RunJob)
    async def on_run(self, msg: _RunJob) -> None:
        outcome = await self._attempt(msg.job)
        await self._scheduler.send(_AttemptDone(msg.job, outcome, self.context.self_ref))

    def _stalled(
        self,
        received: int,
        waited: float,
        tokens: int,
        *,
        whole: bool = False,
        prefill: PromptProgressChunk | None = None,
    ) -> InferenceStalledError:
        last_report = ""
        if whole:
            phase = "whole_call"
        elif received:
            phase = "between_chunks"
        elif prefill is None:
            phase = "first_token"
        else:
            phase = "prefill"
            last_report = (
                f" (its last report: {prefill.processed} of {prefill.total} prompt tokens read)"
            )
        _log.warning("slot.stalled", slot=self._name, phase=phase, waited_s=waited, tokens=tokens)
        message = _stalled_message(self._name, phase, waited, tokens) + last_report
        return InferenceStalledError(
            message,
            slot=self._name,
            phase=phase,
            waited_s=waited,
            tokens=tokens,
        )

    async def _attempt(self, job: InferenceJob) -> _Outcome:
        """One dispatch of ``job``: tried again while the backend is briefly away (see
        :class:`BackendRetry`), each try under a fresh attempt scope the scheduler can cancel."""
        retry, started = self._retry, trio.current_time()
        reached = self._reached
        backoff = retry.first_backoff_s if retry is not None else 0.0
        tries = 1
        while True:
            outcome = await self._try_once(job)
            if isinstance(outcome, _CutOff):
                return self._cut_or_failed(job, outcome)
            failed = outcome.error if isinstance(outcome, _Failed) else None
            if failed is None or (isinstance(failed, BackendError) and failed.status is not None):
                reached.seen = True  # the backend answered, if only with an error status
            elapsed = trio.current_time() - started + backoff
            if retry is None or not reached.seen or not retry.covers(outcome, elapsed):
                return outcome
            assert isinstance(outcome, _Failed)
            _log.info(
                "slot.backend_retry",
                slot=self._name,
                job=job.id,
                tries=tries,
                backoff_s=round(backoff, 3),
                error=str(outcome.error),
            )
            scope = job.attempt_scope = trio.CancelScope()
            with scope:
                await trio.sleep(backoff * (0.5 + self._jitter.random() / 2))
            if scope.cancelled_caught or job.abandoned or job.preempt_requested:
                # Nothing was streamed: a preempted job is simply run again later.
                return _Abandoned() if job.abandoned else _Preempted("", True, 0)
            job.attempt_scope = trio.CancelScope()
            backoff = min(backoff * 2, retry.max_backoff_s)
            tries += 1

    def _cut_or_failed(self, job: InferenceJob, cut: _CutOff) -> _CutOff | _Failed:
        """A stream the backend cut mid-reply goes back to the queue, to be continued (or
        restarted) once the backend is back -- within the retry window counted from its first
        cut; past it, or with no retry, the call fails with the backend's error."""
        now = trio.current_time()
        if job.cut_since is None:
            job.cut_since = now
        if self._retry is None or now - job.cut_since > self._retry.window_s:
            return _Failed(cut.error)
        _log.info("slot.cut_by_backend", slot=self._name, job=job.id, tokens=cut.tokens)
        return cut

    async def _try_once(self, job: InferenceJob) -> _Outcome:
        request = job.request
        slot_id = job.line if job.line is not None else self._slot_id
        if slot_id is not None and request.slot_id != slot_id:
            request = msgspec.structs.replace(request, slot_id=slot_id)
        if job.prefill:
            request = _continued(request, job)
        scope = job.attempt_scope
        assert scope is not None, "the scheduler sets the attempt scope before dispatch"
        partial: list[str] = []
        tokens = 0
        tool_delta = False
        final: LLMResponse | None = None
        try:
            with scope:
                if job.whole:
                    whole_limit = self._limits.whole_call_limit(request)
                    with trio.move_on_after(whole_limit):
                        final = await self._client.send(request)
                    if final is None:
                        return _Failed(self._stalled(0, whole_limit, 0, whole=True))
                    return _Completed(final)
                # One watch over opening the stream and every chunk: its deadline starts at the
                # first-token limit (the response headers wait on prefill too) and moves with
                # each chunk that arrives.
                received = 0
                prefill: PromptProgressChunk | None = None  # the backend's last report on it
                limit = self._limits.first_token_limit(request)  # the wait being watched now
                between = self._limits.between_chunks_s
                watch = trio.CancelScope(deadline=trio.current_time() + limit)
                with watch:
                    async with self._client.stream(request) as chunks:
                        async for chunk in chunks:
                            self._reached.seen = True  # it answered: a later refusal is a restart
                            if isinstance(chunk, PromptProgressChunk):
                                # Still reading the prompt: the wait restarts, for what is left
                                # of it. Only the slot reads these; the caller never sees them.
                                prefill = chunk
                                limit = self._limits.prefill_limit(chunk)
                                watch.deadline = trio.current_time() + limit
                                continue
                            received += 1
                            limit = math.inf if between is None else between
                            watch.deadline = trio.current_time() + limit
                            if isinstance(chunk, FinalChunk):
                                final = chunk.response
                                break
                            if isinstance(chunk, TextDeltaChunk):
                                partial.append(chunk.text)
                            elif isinstance(chunk, ToolCallDeltaChunk):
                                tool_delta = True
                            elif isinstance(chunk, ResetChunk):
                                partial.clear()
                                tokens = 0
                                tool_delta = False
                            if isinstance(
                                chunk, TextDeltaChunk | ReasoningDeltaChunk | ToolCallDeltaChunk
                            ):
                                tokens += 1
                                if job.first_token_at is None:
                                    job.first_token_at = trio.current_time()
                            job.send.send_nowait(chunk)
                if watch.cancelled_caught:
                    return _Failed(
                        self._stalled(received, limit, job.decoded + tokens, prefill=prefill)
                    )
        except trio.BrokenResourceError:
            job.abandoned = True  # the caller closed its end: nobody wants the rest
            return _Abandoned()
        except BackendError as exc:
            if exc.kind is FaultKind.RESET_MID_STREAM and (tokens or partial or tool_delta):
                text = "".join(partial)
                return _CutOff(exc, text, continuable=not tool_delta, tokens=tokens)
            return _Failed(exc)
        except Exception as exc:  # noqa: BLE001 -- not swallowed: delivered to the caller, who owns it
            return _Failed(exc)
        if final is not None:
            return _Completed(_with_prefill(final, job.prefill))
        if job.abandoned:
            return _Abandoned()
        if job.preempt_requested:
            return _Preempted("".join(partial), continuable=not tool_delta, tokens=tokens)
        return _Failed(StreamError("the backend stream ended without a final response"))


def _stalled_message(slot: str, phase: str, waited: float, tokens: int) -> str:
    what = {
        "first_token": "no first token",
        "prefill": "no progress on the prompt",
        "between_chunks": "no next chunk",
        "whole_call": "no reply to a call fetched whole",
    }[phase]
    return (
        f"slot {slot!r}: {what} within {waited:.1f} s after {tokens} streamed tokens; the call "
        "was cancelled and the slot moved on -- the backend is hung or overloaded (its log says "
        "which), or raise the SlotWorker's stall limits for a slower one"
    )


def _continued(request: InferenceRequest, job: InferenceJob) -> InferenceRequest:
    """``request`` resumed after the text its earlier attempts generated (``job.prefill``).

    The reply budget shrinks by the tokens already written, and a constrained call is held to
    the rest of its constraint (``job.continuation``), not to a whole reply again.
    """
    changes: dict[str, Any] = {
        "assistant_prefill": (request.assistant_prefill or "") + job.prefill,
    }
    if job.continuation is not None:
        changes["constraint"] = job.continuation
    limit = request.sampling.max_tokens
    if limit is not None and job.decoded:
        changes["sampling"] = msgspec.structs.replace(
            request.sampling, max_tokens=max(1, limit - job.decoded)
        )
    return msgspec.structs.replace(request, **changes)


def _with_prefill(response: LLMResponse, prefill: str) -> LLMResponse:
    """A continued reply, made whole again: the text generated before preemption comes first."""
    if not prefill:
        return response
    result = response.result
    if isinstance(result, TextResponse):
        result = TextResponse(content=prefill + result.content, reasoning=result.reasoning)
    return msgspec.structs.replace(response, result=result, raw_text=prefill + response.raw_text)


# --- scheduler -----------------------------------------------------------------------------------


class SlotWorkerActor(Actor):
    """Owns the queue of one slot; see the module docstring for the scheduling rules."""

    def __init__(
        self,
        client: LLMClient,
        *,
        name: str,
        policy: PreemptPolicy,
        max_preemptions: int,
        max_queue: int,
        max_wait_s: float | None,
        admit: Callable[[InferenceJob], bool] | None,
        slot_id: int | None = None,
        urgent_priority: int = 0,
        cache_lines: int | None = None,
        stall: StallLimits | None = None,
        retry: BackendRetry | None = None,
    ) -> None:
        self._client = client
        self._urgent = urgent_priority
        self._stall = stall or StallLimits()
        self._retry = retry
        self._lines = [CacheLine(i) for i in range(cache_lines or 0)]
        self._slot_id = slot_id
        self._name = name
        self._policy = policy
        self._max_preemptions = max_preemptions
        self._max_queue = max_queue
        self._max_wait_s = max_wait_s
        self._admit = admit
        self._queue: list[InferenceJob] = []
        self._running: InferenceJob | None = None
        self._idle: list[ActorRef[Any]] = []
        self._cached: tuple[int, ...] = ()
        self._started = 0.0
        self._busy_since: float | None = None
        self._busy_s = 0.0
        self._counts = dict.fromkeys(
            (
                "submitted",
                "completed",
                "failed",
                "abandoned",
                "rejected",
                "evicted",
                "preemptions",
                "continued",
                "restarted",
                "backend_cuts",
                "tokens_redecoded",
                "prompt_tokens_reprocessed",
                "prompt_tokens_resumed",
                "cache_hits",
            ),
            0,
        )
        self._waits: dict[int, PriorityWaits] = {}
        self._prefill = client.capabilities.assistant_prefill

    async def on_start(self) -> None:
        self._started = trio.current_time()
        client, me, slot_id = self._client, self.context.self_ref, self._slot_id
        name, limits, retry, reached = self._name, self._stall, self._retry, _Reached()
        # Spare executors let a preempting call start at once, while the preempted attempt is
        # still closing its stream; the backend queues it for the instant that takes.
        for index in range(_EXECUTORS):
            self._idle.append(
                await self.context.spawn(
                    lambda: _SlotExecutor(
                        client, me, slot_id, name=name, limits=limits, retry=retry, reached=reached
                    ),
                    name=f"{self._name}.executor{index}",
                )
            )

    @handles(_Submit)
    async def on_submit(self, msg: _Submit) -> _Accepted | _Rejected:
        self._prune()
        job = msg.job
        if len(self._queue) >= self._max_queue:
            victim = pick_victim(self._queue, job)
            if victim is None:
                self._counts["rejected"] += 1
                return _Rejected(
                    SlotQueueFullError(
                        f"slot {self._name!r} already has {self._max_queue} calls queued, none "
                        f"less urgent than this one (priority {job.priority}); retry later or "
                        "raise max_queue",
                        slot=self._name,
                        limit=self._max_queue,
                    )
                )
            self._evict(victim, job)
        self._counts["submitted"] += 1
        self._queue.append(job)
        job.traced("queued")
        # A call that preempts runs next, ahead even of overdue calls: it cut the running one.
        self._dispatch(first=job if self._maybe_preempt(job) else None)
        return _Accepted()

    @handles(_AttemptDone)
    async def on_done(self, msg: _AttemptDone) -> None:
        job, outcome = msg.job, msg.outcome
        self._idle.append(msg.executor)
        if job is self._running:
            self._running = None
        job.attempt_scope = None
        match outcome:
            case _Completed(response):
                self._counts["completed"] += 1
                self._cached = job.fp
                usage = response.usage
                if job.preemptions and usage.prompt_tokens is not None:
                    processed = usage.prompt_tokens - (usage.cached_tokens or 0)
                    self._counts["prompt_tokens_reprocessed"] += processed
                    self._counts["prompt_tokens_resumed"] += usage.prompt_tokens
                self._release_line(job)
                if job.tracer is not None:
                    job.tracer.slot_finished(job.id, response, attempt=job.attempts)
                job.complete(response)
            case _Failed(error):
                self._counts["failed"] += 1
                self._cached = ()
                self._release_line(job)
                job.traced("failed", reason=f"{type(error).__name__}: {error}"[:300])
                job.fail(error)
            case _Abandoned():
                self._counts["abandoned"] += 1
                job.traced("abandoned")
                self._release_line(job)
                job.finished = True
                job.send.close()
            case _Preempted():
                self._requeue_preempted(job, outcome)
            case _CutOff():
                self._counts["backend_cuts"] += 1
                self._requeue(job, outcome, why="cut by the backend")
        self._dispatch()
        if self._running is None and self._busy_since is not None:
            self._busy_s += trio.current_time() - self._busy_since
            self._busy_since = None

    @handles(Recheck)
    async def on_recheck(self, msg: Recheck) -> None:
        self._dispatch()

    @handles(_GetStats)
    async def on_stats(self, msg: _GetStats) -> SlotStats:
        self._prune()
        busy = self._busy_s
        now = trio.current_time()
        if self._busy_since is not None:
            busy += now - self._busy_since
        return SlotStats(
            name=self._name,
            queue_depth=len(self._queue),
            running=self._running is not None,
            busy_s=busy,
            uptime_s=now - self._started,
            waits={p: msgspec.structs.replace(w) for p, w in self._waits.items()},
            **self._counts,
        )

    def _evict(self, victim: InferenceJob, arrival: InferenceJob) -> None:
        """Drop ``victim`` from the full queue for the more urgent ``arrival``."""
        self._queue.remove(victim)
        self._counts["evicted"] += 1
        self._release_line(victim)
        victim.traced("evicted")
        _log.info(
            "slot.evicted",
            slot=self._name,
            job=victim.id,
            priority=victim.priority,
            by_priority=arrival.priority,
        )
        victim.fail(
            SlotEvictedError(
                f"slot {self._name!r}: this call (priority {victim.priority}) was dropped from "
                f"the full queue ({self._max_queue} calls) for a more urgent one (priority "
                f"{arrival.priority}); retry later or raise max_queue",
                slot=self._name,
                limit=self._max_queue,
                priority=victim.priority,
                by_priority=arrival.priority,
            )
        )

    def _requeue_preempted(self, job: InferenceJob, cut: _Preempted) -> None:
        self._counts["preemptions"] += 1
        job.preemptions += 1
        job.preempt_requested = False
        reason = self._requeue(job, cut, why="preempted")
        _log.info(
            "slot.preempted",
            slot=self._name,
            job=job.id,
            priority=job.priority,
            preemptions=job.preemptions,
            continued=reason is None,
            restart_reason=reason,
            tokens=cut.tokens,
        )
        job.traced("preempted", tokens=cut.tokens, reason=reason)

    def _requeue(self, job: InferenceJob, cut: _Preempted | _CutOff, *, why: str) -> str | None:
        """Put a cut call back in the queue, to go on from its partial text where it can, else
        to start over (its stream told to discard what it had); why it restarts, or None."""
        reason = self._continue_or_restart(job, cut)
        if reason is None:
            self._counts["continued"] += 1
            job.prefill += cut.partial_text
            job.decoded += cut.tokens
        else:
            self._counts["restarted"] += 1
            self._counts["tokens_redecoded"] += job.decoded + cut.tokens
            job.restarts += 1
            job.prefill, job.continuation, job.decoded = "", None, 0
            if not job.whole:  # a whole job streamed nothing, so there is nothing to take back
                try:
                    job.send.send_nowait(ResetChunk(f"{why}; restarting: {reason}"))
                except trio.BrokenResourceError:
                    job.abandoned = True  # its caller left while it was being cut
        self._queue.append(job)
        return reason

    def _continue_or_restart(self, job: InferenceJob, cut: _Preempted | _CutOff) -> str | None:
        """None when ``job`` can go on from where it was cut, else why it restarts."""
        if job.whole:
            return "the call was fetched whole"
        if not self._prefill:
            return "the backend cannot continue a partial reply"
        if not cut.continuable:
            return "the backend had begun native tool-call deltas, which cannot be continued"
        constraint = job.request.constraint
        if constraint is None:
            return None
        # The backend applies a constraint to the new text alone: hold the continuation to
        # the rest of it, or it would have to write a whole reply after half of one.
        continuation = continuation_constraint(constraint, job.prefill + cut.partial_text)
        if continuation.constraint is None:
            return continuation.reason
        job.continuation = continuation.constraint
        return None

    def _assign_line(self, job: InferenceJob, now: float) -> None:
        urgent = job.priority <= self._urgent
        line = pick_line(job, self._lines, urgent=urgent)
        if line.held_for is not None and line.held_for != job.id:
            _log.info("slot.line_evicted", slot=self._name, line=line.index, job=line.held_for)
        line.held_for = None
        line.holds, line.key, line.last_used, line.urgent = job.fp, job.affinity_key, now, urgent
        job.line = line.index

    def _release_line(self, job: InferenceJob) -> None:
        if job.line is not None and self._lines and self._lines[job.line].held_for == job.id:
            self._lines[job.line].held_for = None

    def _prune(self) -> None:
        kept = []
        for job in self._queue:
            if job.abandoned:
                self._counts["abandoned"] += 1
                job.traced("abandoned")
                self._release_line(job)
                job.finished = True
                job.send.close()
            else:
                kept.append(job)
        self._queue = kept

    def _maybe_preempt(self, arrival: InferenceJob) -> bool:
        """Cut the running call for ``arrival`` where the rules allow; whether it was cut."""
        running = self._running
        if running is None or running.preempt_requested or self._policy is PreemptPolicy.NEVER:
            return False
        if arrival.priority >= running.priority:
            return False
        urgent = arrival.priority <= self._urgent
        if running.restarts >= self._max_preemptions and not urgent:
            return False  # only restarts waste work, so only they count; urgent calls ignore it
        overdue = running.overdue(trio.current_time(), self._max_wait_s)
        if overdue and (not urgent or running.cut_while_overdue):
            # Its turn came by the starvation bound: an urgent call may cut it once, so a voice
            # request does not wait for it; after that it runs, or the bound would mean nothing
            # under continuous urgent load.
            return False
        if self._policy is PreemptPolicy.BEFORE_FIRST_TOKEN and running.first_token_at is not None:
            return False
        running.cut_while_overdue = running.cut_while_overdue or overdue
        running.preempt_requested = True
        if running.line is not None and self._lines:
            # Held from now, not from when the attempt reports back: the arrival is dispatched
            # before that, and must not take the line with the preempted call's work on it.
            self._lines[running.line].held_for = running.id
        assert running.attempt_scope is not None
        running.attempt_scope.cancel()
        self._running = None  # the slot is the arrival's now; the old attempt unwinds aside
        return True

    def _dispatch(self, first: InferenceJob | None = None) -> None:
        """Start the next call if the slot is free: ``first`` if it may run, else ``pick_next``."""
        if self._running is not None or not self._idle:
            return
        self._prune()
        now = trio.current_time()
        candidates = self._queue
        if self._admit is not None:
            candidates = [j for j in candidates if self._admit(j)]
        job = (
            first
            if first is not None and first in candidates
            else pick_next(
                candidates,
                now=now,
                cached=self._cached,
                max_wait_s=self._max_wait_s,
            )
        )
        if job is None:
            return
        self._queue.remove(job)
        if continues(job.fp, self._cached):
            self._counts["cache_hits"] += 1
        if job.started_at is None:
            job.started_at = now
            waits = self._waits.setdefault(job.priority, PriorityWaits())
            wait = now - job.submitted_at
            waits.count += 1
            waits.total_s += wait
            waits.max_s = max(waits.max_s, wait)
        if self._lines:
            self._assign_line(job, now)
        job.attempts += 1
        job.traced("continued" if job.prefill else "started", wait_s=now - job.submitted_at)
        job.attempt_scope = trio.CancelScope()
        self._running = job
        if self._busy_since is None:
            self._busy_since = now
        self._idle.pop().send_nowait(_RunJob(job))


# --- the caller's handle -------------------------------------------------------------------------


class SlotWorker:
    """A caller's handle on one inference slot. Start one with ``await SlotWorker.start(...)``.

    ``infer()`` queues one call and returns its response; chunks stream to ``on_chunk`` as they
    are generated (a ``ResetChunk`` means: discard what this call streamed so far).
    """

    def __init__(
        self, ref: ActorRef[Any], name: str, client: LLMClient, system: ActorSystem
    ) -> None:
        self._ref = ref
        self.name = name
        self.client = client
        self.system = system

    @classmethod
    async def start(
        cls,
        system: ActorSystem,
        client: LLMClient,
        *,
        name: str = "slot",
        policy: PreemptPolicy | str = PreemptPolicy.ALWAYS,
        max_preemptions: int = 3,
        max_queue: int = 256,
        max_wait_s: float | None = DEFAULT_MAX_WAIT_S,
        admit: Callable[[InferenceJob], bool] | None = None,
        slot_id: int | None = None,
        urgent_priority: int = 0,
        cache_lines: int | None = None,
        stall: StallLimits | None = None,
        retry: BackendRetry | None = DEFAULT_RETRY,
    ) -> SlotWorker:
        """Spawn the slot's actors in ``system``.

        ``max_wait_s``: the starvation bound. A call that has waited this long goes ahead of
        every call that has not, behind only urgent ones (``urgent_priority``), so it waits
        about this long plus the call running then, whatever keeps arriving (``None``: strict
        priority). ``max_queue``: a full queue drops its least urgent, youngest call for a
        more urgent arrival (``SlotEvictedError``), and refuses an arrival no more urgent
        than everything waiting (``SlotQueueFullError``). ``max_preemptions``: after this many *restarts* (a
        preemption that threw its work away), a call is no longer preempted, except by a call at
        ``urgent_priority`` or more urgent (a voice request), which always preempts; a call
        continued from its partial text loses nothing and is not counted.

        ``cache_lines``: use the backend's first N KV slots (llama-server ``--parallel N``) as
        cache lines (see ``runtime/_cache_lines.py``): still one generation at a time, but a
        preempted call returns to the line holding its prompt and partial reply, and urgent
        workflows keep their own. Exclusive with ``slot_id``.

        ``stall``: how long a running call may produce nothing (:class:`StallLimits`; defaults
        on). A stalled call is cancelled and fails with ``InferenceStalledError``, and the slot
        moves on to the next call. ``retry``: how long a backend that is briefly away is
        ridden out (:class:`BackendRetry`; ``None`` hands every failure to the caller at once).

        ``admit``: an optional admission test (the BudgetActor's), a call it refuses stays
        queued until a ``Recheck``. ``slot_id`` pins every call to that backend slot
        (llama-server ``id_slot``).
        """
        policy = PreemptPolicy(policy)
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        if max_preemptions < 0:
            raise ValueError("max_preemptions must be >= 0")
        if cache_lines is not None and cache_lines < 1:
            raise ValueError(f"cache_lines must be at least 1, got {cache_lines}")
        if cache_lines is not None and slot_id is not None:
            raise ValueError("cache_lines and slot_id exclude each other: lines pick the slot")
        ref = await system.spawn(
            lambda: SlotWorkerActor(
                client,
                name=name,
                policy=policy,
                max_preemptions=max_preemptions,
                max_queue=max_queue,
                max_wait_s=max_wait_s,
                admit=admit,
                slot_id=slot_id,
                urgent_priority=urgent_priority,
                cache_lines=cache_lines,
                stall=stall,
                retry=retry,
            ),
            name=name,
        )
        return cls(ref, name, client, system)

    @property
    def ref(self) -> ActorRef[Any]:
        return self._ref

    async def infer(
        self,
        request: InferenceRequest,
        *,
        priority: int = 0,
        deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
        affinity_key: str | None = None,
        whole: bool = False,
        tracer: Tracer | None = None,
    ) -> LLMResponse:
        """Run one inference on this slot; ``deadline`` is in seconds from now.

        ``whole=True`` fetches the reply in one piece (the client's ``send``) for a caller that
        streams nothing: no per-token chunks to parse and pass on. ``on_chunk`` then sees only
        the ``FinalChunk``; a preempted whole call is simply sent again.

        Raises ``SlotQueueFullError`` when the queue is full, ``InferenceDeadlineError`` when
        the deadline passes (queued or running -- the running attempt is cancelled), and the
        backend's own errors. Cancelling the caller cancels the call. ``tracer`` is told what
        happens to the call on the slot (queued, started, preempted, continued, finished).
        """
        job = InferenceJob(
            request, priority=priority, affinity_key=affinity_key, whole=whole, tracer=tracer
        )
        reply = await self._ref.ask(_Submit(job))
        if isinstance(reply, _Rejected):
            raise reply.error
        limit = math.inf if deadline is None else trio.current_time() + deadline
        try:
            with trio.move_on_at(limit):
                async with job.receive:
                    async for item in job.receive:
                        if isinstance(item, JobFailed):
                            raise item.error
                        if isinstance(item, FinalChunk):
                            if on_chunk is not None:
                                await on_chunk(item)
                            return item.response
                        if on_chunk is not None:
                            await on_chunk(item)
                raise StreamError("the slot closed the call without a response")
            assert deadline is not None
            raise InferenceDeadlineError(
                f"inference on slot {self.name!r} missed its {deadline:g} s deadline "
                f"({'while running' if job.started_at is not None else 'while queued'})",
                slot=self.name,
                deadline_s=deadline,
                started=job.started_at is not None,
            )
        finally:
            job.abandon()

    async def stats(self) -> SlotStats:
        """A snapshot of the slot's queue and counters."""
        result: SlotStats = await self._ref.ask(_GetStats())
        return result

    async def submit(
        self,
        workflow: Workflow,
        user_message: str,
        *,
        priority: int = 0,
        deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
    ) -> WorkflowResult:
        """Run a whole workflow turn on this slot (forge's SlotWorker convenience).

        Spawns a WorkflowActor in this slot's actor system; its inference calls are scheduled
        on this slot one by one, interleaved with other workflows' calls. For every other
        option (guardrails, sampling, context, budgets) open a ``Session``.
        """
        from forge_rt.runtime._runner import slot_session

        return await slot_session(self).run(
            workflow, user_message, priority=priority, deadline=deadline, on_chunk=on_chunk
        )

    async def recheck(self) -> None:
        """Tell the scheduler to try dispatching again (after a budget change)."""
        await self._ref.send(Recheck())


class SlotPool:
    """Several slots of one backend (llama-server ``--parallel N``), each with its own SlotWorker.

    Each workflow (by ``key``) is pinned to one slot the first time it asks, so its prompt stays
    in that slot's KV cache; new keys go to the slot with the fewest pinned keys. Requests carry
    the slot index as ``slot_id`` (llama-server's ``id_slot``).
    """

    def __init__(self, slots: list[SlotWorker]) -> None:
        if not slots:
            raise ValueError("a SlotPool needs at least one slot")
        self.slots = slots
        self._pins: dict[str, int] = {}

    @classmethod
    async def start(
        cls, system: ActorSystem, client: LLMClient, n_slots: int, **options: Any
    ) -> SlotPool:
        """Start ``n_slots`` SlotWorkers named ``slot0``, ``slot1``, ... (options as SlotWorker)."""
        slots = [
            await SlotWorker.start(system, client, name=f"slot{i}", slot_id=i, **options)
            for i in range(n_slots)
        ]
        return cls(slots)

    def slot_for(self, key: str) -> SlotWorker:
        """The slot ``key`` is pinned to (pinning it now if it is new)."""
        index = self._pins.get(key)
        if index is None:
            loads = [0] * len(self.slots)
            for pinned in self._pins.values():
                loads[pinned] += 1
            index = loads.index(min(loads))
            self._pins[key] = index
        return self.slots[index]

    def release(self, key: str) -> None:
        """Forget ``key``'s pin (its workflow ended)."""
        self._pins.pop(key, None)

    async def infer(self, request: InferenceRequest, *, key: str, **options: Any) -> LLMResponse:
        """Run ``request`` on ``key``'s slot; options as ``SlotWorker.infer``."""
        return await self.slot_for(key).infer(request, affinity_key=key, **options)
