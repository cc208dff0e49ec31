"""One request's inference: through the shared slot, guarded, retried server-side, streamed live.

:class:`RequestPlan` is what the HTTP layer made of a request; :class:`InferenceEngine` runs it.
Without tools the call goes straight through the slot. With tools, each attempt's reply is
checked by a fresh :class:`~forge_rt.guardrails.Guardrails` built from the request's tools:
calls written as text are rescued, invalid replies get a corrective message appended to a
private copy of the history (the client never sees it) and the slot is asked again, until a
valid reply or an exhausted budget. The synthetic ``respond`` tool is offered alongside the
client's tools and stripped from the answer: a ``respond`` call becomes a plain text reply.
The guardrails are the one judge and their retries the one loop: they know the proxy's
guardrail markers (a copied correction in an argument is refused) and the client's history (a
call already answered in it is answered from it, not returned again). Of an accepted reply,
the text is cut before any guardrail text (:func:`~forge_rt.proxy._review.without_guardrail_text`).

Streaming goes through a :class:`~forge_rt.proxy._gate.StreamGate`, which releases only output
no later verdict can take back. Every failure is raised as a
:class:`~forge_rt.proxy._errors.ProxyHTTPError`; the HTTP layer decides whether it becomes an
error response or, after content was already sent, an error event at the end of the stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import msgspec
import trio

from actors import quiet_logger
from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ClientCapabilities,
    ConstrainMode,
    FinalChunk,
    InferenceRequest,
    LLMResponse,
    Message,
    MessageType,
    OutputConstraint,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    ToolCall,
    ToolSpec,
)
from forge_rt.errors import BudgetExhaustedError, ForgeError, ToolSchemaError
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    NarrowedConstraint,
    Policy,
    RetryReason,
    TextAnswer,
    choose_constraint,
    cut_cause,
    split_respond,
)
from forge_rt.proxy._config import ReasoningReplay
from forge_rt.proxy._errors import ErrorKind, ProxyHTTPError, from_forge_error
from forge_rt.proxy._gate import GateMode, StreamGate
from forge_rt.proxy._leaks import GUARDRAIL_MARKERS
from forge_rt.proxy._metrics import ProxyMetrics
from forge_rt.proxy._policy import withhold
from forge_rt.proxy._review import without_guardrail_text
from forge_rt.proxy._work import RequestWork
from forge_rt.runtime import Accepted, GuardedStep, InferenceSlot, Rejected, RunStats, SlotCall

__all__ = ["InferenceEngine", "Outcome", "RequestPlan", "Sink", "apply_reasoning_replay"]

log = quiet_logger(__name__)

Sink = Callable[[StreamChunk], Awaitable[None]]
UsageHook = Callable[[str, int], Awaitable[None]]


class RequestPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What the HTTP layer made of one request.

    ``request`` is the conversation and tools as the client sent them (reasoning replay already
    applied); ``client`` names the caller (its API key's name) for logs and usage.
    ``parallel_tool_calls`` is whether the client allows several calls in one reply (OpenAI's
    ``parallel_tool_calls``, Anthropic's ``disable_parallel_tool_use`` negated; both APIs
    allow them unless told not to).
    """

    request: InferenceRequest
    stream: bool
    priority: int
    client: str = "anonymous"
    request_id: str = ""
    parallel_tool_calls: bool = True


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """A complete, validated answer.

    ``response`` holds a text reply or the tool calls (``respond`` already stripped);
    ``text_with_calls`` is prose that came with tool calls (the wire formats carry both, the
    ``LLMResponse`` one or the other); ``work`` is what the guardrails did for the request
    (its ``x-forge-*`` headers).
    """

    response: LLMResponse
    text_with_calls: str = ""
    work: RequestWork = msgspec.field(default_factory=RequestWork)


def apply_reasoning_replay(
    messages: Sequence[Message], policy: ReasoningReplay
) -> tuple[Message, ...]:
    """The history with earlier reasoning kept per ``policy`` (none, the last one, or all)."""
    if policy is ReasoningReplay.FULL:
        return tuple(messages)
    last = -1
    if policy is ReasoningReplay.KEEP_LAST:
        last = max(
            (i for i, m in enumerate(messages) if m.type is MessageType.REASONING), default=-1
        )
    return tuple(
        m for i, m in enumerate(messages) if m.type is not MessageType.REASONING or i == last
    )


_Guard = Literal["none", "respond", "prose", "required"]


class InferenceEngine:
    """Runs request plans on the slot (one SlotWorker, or a Fleet) with the proxy's guardrail settings."""

    def __init__(
        self,
        slot: InferenceSlot,
        metrics: ProxyMetrics,
        *,
        rescue: bool,
        max_retries: int,
        respond_tool: bool,
        constrain: ConstrainMode,
        deadline_s: float | None,
        call_list: bool = False,
        fan_out: bool = False,
        prose_answers: bool = False,
        unfounded_calls: bool = False,
        rules_off: Sequence[str] = (),
        rules_on: Sequence[str] = (),
        on_usage: UsageHook | None = None,
        policy: Policy | None = None,
    ) -> None:
        self._slot = slot
        self._policy = policy  # by tool name: denied tools are withheld (proxy/_policy.py)
        self._metrics = metrics
        # Per request, with no steps and no loop guard of its own: the client owns the loop.
        self._options = (
            GuardrailOptions(
                rescue=rescue,
                max_retries=max_retries,
                steps=False,
                loop_repeats=None,
                call_list=call_list,
                fan_out=fan_out,
                prose_answers=prose_answers,
                unfounded_calls=unfounded_calls,
            )
            .enabling(*rules_on)
            .without(*rules_off)
        )
        self._respond = respond_tool
        self._constrain = constrain
        self._deadline_s = deadline_s
        self._on_usage = on_usage

    # -- planning --------------------------------------------------------------------------

    def _guard_kind(self, request: InferenceRequest) -> _Guard:
        if not request.tools or request.tool_choice == "none":
            return "none"
        if request.tool_choice not in (None, "auto"):
            return "required"
        names = {t.name for t in request.tools}
        if self._respond and RESPOND_TOOL_NAME not in names:
            return "respond"
        if RESPOND_TOOL_NAME in names and self._respond:
            log.info(
                "proxy.respond_not_injected",
                reason="the request already offers a tool named respond; it is treated as the "
                "client's own tool",
            )
        return "prose"

    def _guard(
        self, request: InferenceRequest, kind: _Guard, withheld: dict[str, str]
    ) -> Guardrails:
        """The guardrails of one request: its tools (only the one ``tool_choice`` names, when it
        names one), ``respond`` offered where the proxy injects it."""
        tools: Sequence[ToolSpec] = request.tools
        if kind == "required" and request.tool_choice != "required":
            named = [t for t in request.tools if t.name == request.tool_choice]
            if not named:
                raise ProxyHTTPError(
                    ErrorKind.BAD_REQUEST,
                    f"tool_choice names {request.tool_choice!r}, which is not one of the tools "
                    f"{sorted(t.name for t in request.tools)}",
                    code="unknown_tool_choice",
                    param="tool_choice",
                )
            tools = named
        return Guardrails(
            tools,
            respond_tool=kind == "respond",
            options=self._options_for(kind),
            withheld=withheld,
            markers=GUARDRAIL_MARKERS,
        )

    def _options_for(self, kind: _Guard) -> GuardrailOptions:
        """The guardrail options of one request: a text answer is one only where the request's
        ``tool_choice`` allows one (never when it requires a call)."""
        if kind == "required" and self._options.prose_answers:
            return msgspec.structs.replace(self._options, prose_answers=False)
        return self._options

    def prompt_request(self, request: InferenceRequest, *, request_id: str) -> InferenceRequest:
        """``request`` as the backend would first see it: the policy's denied tools withheld,
        ``respond`` offered where the proxy injects it (what ``count_tokens`` must count)."""
        if self._policy is not None:
            request, _ = withhold(request, self._policy, request_id=request_id)
        kind = self._guard_kind(request)
        if kind == "none":
            return request
        return msgspec.structs.replace(request, tools=self._guard(request, kind, {}).tools)

    def _constraint(
        self,
        request: InferenceRequest,
        tools: Sequence[ToolSpec],
        options: GuardrailOptions,
        capabilities: ClientCapabilities,
        *,
        parallel: bool,
    ) -> OutputConstraint | None:
        """The output constraint for a reply that may call ``tools``, on a backend of
        ``capabilities``.

        The one place the proxy builds a tool-call constraint (the first one of a request and
        each narrowing of it), so ``parallel`` -- whether the client allows several calls in one
        reply -- and the request's reply shape (``options``) reach the schema from here.
        """
        if request.constraint is not None:
            return request.constraint  # the client asked for its own output format
        try:
            return choose_constraint(
                self._constrain,
                capabilities,
                tools,
                shape=options.call_shape(parallel=parallel),
            ).constraint
        except ToolSchemaError as exc:
            # A client's schema the constraint cannot express (a keyword validation ignores may
            # still hold, say, a $ref the constraint builder follows): constraining is
            # best-effort under "auto", so rescue parsing reads the reply instead.
            if self._constrain == "always":
                raise ProxyHTTPError(
                    ErrorKind.BAD_REQUEST,
                    f"the proxy runs with constrain=always, and these tools cannot be turned "
                    f"into an output constraint: {exc}",
                    code="tools_not_constrainable",
                    param="tools",
                ) from exc
            log.warning("proxy.constraint_skipped", reason=str(exc))
            return None

    # -- running ---------------------------------------------------------------------------

    async def run(self, plan: RequestPlan, sink: Sink | None) -> Outcome:
        """Answer ``plan``; stream what may be released to ``sink`` (``None``: not streaming).

        Raises :class:`ProxyHTTPError` for every failure, including after content was sent.
        """
        deadline_at = (
            trio.current_time() + self._deadline_s if self._deadline_s is not None else None
        )
        withheld: dict[str, str] = {}
        if self._policy is not None:
            request, withheld = withhold(plan.request, self._policy, request_id=plan.request_id)
            plan = msgspec.structs.replace(plan, request=request)
        kind = self._guard_kind(plan.request)
        try:
            if kind == "none":
                gate = StreamGate(GateMode.PASS)
                response = await self._infer(
                    plan.request, self._call(plan, gate, sink, deadline_at, whole=sink is None)
                )
                self._check_diverged(gate)
                await self._report_usage(plan, response)
                return Outcome(response=response)
            return await self._guarded(plan, kind, sink, deadline_at, withheld)
        except ForgeError as exc:
            raise from_forge_error(exc) from exc

    def _call(
        self,
        plan: RequestPlan,
        gate: StreamGate,
        sink: Sink | None,
        deadline_at: float | None,
        *,
        whole: bool,
    ) -> SlotCall:
        """How this request's inferences go through the slot: streamed, through ``gate`` to
        ``sink`` where there is one, or fetched in one piece (``whole``)."""
        on_chunk: Sink | None = None
        if sink is not None:
            forward = sink

            async def on_chunk(chunk: StreamChunk) -> None:
                if isinstance(chunk, FinalChunk):
                    return
                if isinstance(chunk, ResetChunk):
                    self._metrics.resets.inc()
                    log.info("proxy.stream_restarted", request=plan.request_id, reason=chunk.reason)
                for out in gate.feed(chunk):
                    await forward(out)

        return SlotCall(
            priority=plan.priority,
            deadline_at=deadline_at,
            on_chunk=on_chunk,
            affinity_key=plan.client,
            whole=whole,
        )

    async def _infer(self, request: InferenceRequest, call: SlotCall) -> LLMResponse:
        """One unguarded inference (a request without tools)."""
        return await self._slot.infer(
            request,
            priority=call.priority,
            deadline=call.deadline_now(),
            on_chunk=call.on_chunk,
            affinity_key=call.affinity_key,
            whole=call.whole,
        )

    def _check_diverged(self, gate: StreamGate) -> None:
        if gate.diverged:
            raise ProxyHTTPError(
                ErrorKind.BAD_GATEWAY,
                "the reply was interrupted by a higher-priority request and regenerated "
                "differently from what was already streamed; the answer above is incomplete. "
                "Send the request again.",
                code="stream_diverged",
                retry=False,
            )

    async def _report_usage(self, plan: RequestPlan, response: LLMResponse) -> None:
        usage = response.usage
        if self._on_usage is None or usage.prompt_tokens is None:
            return
        await self._on_usage(plan.client, usage.prompt_tokens + (usage.completion_tokens or 0))

    async def _guarded(
        self,
        plan: RequestPlan,
        kind: _Guard,
        sink: Sink | None,
        deadline_at: float | None,
        withheld: dict[str, str],
    ) -> Outcome:
        request = plan.request
        guard = self._guard(request, kind, withheld)
        guard.observe_history(request.messages)  # the turn so far, for its whole-turn checks
        mode = {
            "respond": GateMode.RESPOND,
            "prose": GateMode.PROSE,
            "required": GateMode.HOLD,
        }[kind]
        gate = StreamGate(mode, tool_names=[t.name for t in guard.tools])
        history = list(request.messages)
        parallel = plan.parallel_tool_calls
        capabilities = self._slot.client_for(request.model).capabilities
        base = msgspec.structs.replace(
            request,
            tools=guard.tools,
            constraint=self._constraint(
                request, guard.tools, guard.options, capabilities, parallel=parallel
            ),
        )
        stats = RunStats()

        avoided: frozenset[str] = frozenset()
        excluded: tuple[ToolCall, ...] = ()
        answered: tuple[str, ...] = ()
        pinned: tuple[ToolCall, ...] = ()
        narrowing = NarrowedConstraint(
            base.constraint,
            guard.tools,
            shape=guard.options.call_shape(parallel=parallel),
            grammar=capabilities.grammar,
        )

        async def prepare() -> InferenceRequest:
            nonlocal base, avoided, excluded, answered, pinned
            gate.new_attempt()
            repeated = guard.left_out_tools
            allowed = [t for t in guard.tools if t.name not in repeated]
            blocked = guard.excluded_calls
            answers = guard.answer_choices
            pins = guard.pinned_calls
            changed = (repeated, blocked, answers, pins) != (avoided, excluded, answered, pinned)
            if changed and base.constraint is not None and request.constraint is None:
                # A tool the loop guard warned about is left out of the constraint (the prompt
                # keeps offering it, so the backend's cached prompt stays valid); where none
                # would be left, the calls it blocked are. An answer sent back for leaving out
                # the results is followed by one of them (``Guardrails.answer_choices``).
                avoided, excluded, answered, pinned = repeated, blocked, answers, pins
                narrowed = narrowing.to(
                    allowed or guard.tools, exclude=blocked, answers=answers, pins=pins
                )
                base = msgspec.structs.replace(base, constraint=narrowed)
            return msgspec.structs.replace(base, messages=tuple(history))

        async def on_response(response: LLMResponse) -> None:
            self._check_diverged(gate)
            if sink is None and gate.mode is GateMode.PROSE:
                # Not streamed: classify the whole reply the way a stream would have been.
                gate.feed(TextDeltaChunk(_visible_text(response)))
            await self._report_usage(plan, response)

        async def on_rejected(rejected: Rejected) -> Accepted | None:
            committed = await self._committed_answer(rejected, gate, sink)
            if committed is not None:
                return committed
            self._metrics.retries.labels(rejected.reason.value).inc()
            log.info(
                "proxy.retry",
                request=plan.request_id,
                attempt=stats.inferences,
                reason=rejected.reason.value,
            )
            history.extend(rejected.action.messages())
            return None

        # escalate: a request decoded freely (constrain=never, or a schema the constraint cannot
        # express) gets a constrained retry after a rejected reply, where the backend can.
        step = GuardedStep(
            self._slot,
            guard,
            stats,
            on_response=on_response,
            escalate=True,
            parallel=parallel,
        )
        # Streamed from the backend even for a client that does not stream: the guarded step
        # reads the stream to stop a reply that repeats itself, which fetched whole would run
        # to the token cap.
        call = self._call(plan, gate, sink, deadline_at, whole=False)
        try:
            accepted = await step.run(prepare, call, on_rejected)
        except BudgetExhaustedError as exc:
            self._metrics.guardrail_failures.labels(type(exc).__name__).inc()
            self._observe_stats(stats)
            log.warning(
                "proxy.guardrails_exhausted",
                request=plan.request_id,
                attempts=stats.inferences,
                error=str(exc),
            )
            # What the request did goes with its error, as with an answer (x-forge-rules).
            raise from_forge_error(exc, work=RequestWork.of(stats)) from exc
        self._observe_stats(stats)
        accepted = without_guardrail_text(accepted, respond=kind == "respond")
        action, response = accepted.action, accepted.response
        if isinstance(action, Execute):
            outcome = await self._execute(action, response, gate, sink, stats)
        else:
            outcome = await self._text(action.text, response, gate, sink, stats)
        for dialect in outcome.work.rescued:
            self._metrics.rescues.labels(dialect).inc()
        return outcome

    def _observe_stats(self, stats: RunStats) -> None:
        """One request's inferences and the verdicts of each guardrail rule, into the metrics
        (from the stats the guarded step kept, as the answer's ``x-forge-rules`` is)."""
        self._metrics.attempts.observe(stats.inferences)
        for rule, count in stats.rules.items():
            self._metrics.rules.labels(rule).inc(count)

    async def _emit(self, sink: Sink | None, chunks: list[StreamChunk]) -> None:
        if sink is None:
            return
        for chunk in chunks:
            await sink(chunk)

    async def _text(
        self,
        text: str,
        response: LLMResponse,
        gate: StreamGate,
        sink: Sink | None,
        stats: RunStats,
        rescued: tuple[str, ...] = (),
    ) -> Outcome:
        """A text answer; what the gate already released is not sent again."""
        released = gate.attempt_text
        if text.startswith(released):
            await self._emit(sink, gate.release(text[len(released) :]))
        else:
            # The rescued text differs from the incremental decode (a repaired escape, say):
            # the client keeps what it saw; the logged difference explains it.
            log.warning(
                "proxy.streamed_text_differs",
                streamed_chars=len(released),
                final_chars=len(text),
            )
            text = released
        # A reply stopped for repeating itself ran long as one cut at the token limit does.
        finish = "length" if cut_cause(response.finish_reason) is not None else "stop"
        reasoning = _reasoning(response)
        final = msgspec.structs.replace(
            response, result=TextResponse(content=text, reasoning=reasoning), finish_reason=finish
        )
        return Outcome(response=final, work=RequestWork.of(stats, rescued=rescued))

    async def _execute(
        self,
        action: Execute,
        response: LLMResponse,
        gate: StreamGate,
        sink: Sink | None,
        stats: RunStats,
    ) -> Outcome:
        rescued = tuple(str(d) for d in action.rescued_dialects)
        message: str | None = None
        calls = list(action.calls)
        if gate.mode is GateMode.RESPOND:
            message, calls = split_respond(action.calls)
        if not calls:
            assert message is not None  # Execute always carries at least one call
            return await self._text(message, response, gate, sink, stats, rescued)
        # Text that came with the calls: the respond message, else the prose beside native
        # calls. What the gate already streamed of it is not sent again.
        prose = message if message is not None else action.text
        released = gate.attempt_text
        rest = prose[len(released) :] if prose.startswith(released) else ""
        await self._emit(sink, gate.release(rest))
        final = msgspec.structs.replace(
            response,
            result=[_without_reasoning(c) for c in calls],
            finish_reason="tool_calls",
        )
        if action.reasoning and not isinstance(final.result, TextResponse):
            first = msgspec.structs.replace(final.result[0], reasoning=action.reasoning)
            final = msgspec.structs.replace(final, result=[first, *final.result[1:]])
        work = RequestWork.of(stats, rescued=rescued)
        return Outcome(response=final, text_with_calls=prose, work=work)

    async def _committed_answer(
        self, rejected: Rejected, gate: StreamGate, sink: Sink | None
    ) -> Accepted | None:
        """The answer when a rejected reply had already been partly streamed, else ``None``.

        ``respond`` mode: the streamed message is the answer (the client saw it); if its
        string never closed and the model did not simply run out of tokens, the answer is
        incomplete and an error follows it. ``prose`` mode: a reply that streamed as prose and
        holds no call was prose after all; a rejected call after streamed prose is retried
        (the prose stays, the corrected call follows it).
        """
        if not gate.committed:
            return None
        answer = Accepted(action=TextAnswer(text=gate.attempt_text), response=rejected.response)
        if gate.mode is GateMode.RESPOND:
            out_of_tokens = cut_cause(rejected.response.finish_reason) is not None
            if not gate.message_closed and not out_of_tokens:
                raise ProxyHTTPError(
                    ErrorKind.GUARDRAIL,
                    "the model's reply broke off in the middle of its message; the text above "
                    "is incomplete. Send the request again.",
                    code="reply_incomplete",
                    retry=False,
                )
            if not gate.message_closed:
                await self._emit(sink, gate.release_held_message())
                answer = msgspec.structs.replace(answer, action=TextAnswer(text=gate.attempt_text))
            log.info(
                "proxy.committed_reply_kept",
                rejected=type(rejected.action).__name__,
                reason="the respond message had already been streamed",
            )
            return answer
        if gate.mode is GateMode.PROSE and rejected.reason is RetryReason.NO_CALL:
            await self._emit(sink, gate.release_prose_tail())
            return answer
        return None


def _visible_text(response: LLMResponse) -> str:
    return response.result.content if isinstance(response.result, TextResponse) else ""


def _reasoning(response: LLMResponse) -> str | None:
    if isinstance(response.result, TextResponse):
        return response.result.reasoning
    return next((c.reasoning for c in response.result if c.reasoning), None)


def _without_reasoning(call: ToolCall) -> ToolCall:
    return msgspec.structs.replace(call, reasoning=None) if call.reasoning else call
