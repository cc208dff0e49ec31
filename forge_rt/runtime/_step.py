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

Every inference is bounded here, so both users get the same bounds:

- **A token budget.** A request whose sampling sets no ``max_tokens`` gets
  :func:`~forge_rt.guardrails.reply_token_budget`: what a reply under its constraint (or with
  its tools, or with none) may contain, and no more. A caller's own ``max_tokens`` always wins.
- **A stop on repetition.** A streamed reply is read as it arrives by a
  :class:`~forge_rt.guardrails.RepetitionDetector`; once it writes the same call (or line)
  again and again the inference is cancelled -- the slot closes the backend's stream, so
  generation stops -- and the reply as it stands goes to the guardrails, with ``finish_reason``
  :data:`~forge_rt.guardrails.REPETITION_FINISH_REASON` (the validator collapses the identical
  calls, as it would have after the cap). A reply fetched whole (``SlotCall.whole``) is not
  checked: its tokens were generated before it arrived, so a stop would save nothing, and
  the guardrails treat its repeats the same way either way. A caller that wants the early
  stop streams (``whole=False``; ``on_chunk`` may stay ``None``).
- **Escalation** (``escalate=True``, for a run that decodes freely by choice): after a
  rejected reply the retry is constrained to calls of the tools callable now, where the backend
  can constrain (``choose_constraint("auto", ...)``) and rescue parsing is on to read the
  constrained text, so one bad reply cannot start a spiral of bad replies; the next accepted
  reply ends it, and the step after decodes freely again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable

import msgspec
import trio

from actors import quiet_logger
from forge_rt.core import (
    ClientCapabilities,
    FinalChunk,
    GrammarConstraint,
    InferenceRequest,
    LLMResponse,
    OutputConstraint,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
)
from forge_rt.errors import SlotQueueFullError, ToolSchemaError
from forge_rt.guardrails import (
    REPETITION_FINISH_REASON,
    Execute,
    Fatal,
    Guardrails,
    NarrowedConstraint,
    Rejection,
    RepetitionDetector,
    RetryReason,
    StepBlocked,
    TextAnswer,
    choose_constraint,
    reply_token_budget,
    retry_reason,
)
from forge_rt.runtime._slot import InferenceSlot
from forge_rt.trace import Tracer

__all__ = ["Accepted", "GuardedStep", "Rejected", "RunStats", "SlotCall"]

_log = quiet_logger(__name__)

# Waiting for room in a full queue: the first backoff, doubled up to the cap, jittered so calls
# evicted together do not come back together.
_ROOM_FIRST_BACKOFF_S = 0.25
_ROOM_MAX_BACKOFF_S = 5.0
_jitter = random.Random()

ChunkSink = Callable[[StreamChunk], Awaitable[None]]
ResponseHook = Callable[[LLMResponse], Awaitable[None]]
Prepare = Callable[[], Awaitable[InferenceRequest]]


class RunStats(msgspec.Struct, kw_only=True):
    """What one turn (or one proxy request) cost and which guardrails fired.

    ``retries`` is keyed by :class:`~forge_rt.guardrails.RetryReason` values; ``rules`` by the
    guardrail rule that decided a reply (a rejection, a refused call, a text answer; see
    :data:`~forge_rt.guardrails.RULES`); ``rescued`` by the dialect a call was rescued from. ``escalations`` counts retries that were constrained
    because the reply before was rejected (``GuardedStep(escalate=True)``); ``repetition_stops``
    replies cut short because they repeated a call or a line. The eval records these.
    """

    iterations: int = 0
    inferences: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    retries: dict[str, int] = msgspec.field(default_factory=dict)
    rules: dict[str, int] = msgspec.field(default_factory=dict)
    rescued: dict[str, int] = msgspec.field(default_factory=dict)
    collapsed: int = 0
    compactions: int = 0
    escalations: int = 0
    repetition_stops: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    constraint: str | None = None
    wall_s: float = 0.0

    def count_retry(self, cause: str) -> None:
        self.retries[cause] = self.retries.get(cause, 0) + 1

    def count_rule(self, rule: str) -> None:
        """One more verdict decided by the guardrail rule ``rule`` (an empty name: none)."""
        if rule:
            self.rules[rule] = self.rules.get(rule, 0) + 1


class SlotCall(msgspec.Struct, frozen=True, kw_only=True):
    """How a step's inferences go through the slot (see ``SlotWorker.infer``).

    ``deadline`` is in seconds for each inference, ``deadline_at`` a point on trio's clock by
    which every inference must be done (a request's whole deadline); the nearer one applies.
    ``whole`` fetches replies in one piece for a caller that streams nothing. ``wait_for_room``:
    a call the slot's full queue refuses or evicts is submitted again after a jittered backoff
    (within the deadline), instead of failing -- for a workflow mid-turn, whose tools may
    already have run; the proxy leaves it off and answers 429, and its client retries.
    """

    priority: int = 0
    deadline: float | None = None
    deadline_at: float | None = None
    on_chunk: ChunkSink | None = None
    affinity_key: str | None = None
    whole: bool = False
    wait_for_room: bool = False

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
    ``escalate`` constrains the retry after a rejected reply where the request was not
    constrained (see the module docstring); ``parallel`` says whether that constraint admits
    several calls in one reply (pass what the caller allows: the proxy, the client's
    ``parallel_tool_calls``). ``tracer`` records each request, reply and verdict (and the
    slot's events for the call). ``last_chance`` says whether the reply being judged is the
    last the caller's budget allows (``Guardrails.check(last_chance=...)``).
    """

    def __init__(
        self,
        slot: InferenceSlot,
        guardrails: Guardrails,
        stats: RunStats,
        *,
        on_response: ResponseHook | None = None,
        escalate: bool = False,
        parallel: bool = True,
        tracer: Tracer | None = None,
        last_chance: Callable[[], bool] | None = None,
    ) -> None:
        self._slot = slot
        self._last_chance = last_chance
        self._tracer = tracer
        self.guardrails = guardrails
        self.stats = stats
        self._on_response = on_response
        self._escalate = escalate
        self._parallel = parallel
        self._escalation: NarrowedConstraint | None = None

    async def attempt(self, request: InferenceRequest, call: SlotCall) -> Accepted | Rejected:
        """One bounded inference and its verdict; an exhausted budget raises its typed error."""
        request = _budgeted(request)
        tracer = self._tracer
        if tracer is not None:
            tracer.request(request)
        if call.whole:
            response = await self._infer(request, call, call.on_chunk)
        else:
            response = await self._streamed(request, call)
        stats = self.stats
        stats.inferences += 1
        stats.prompt_tokens += response.usage.prompt_tokens or 0
        stats.completion_tokens += response.usage.completion_tokens or 0
        if self._on_response is not None:
            await self._on_response(response)
        constraint = request.constraint
        text_offered = isinstance(constraint, GrammarConstraint) and constraint.admits_text
        constrained = constraint is not None and not text_offered
        last = self._last_chance is not None and self._last_chance()
        action = self.guardrails.check(
            response, constrained=constrained, text_offered=text_offered, last_chance=last
        )
        if tracer is not None:
            tracer.reply(
                response, constrained=constrained, text_offered=text_offered, last_chance=last
            )
            tracer.verdict(action)
        match action:
            case Execute():
                stats.collapsed += action.collapsed
                for dialect in action.rescued_dialects:
                    stats.rescued[str(dialect)] = stats.rescued.get(str(dialect), 0) + 1
                for refusal in action.refused:  # the rest of the reply runs; these were refused
                    stats.count_retry(refusal.reason)
                    stats.count_rule(refusal.rule)
                return Accepted(action=action, response=response)
            case TextAnswer():
                stats.count_rule(action.rule)
                return Accepted(action=action, response=response)
            case Fatal():
                raise action.error
            case _:
                reason = retry_reason(action)
                stats.count_retry(reason.value)
                stats.count_rule(action.rule)
                return Rejected(action=action, response=response, reason=reason)

    async def run(self, prepare: Prepare, call: SlotCall, on_rejected: RejectedHook) -> Accepted:
        """Attempts until one is accepted (or ``on_rejected`` accepts a rejected one).

        With ``escalate``, every attempt after a rejection is constrained (see the module
        docstring); the first attempt of each ``run`` decodes as the caller asked.
        """
        rejected: Rejected | None = None
        while True:
            request = await prepare()
            if rejected is not None and self._escalate:
                request = self._escalated(request, rejected)
            verdict = await self.attempt(request, call)
            if isinstance(verdict, Accepted):
                return verdict
            accepted = await on_rejected(verdict)
            if accepted is not None:
                return accepted
            rejected = verdict

    async def _infer(
        self, request: InferenceRequest, call: SlotCall, on_chunk: ChunkSink | None
    ) -> LLMResponse:
        backoff = _ROOM_FIRST_BACKOFF_S
        first = call.deadline_now()
        give_up_at = trio.current_time() + first if first is not None else math.inf
        while True:
            try:
                return await self._slot.infer(
                    request,
                    priority=call.priority,
                    deadline=call.deadline_now(),
                    on_chunk=on_chunk,
                    affinity_key=call.affinity_key,
                    whole=call.whole,
                    tracer=self._tracer,
                )
            except SlotQueueFullError as exc:
                if not call.wait_for_room or trio.current_time() + backoff >= give_up_at:
                    raise  # a full queue for as long as the call may take: the caller's now
                _log.info("step.waiting_for_room", error=type(exc).__name__, backoff_s=backoff)
            await trio.sleep(backoff * (0.5 + _jitter.random() / 2))
            backoff = min(backoff * 2, _ROOM_MAX_BACKOFF_S)

    async def _streamed(self, request: InferenceRequest, call: SlotCall) -> LLMResponse:
        """The streamed reply, or what of it came before it started to repeat itself."""
        started = trio.current_time()
        detector = RepetitionDetector()
        partial = _PartialReply()
        sink = call.on_chunk
        stop = trio.CancelScope()

        async def on_chunk(chunk: StreamChunk) -> None:
            partial.feed(chunk)
            found = detector.feed(chunk)
            if sink is not None:
                await sink(chunk)
            if found is not None:
                stop.cancel()  # the slot abandons the call and closes the backend's stream

        with stop:
            return await self._infer(request, call, on_chunk)
        repetition = detector.found
        assert repetition is not None, "only the detector cancels this scope"
        response = partial.response(total_s=trio.current_time() - started)
        self.stats.repetition_stops += 1
        _log.info(
            "step.stopped_repeating",
            kind=repetition.kind,
            count=repetition.count,
            chars=len(response.raw_text),
            calls=len(response.tool_calls),
            reason=repetition.reason,
        )
        if sink is not None:
            await sink(FinalChunk(response))
        return response

    def _escalated(self, request: InferenceRequest, rejected: Rejected) -> InferenceRequest:
        """``request`` constrained to the calls allowed now, if it was not and the backend can.

        Not with rescue parsing off: a constrained reply is JSON text in the content, which only
        rescue reads, so every escalated reply would be rejected in turn.
        """
        if request.constraint is not None or not self.guardrails.options.rescue:
            return request
        capabilities = self._slot.client_for(request.model).capabilities
        constraint = self._escalation_constraint(_loop_blocked(rejected), capabilities)
        if constraint is None:
            return request
        self.stats.escalations += 1
        _log.info("step.escalated", reason=rejected.reason.value)
        return msgspec.structs.replace(request, constraint=constraint)

    def _escalation_constraint(
        self, avoid: frozenset[str], capabilities: ClientCapabilities
    ) -> OutputConstraint | None:
        if self._escalation is None:
            tools = self.guardrails.tools
            constraint: OutputConstraint | None = None
            shape = self.guardrails.call_shape(parallel=self._parallel)
            try:
                constraint = choose_constraint("auto", capabilities, tools, shape=shape).constraint
            except ToolSchemaError as exc:
                # Often why the run decodes freely: a schema with no flat constraint (a
                # recursive model). Its retries stay free, as they were before escalation.
                _log.info("step.escalation_unavailable", reason=str(exc))
            self._escalation = NarrowedConstraint(
                constraint, tools, shape=shape, grammar=capabilities.grammar
            )
        guardrails = self.guardrails
        return self._escalation.to(
            guardrails.callable_now(avoid),
            exclude=guardrails.excluded_calls,
            answers=guardrails.answer_choices,
            pins=guardrails.pinned_calls,
        )


def _budgeted(request: InferenceRequest) -> InferenceRequest:
    """``request`` with the derived ``max_tokens`` where its sampling sets none."""
    sampling = request.sampling
    if sampling.max_tokens is not None:
        return request
    budget = reply_token_budget(request)
    return msgspec.structs.replace(
        request, sampling=msgspec.structs.replace(sampling, max_tokens=budget)
    )


def _loop_blocked(rejected: Rejected) -> frozenset[str]:
    """The tools the loop guard just blocked: the escalated constraint leaves them out too."""
    action = rejected.action
    if isinstance(action, StepBlocked) and rejected.reason is RetryReason.LOOP:
        return frozenset(e.tool for e in action.errors if e.tool)
    return frozenset()


class _NativeCall(msgspec.Struct):
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""

    def complete(self) -> ToolCall | None:
        """The call, if its name is known and its arguments are a whole JSON object."""
        if not self.name:
            return None
        try:
            args = msgspec.json.decode(self.arguments)
        except msgspec.DecodeError:
            return None  # cut off mid-arguments by the stop
        if not isinstance(args, dict):
            return None
        if self.call_id:
            return ToolCall(tool=self.name, args=args, call_id=self.call_id)
        return ToolCall(tool=self.name, args=args)


class _PartialReply:
    """The reply as streamed so far: what a stop hands to the guardrails, as it stands.

    Text and reasoning are kept whole; of the native calls only those whose arguments are
    complete JSON objects (the one being written when the stop came is cut off).
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _NativeCall] = {}

    def feed(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, TextDeltaChunk):
            self._text.append(chunk.text)
        elif isinstance(chunk, ReasoningDeltaChunk):
            self._reasoning.append(chunk.text)
        elif isinstance(chunk, ToolCallDeltaChunk):
            call = self._calls.setdefault(chunk.index, _NativeCall())
            call.call_id = chunk.call_id or call.call_id
            call.name = chunk.name or call.name
            call.arguments += chunk.arguments_delta
        elif isinstance(chunk, ResetChunk):
            self._text, self._reasoning, self._calls = [], [], {}

    def response(self, *, total_s: float) -> LLMResponse:
        """The partial reply; usage is unknown (the backend reports it only at the end)."""
        text = "".join(self._text)
        reasoning = "".join(self._reasoning) or None
        calls = [c for c in (n.complete() for _, n in sorted(self._calls.items())) if c]
        result: list[ToolCall] | TextResponse = (
            calls if calls else TextResponse(content=text, reasoning=reasoning)
        )
        return LLMResponse(
            result=result,
            timings=Timings(total_s=total_s),
            finish_reason=REPETITION_FINISH_REASON,
            raw_text=text,
        )
