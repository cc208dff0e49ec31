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
workflow's call uses the slot. The slot knows nothing of workflows (a whole turn on a slot is
``Session.on_slot(slot).run``, in the runner). Its parts: the executor
(``runtime/_slot_executor.py``), its settings (``_slot_limits.py``: stall limits, backend
retry), what it reports (``_slot_stats.py``) and the messages between its actors
(``_slot_messages.py``). Several slots of one backend: ``SlotPool`` (``runtime/_pool.py``).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec
import trio

from actors import Actor, ActorRef, ActorSystem, handles, quiet_logger
from forge_rt.core import (
    FinalChunk,
    InferenceRequest,
    LLMClient,
    LLMResponse,
    ResetChunk,
    StreamChunk,
)
from forge_rt.errors import (
    InferenceDeadlineError,
    SlotEvictedError,
    SlotQueueFullError,
    StreamError,
)
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
from forge_rt.runtime._slot_executor import _Reached, _SlotExecutor, continuation_of
from forge_rt.runtime._slot_limits import DEFAULT_RETRY, BackendRetry, StallLimits
from forge_rt.runtime._slot_messages import (
    Recheck,
    _Abandoned,
    _Accepted,
    _AttemptDone,
    _Completed,
    _CutOff,
    _Failed,
    _GetStats,
    _Preempted,
    _Rejected,
    _RunJob,
    _Submit,
)
from forge_rt.runtime._slot_stats import PriorityWaits, SlotStats
from forge_rt.trace import Tracer

__all__ = ["ChunkSink", "InferenceSlot", "SlotWorker", "SlotWorkerActor"]

_log = quiet_logger(__name__)

# One runs; the others let a preempting call start while a preempted attempt unwinds.
_EXECUTORS = 3

ChunkSink = Callable[[StreamChunk], Awaitable[None]]


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
        pace = limits.report_pace()  # one per slot: its executors share what they learn
        # Spare executors let a preempting call start at once, while the preempted attempt is
        # still closing its stream; the backend queues it for the instant that takes.
        for index in range(_EXECUTORS):
            self._idle.append(
                await self.context.spawn(
                    lambda: _SlotExecutor(
                        client,
                        me,
                        slot_id,
                        name=name,
                        limits=limits,
                        retry=retry,
                        reached=reached,
                        pace=pace,
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
        _log.debug(  # routine scheduling: counted in SlotStats and the trace
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
        rest, reason = continuation_of(
            job.request.constraint,
            job.prefill + cut.partial_text,
            prefill=self._prefill,
            continuable=cut.continuable,
        )
        if reason is None:
            job.continuation = rest
        return reason

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


class InferenceSlot(Protocol):
    """What a workflow needs of the slot it runs on: one backend's :class:`SlotWorker`, or a
    :class:`~forge_rt.runtime.Fleet` of several backends placing each call on one."""

    name: str
    client: LLMClient
    system: ActorSystem

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
    ) -> LLMResponse: ...

    async def stats(self) -> SlotStats: ...

    async def recheck(self) -> None: ...

    def client_for(self, model: str | None) -> LLMClient:
        """The client answering what the backend of ``model`` can do (its capabilities and
        context length); ``ModelNotServedError`` where a fleet of several models has none."""
        ...


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
        if self.client.capabilities.priority_field and request.priority is None:
            # A server that schedules by priority itself (vLLM) hears the call's own.
            request = msgspec.structs.replace(request, priority=priority)
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

    async def recheck(self) -> None:
        """Tell the scheduler to try dispatching again (after a budget change)."""
        await self._ref.send(Recheck())

    def client_for(self, model: str | None) -> LLMClient:
        """This slot's client, whatever ``model`` names: one backend serves what it serves."""
        return self.client
