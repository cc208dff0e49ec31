"""A slot's executor: runs one attempt of a call on the backend and reports how it ended.

The scheduler (``runtime/_slot.py``) decides what runs; an executor runs it. Each attempt streams
its chunks straight to the caller under a cancel scope the scheduler can cancel (a preemption),
watched by the stall limits (a backend that stops producing), and tried again while the backend
is briefly away (``BackendRetry``). The outcome -- completed, preempted, cut by the backend,
abandoned by its caller, failed -- goes back to the scheduler as an ``_AttemptDone``.
"""

from __future__ import annotations

import math
import random
from typing import Any

import msgspec
import trio

from actors import Actor, ActorRef, handles, quiet_logger
from forge_rt.core import (
    FinalChunk,
    InferenceRequest,
    LLMClient,
    LLMResponse,
    OutputConstraint,
    PromptProgressChunk,
    ReasoningDeltaChunk,
    ResetChunk,
    TextDeltaChunk,
    TextResponse,
    ToolCallDeltaChunk,
)
from forge_rt.errors import BackendError, FaultKind, InferenceStalledError, StreamError
from forge_rt.guardrails import continuation_constraint
from forge_rt.runtime._report_pace import ReportPace
from forge_rt.runtime._scheduling import InferenceJob
from forge_rt.runtime._slot_limits import BackendRetry, StallLimits
from forge_rt.runtime._slot_messages import (
    _Abandoned,
    _AttemptDone,
    _Completed,
    _CutOff,
    _Failed,
    _Outcome,
    _Preempted,
    _RunJob,
)

_log = quiet_logger(__name__)


class _Reached:
    """Whether the slot's backend has ever answered (shared by its executors)."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False


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
        pace: ReportPace | None = None,
    ) -> None:
        self._client = client
        self._scheduler = scheduler
        self._slot_id = slot_id
        self._name = name
        self._limits = limits
        self._retry = retry
        self._reached = reached
        self._pace = pace  # the slot's learned pace of progress reports, shared
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
        request = self._attempt_request(job)
        scope = job.attempt_scope
        assert scope is not None, "the scheduler sets the attempt scope before dispatch"
        attempt = _Attempt(self._limits, self._pace)
        try:
            with scope:
                if job.whole:
                    return await self._whole(request)
                await self._stream(job, request, attempt)
                if attempt.watch.cancelled_caught:
                    return _Failed(
                        self._stalled(
                            attempt.received,
                            attempt.limit,
                            job.decoded + attempt.tokens,
                            prefill=attempt.prefill,
                        )
                    )
        except trio.BrokenResourceError:
            job.abandoned = True  # the caller closed its end: nobody wants the rest
            return _Abandoned()
        except BackendError as exc:
            if exc.kind is FaultKind.RESET_MID_STREAM and attempt.began:
                return _CutOff(
                    exc, attempt.text, continuable=not attempt.tool_delta, tokens=attempt.tokens
                )
            return _Failed(exc)
        except Exception as exc:  # noqa: BLE001 -- not swallowed: delivered to the caller, who owns it
            return _Failed(exc)
        if attempt.final is not None:
            return _Completed(with_prefill(attempt.final, job.prefill))
        if job.abandoned:
            return _Abandoned()
        if job.preempt_requested:
            return _Preempted(
                attempt.text, continuable=not attempt.tool_delta, tokens=attempt.tokens
            )
        return _Failed(StreamError("the backend stream ended without a final response"))

    def _attempt_request(self, job: InferenceJob) -> InferenceRequest:
        """``job``'s request as this attempt sends it: on its cache line, and going on from
        what earlier attempts generated."""
        request = job.request
        slot_id = job.line if job.line is not None else self._slot_id
        if slot_id is not None and request.slot_id != slot_id:
            request = msgspec.structs.replace(request, slot_id=slot_id)
        if job.prefill:
            request = continued_request(request, job.prefill, job.continuation, job.decoded)
        return request

    async def _whole(self, request: InferenceRequest) -> _Completed | _Failed:
        """A call fetched whole, under the whole-call limit."""
        whole_limit = self._limits.whole_call_limit(request)
        final: LLMResponse | None = None
        with trio.move_on_after(whole_limit):
            final = await self._client.send(request)
        if final is None:
            return _Failed(self._stalled(0, whole_limit, 0, whole=True))
        return _Completed(final)

    async def _stream(
        self, job: InferenceJob, request: InferenceRequest, attempt: _Attempt
    ) -> None:
        """Stream ``request`` to ``job``'s caller under ``attempt``'s watch: one deadline over
        opening the stream and every chunk, starting at the first-token limit (the response
        headers wait on prefill too) and moving with each chunk that arrives."""
        attempt.awaits_first(self._limits.first_token_limit(request), trio.current_time())
        with attempt.watch:
            async with self._client.stream(request) as chunks:
                async for chunk in chunks:
                    self._reached.seen = True  # it answered: a later refusal is a restart
                    now = trio.current_time()
                    attempt.moved(now)
                    if isinstance(chunk, PromptProgressChunk):
                        # Only the slot reads these; the caller never sees them.
                        attempt.reported(chunk, now)
                        continue
                    if attempt.arrived(chunk, now):
                        return
                    if attempt.tokens and job.first_token_at is None:
                        job.first_token_at = trio.current_time()
                    job.send.send_nowait(chunk)


class _Attempt:
    """One streamed attempt: what reached the caller (text, tokens, native tool-call deltas,
    the final response) and the stall watch over it, whose deadline each chunk moves."""

    def __init__(self, limits: StallLimits, pace: ReportPace | None) -> None:
        self._limits = limits
        self._pace = pace
        self._partial: list[str] = []
        self.tokens = 0
        self.tool_delta = False
        self.final: LLMResponse | None = None
        self.received = 0  # chunks other than progress reports
        self.prefill: PromptProgressChunk | None = None  # the backend's last report on it
        self._reported_at: float | None = None  # when it came
        self.limit = math.inf  # the wait being watched now
        self.watch = trio.CancelScope()

    @property
    def text(self) -> str:
        return "".join(self._partial)

    @property
    def began(self) -> bool:
        """Whether any of the reply reached the caller since the last reset."""
        return bool(self.tokens or self._partial or self.tool_delta)

    def awaits_first(self, limit: float, now: float) -> None:
        """The stream is opened: its first chunk may take ``limit`` seconds."""
        self.limit = limit
        self.watch.deadline = now + limit

    def moved(self, now: float) -> None:
        """A chunk came: the first after a progress report tells the slot's pace how long
        that wait was."""
        if self._pace is not None and self.received == 0 and self._reported_at is not None:
            self._pace.moved(now - self._reported_at)

    def reported(self, chunk: PromptProgressChunk, now: float) -> None:
        """Still reading the prompt: the wait restarts, for what is left of it -- no longer
        than the slot's reports usually take."""
        self.prefill, self._reported_at = chunk, now
        limit = self._limits.prefill_limit(chunk)
        learned = self._pace.next_limit() if self._pace is not None else None
        self.limit = limit if learned is None else min(limit, learned)
        self.watch.deadline = now + self.limit

    def arrived(self, chunk: object, now: float) -> bool:
        """A chunk of the reply: counted, the watch moved to the gap allowed between chunks.
        True for the final one (kept as :attr:`final`), which the caller is not sent."""
        self.received += 1
        between = self._limits.between_chunks_s
        self.limit = math.inf if between is None else between
        self.watch.deadline = now + self.limit
        if isinstance(chunk, FinalChunk):
            self.final = chunk.response
            return True
        if isinstance(chunk, TextDeltaChunk):
            self._partial.append(chunk.text)
        elif isinstance(chunk, ToolCallDeltaChunk):
            self.tool_delta = True
        elif isinstance(chunk, ResetChunk):
            self._partial.clear()
            self.tokens = 0
            self.tool_delta = False
        if isinstance(chunk, TextDeltaChunk | ReasoningDeltaChunk | ToolCallDeltaChunk):
            self.tokens += 1
        return False


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


def continuation_of(
    constraint: OutputConstraint | None, prefix: str, *, prefill: bool, continuable: bool
) -> tuple[OutputConstraint | None, str | None]:
    """Whether a reply cut after ``prefix`` can go on where it was cut: the rest of
    ``constraint`` it is then held to (None for a call without one) and None; else None and
    why it restarts. ``prefill``: the backend takes an assistant prefill; ``continuable``: no
    native tool-call deltas had begun. The slot (a preempted or cut call) and the fleet (a
    call cut by a failing backend, going on on another) decide the same way."""
    if not prefill:
        return None, "the backend cannot continue a partial reply"
    if not continuable:
        return None, "the backend had begun native tool-call deltas, which cannot be continued"
    if constraint is None:
        return None, None
    # The backend applies a constraint to the new text alone: hold the continuation to the
    # rest of it, or it would have to write a whole reply after half of one.
    continuation = continuation_constraint(constraint, prefix)
    if continuation.constraint is None:
        return None, continuation.reason
    return continuation.constraint, None


def continued_request(
    request: InferenceRequest,
    prefill: str,
    continuation: OutputConstraint | None,
    decoded: int,
) -> InferenceRequest:
    """``request`` resumed after the text its earlier attempts generated (``prefill``).

    The reply budget shrinks by the ``decoded`` tokens already written, and a constrained call
    is held to the rest of its constraint (``continuation``), not to a whole reply again.
    """
    changes: dict[str, Any] = {
        "assistant_prefill": (request.assistant_prefill or "") + prefill,
    }
    if continuation is not None:
        changes["constraint"] = continuation
    limit = request.sampling.max_tokens
    if limit is not None and decoded:
        changes["sampling"] = msgspec.structs.replace(
            request.sampling, max_tokens=max(1, limit - decoded)
        )
    return msgspec.structs.replace(request, **changes)


def with_prefill(response: LLMResponse, prefill: str) -> LLMResponse:
    """A continued reply, made whole again: the text generated before preemption comes first."""
    if not prefill:
        return response
    result = response.result
    if isinstance(result, TextResponse):
        result = TextResponse(content=prefill + result.content, reasoning=result.reasoning)
    return msgspec.structs.replace(response, result=result, raw_text=prefill + response.raw_text)
