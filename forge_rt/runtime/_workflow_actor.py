"""WorkflowActor: one workflow run or chat session, owning its history and running the guarded loop.

Each iteration: cancellation check → compaction against the budget → one guarded step (one
inference through the SlotWorker, validate/rescue, step and prerequisite enforcement: the
:class:`~forge_rt.runtime._step.GuardedStep` the proxy uses too) → execute the batch → terminal
check. Guardrails and compaction run here, inside the loop; control state (completed steps,
iteration, error budgets) lives in the Guardrails object, outside the history, so compaction can
never erase it. Cancellation (the caller, a deadline, shutdown) goes through the turn's cancel
scope and ends the turn with a resumable ``WorkflowCancelledError``.

A cancellation can land while a batch of calls runs. The calls that finished keep their results
(recorded into the history as the turn ends); on ``resume()`` the calls left without a result
are run again first, or, for a tool marked ``idempotent=False``, answered with a
:class:`~forge_rt.errors.ToolInterruptedError` so the model decides. The history stays one a
backend accepts: every call has its result before the next inference.
"""

from __future__ import annotations

import collections
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import msgspec
import pydantic
import trio

from actors import Actor, ActorRef, handles, quiet_logger
from forge_rt.context import CompactEvent, ContextManager
from forge_rt.core import (
    InferenceRequest,
    LLMResponse,
    Message,
    OutputConstraint,
    ResetChunk,
    Role,
    Sampling,
    StepTracker,
    StreamChunk,
    ToolCall,
    ToolDef,
    Workflow,
)
from forge_rt.errors import (
    ContextExhaustedError,
    ContextOverflowError,
    ForgeError,
    MaxIterationsError,
    StoreError,
    ToolInterruptedError,
    WorkflowCancelledError,
)
from forge_rt.guardrails import (
    GuardrailOptions,
    Guardrails,
    NarrowedConstraint,
    RetryReason,
    StepBlocked,
    TextAnswer,
    ToolResult,
)
from forge_rt.runtime._approvals import ApprovalGate
from forge_rt.runtime._budget import GetBudget, ObservedUsage
from forge_rt.runtime._durable import ControlState, SessionLog, StoredResult
from forge_rt.runtime._slot import InferenceSlot
from forge_rt.runtime._step import GuardedStep, Rejected, RunStats, SlotCall
from forge_rt.trace import Tracer, TraceSink

__all__ = [
    "MessageSink",
    "TurnOptions",
    "WorkflowActor",
    "WorkflowResult",
]

_log = quiet_logger(__name__)

ChunkSink = Callable[[StreamChunk], Awaitable[None]]
MessageSink = Callable[[Message], Awaitable[None] | None]


class WorkflowResult(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended: the terminal tool's output (or the model's answer), and the state.

    ``output`` is the terminal tool's result; for the ``respond`` tool it is the message to the
    user. ``answer_only`` is set when retry nudges were off and plain text ended the turn.
    """

    output: str
    terminal_call: ToolCall | None
    messages: tuple[Message, ...]
    completed_steps: tuple[str, ...]
    iteration: int
    stats: RunStats
    answer_only: bool = False


class TurnOptions(msgspec.Struct, kw_only=True):
    """Per-turn settings of a WorkflowActor."""

    priority: int = 0
    deadline: float | None = None  # seconds for the whole turn
    inference_deadline: float | None = None  # seconds for each inference call
    on_chunk: ChunkSink | None = None
    on_message: MessageSink | None = None
    prompt_variables: Mapping[str, str] | None = None


class _Turn(msgspec.Struct):
    user_text: str | None  # None: resume the loop without a new user message
    options: TurnOptions
    scope: trio.CancelScope


class _TurnOk(msgspec.Struct):
    result: WorkflowResult


class _TurnFailed(msgspec.Struct):
    error: ForgeError
    stats: RunStats | None = None


class _Prewarm(msgspec.Struct):
    prompt_variables: Mapping[str, str] | None
    priority: int


class _Prewarmed(msgspec.Struct):
    prompt_tokens: int | None


class _PrewarmRefused(msgspec.Struct):
    error: Exception


class _GetHistory(msgspec.Struct):
    persisted: bool = True


class WorkflowActor(Actor):
    """Runs turns of one workflow; the turn's reply is ``_TurnOk`` or ``_TurnFailed``.

    Failures are replies, not crashes: a workflow that exhausts a budget is an expected outcome
    that the caller must see typed, and the actor keeps its state so the caller can resume.
    """

    def __init__(
        self,
        workflow: Workflow,
        slot: InferenceSlot,
        *,
        name: str,
        max_iterations: int,
        context: ContextManager | None,
        sampling: Sampling,
        guardrail_options: GuardrailOptions,
        constraint: OutputConstraint | None,
        constraint_reason: str | None,
        budget: ActorRef[Any] | None,
        seed_messages: tuple[Message, ...] | list[Message] = (),
        completed_steps: tuple[str, ...] = (),
        iteration: int = 0,
        log: SessionLog | None = None,
        restored: ControlState | None = None,
        trace: TraceSink | None = None,
        approvals: ApprovalGate | None = None,
        model: str | None = None,
    ) -> None:
        self._workflow = workflow
        self._model = model  # asked of every call: a fleet of several models routes by it
        self._approvals = approvals  # the policy's approvals and withheld tools (_approvals.py)
        self._slot = slot
        self._name = name
        self._max_iterations = max_iterations
        self._context = context
        self._sampling = sampling
        self._constraint_reason = constraint_reason
        self._budget = budget
        tracker = restored.tracker() if restored is not None else StepTracker(completed_steps)
        self._guardrails = Guardrails.from_workflow(
            workflow,
            options=guardrail_options,
            tracker=tracker,
            withheld=approvals.withheld if approvals is not None else None,
        )
        self._narrowed = NarrowedConstraint(
            constraint,
            self._guardrails.tools,
            shape=self._guardrails.call_shape(),
            grammar=slot.client_for(model).capabilities.grammar,
        )
        self._avoid: frozenset[str] = frozenset()  # tools a loop nudge just blocked
        self._window: int | None = None  # the backend's context length, once asked
        self._window_known = False
        self._history: list[Message] = list(seed_messages)
        # A restored or seeded history was given to the model before these guardrails existed:
        # its ids are known values, not guesses.
        self._guardrails.learn_facts(self._history)
        self._iteration = iteration
        self._turn_start = len(self._history)
        self._batch: list[ToolResult] = []  # results of the batch running now, as they finish
        self._log = log  # the session store's writer: every change is committed before it is used
        self._turn_open = False
        # The call whose tool is running (or was, when the turn was cut): _UNKNOWN for a run
        # seeded from a WorkflowCancelledError, which does not say.
        self._running: str | None = _UNKNOWN if seed_messages and restored is None else None
        if restored is not None:
            self._running = restored.running
            self._iteration = restored.iteration
            self._turn_open = restored.turn_open
            self._batch = [r.result() for r in restored.finished]
            if restored.budgets is not None:
                self._guardrails.restore_budgets(restored.budgets)
        self._tracer = Tracer(trace, name) if trace is not None else None
        if self._tracer is not None:
            self._tracer.header(
                workflow,
                guardrail_options,
                completed_steps=tracker.completed_steps,
                constraint=constraint,
                constraint_reason=constraint_reason,
                max_iterations=max_iterations,
            )

    # --- messages ------------------------------------------------------------------------------

    @handles(_Turn)
    async def on_turn(self, msg: _Turn) -> _TurnOk | _TurnFailed:
        started = trio.current_time()
        stats = RunStats(constraint=self._constraint_reason)
        outcome: _TurnOk | _TurnFailed | None = None
        with msg.scope:
            if msg.options.deadline is not None:
                msg.scope.deadline = min(
                    msg.scope.deadline, trio.current_time() + msg.options.deadline
                )
            try:
                if msg.user_text is not None:
                    await self._begin_turn(msg.user_text, msg.options)
                if self._tracer is not None:
                    self._tracer.turn_started(msg.user_text)
                    # Only a batch cut by a restart is non-empty here: the calls that finished
                    # before it are recorded in this life, so its trace carries their results.
                    for result in self._batch:
                        self._tracer.tool(result, duration_s=0.0, restored=True)
                outcome = _TurnOk(await self._loop(msg.options, stats))
            except ForgeError as exc:
                outcome = _TurnFailed(exc)
        if outcome is None and self._batch:
            outcome = await self._keep_finished(msg.options, stats)
        stats.wall_s = trio.current_time() - started
        if isinstance(outcome, _TurnFailed):
            outcome.stats = stats
        if outcome is None:
            outcome = _TurnFailed(
                WorkflowCancelledError(
                    f"workflow {self._workflow.name!r} was cancelled at iteration "
                    f"{self._iteration}; pass this error to resume() to continue",
                    messages=self._history,
                    completed_steps=self._guardrails.tracker.completed_steps,
                    iteration=self._iteration,
                ),
                stats,
            )
        if isinstance(outcome, _TurnOk):
            self._forget_transients()
        cancelled = isinstance(outcome, _TurnFailed) and isinstance(
            outcome.error, WorkflowCancelledError
        )
        if self._turn_open and not cancelled:
            # Ended: only a cancelled (or killed) turn is left open, to be resumed.
            self._turn_open = False
            try:
                await self._persist()
            except StoreError as exc:
                outcome = _TurnFailed(exc, stats)
        if self._tracer is not None:
            failed = outcome.error if isinstance(outcome, _TurnFailed) else None
            self._tracer.turn_ended(failed, stats)
        _log.info(
            "workflow.turn",
            workflow=self._workflow.name,
            actor=self._name,
            ok=isinstance(outcome, _TurnOk),
            error=type(outcome.error).__name__ if isinstance(outcome, _TurnFailed) else None,
            iterations=stats.iterations,
            inferences=stats.inferences,
        )
        return outcome

    async def _begin_turn(self, user_text: str, options: TurnOptions) -> None:
        """Open a turn: the user's message (after the system prompt, on the first turn), committed
        in one piece with the turn marked open before the loop acts on it."""
        self._forget_transients()
        self._guardrails.new_turn(user_text)
        # max_iterations is each turn's budget: a chat daemon's hundredth message gets as many
        # iterations as its first (the count ran across turns, so a long session's turns began
        # exhausted: "MaxIterationsError: 0 iterations" on the real 0.5B's second turn).
        self._iteration = 0
        opening = []
        if not self._history:
            system = self._workflow.render_system_prompt(options.prompt_variables)
            opening.append(Message.system(system))
        opening.append(Message.user(user_text))
        self._guardrails.learn_facts(opening[:-1])  # the prompt; the request came with new_turn
        self._turn_open = True
        self._turn_start = len(self._history)
        await self._extend(opening, options)

    @handles(_Prewarm)
    async def on_prewarm(self, msg: _Prewarm) -> _Prewarmed | _PrewarmRefused:
        """Have the backend process this workflow's static prefix (system prompt and tools) now,
        on the cache line its turns will use, so a first request finds it cached.

        Only before the first turn: after it the history is the prefix, and stays warm by use.
        A refusal or a backend failure is the reply, not a crash of the actor.
        """
        if self._history:
            return _PrewarmRefused(
                RuntimeError(
                    f"workflow {self._name!r} already has a history; prewarm before its first turn"
                )
            )
        try:
            system = Message.system(self._workflow.render_system_prompt(msg.prompt_variables))
            request = InferenceRequest(
                messages=(system,),
                tools=self._guardrails.tools,
                sampling=msgspec.structs.replace(self._sampling, max_tokens=1),
                model=self._model,
            )
            response = await self._slot.infer(
                request, priority=msg.priority, affinity_key=self._name, whole=True
            )
        except ForgeError as exc:
            return _PrewarmRefused(exc)
        _log.debug(
            "workflow.prewarmed",
            actor=self._name,
            prompt_tokens=response.usage.prompt_tokens,
            cached_tokens=response.usage.cached_tokens,
        )
        return _Prewarmed(response.usage.prompt_tokens)

    @handles(_GetHistory)
    async def on_history(self, msg: _GetHistory) -> tuple[Message, ...]:
        if msg.persisted:
            return tuple(m for m in self._history if not m.transient)
        return tuple(self._history)

    # --- the loop ------------------------------------------------------------------------------

    async def _loop(self, options: TurnOptions, stats: RunStats) -> WorkflowResult:
        # Escalation acts only on an unconstrained request: a run that decodes freely by
        # choice (constrain="never") gets a constrained retry after a rejected reply.
        step = GuardedStep(
            self._slot,
            self._guardrails,
            stats,
            on_response=self._observe,
            escalate=True,
            tracer=self._tracer,
            # The reply of the turn's last iteration: one sent back could not be answered.
            last_chance=lambda: self._iteration >= self._max_iterations,
        )
        call = SlotCall(
            priority=options.priority,
            deadline=options.inference_deadline,
            on_chunk=options.on_chunk,
            affinity_key=self._name,
            wait_for_room=True,  # a full queue delays a turn; it must not fail one mid-way
        )

        async def prepare() -> InferenceRequest:
            return await self._next_request(options, stats)

        async def on_rejected(rejected: Rejected) -> None:
            action = rejected.action
            if isinstance(action, StepBlocked) and rejected.reason is RetryReason.LOOP:
                self._avoid = frozenset(e.tool for e in action.errors if e.tool)
            await self._reject(action.messages(), options)

        interrupted = _unanswered(self._history)
        if interrupted:
            _log.info(
                "workflow.resuming_calls",
                actor=self._name,
                calls=[c.tool for c in interrupted],
            )
            result = await self._execute(interrupted, options, stats, resumed=True)
            if result is not None:
                return result
        overflowed = False
        while True:
            try:
                accepted = await step.run(prepare, call, on_rejected)
            except ContextOverflowError as exc:
                # Once per reply: the estimate was wrong by the backend's own count, so the
                # history is compacted to fit that count and sent again. A second overflow
                # in a row means compaction cannot make it fit: the run's context is spent.
                if overflowed or not self._fit_to(exc):
                    how = "even compacted" if self._context is not None else "(no context manager)"
                    raise ContextExhaustedError(
                        f"workflow {self._workflow.name!r}: the history no longer fits the "
                        f"backend's context {how} ({exc.prompt_tokens} prompt tokens for "
                        f"{exc.context_tokens}); give it a context manager or a larger context",
                        prompt_tokens=exc.prompt_tokens,
                        context_tokens=exc.context_tokens,
                        messages=self._history,
                    ) from exc
                overflowed = True
                continue
            overflowed = False
            action = accepted.action
            if isinstance(action, TextAnswer):
                self._turn_open = False  # the answer ends the turn: stored with it
                await self._extend(action.messages(), options)
                return self._result(action.text, None, stats, answer_only=True)
            await self._extend(action.messages(), options)
            result = await self._execute(action.calls, options, stats)
            if result is not None:
                return result

    async def _next_request(self, options: TurnOptions, stats: RunStats) -> InferenceRequest:
        """Count the iteration against its budget, compact, and build the request."""
        if self._iteration >= self._max_iterations:
            pending = self._guardrails.tracker.pending(self._workflow.required_steps)
            raise MaxIterationsError(
                f"workflow {self._workflow.name!r} reached max_iterations="
                f"{self._max_iterations} without its terminal tool succeeding; pending "
                f"steps: {pending}",
                iterations=self._iteration,
                pending_steps=pending,
                messages=self._history,
            )
        self._iteration += 1
        stats.iterations += 1
        await self._persist()  # a restart must not hand the turn this iteration again
        await self._compact(stats)
        return InferenceRequest(
            messages=tuple(self._history),
            tools=self._guardrails.tools,
            sampling=self._sampling,
            constraint=self._constraint_now(),
            priority=options.priority,
            model=self._model,
        )

    async def _compact(self, stats: RunStats) -> None:
        context = self._context
        if context is None:
            return
        if self._budget is not None:
            budget = await self._budget.ask(GetBudget(self._name))
            if budget is not None:
                context.budget_tokens = budget
        window = await self._backend_window()
        if window is not None and context.budget_tokens > window:
            # A budget larger than what the backend can take in one prompt would let the
            # history grow into a 400 (llama-server's exceed_context_size_error).
            _log.info(
                "workflow.budget_clamped",
                actor=self._name,
                budget=context.budget_tokens,
                backend_context=window,
            )
            context.budget_tokens = window
        compacted, event = context.maybe_compact(self._history)
        if event is not None:
            self._history = list(compacted)
            stats.compactions += 1
            _log_compaction(self._name, event)

    def _fit_to(self, overflow: ContextOverflowError) -> bool:
        """Shrink the context window to what the backend said fits; False if nothing can."""
        context = self._context
        real, window = overflow.prompt_tokens, overflow.context_tokens
        if context is None or real is None or window is None:
            return False
        estimated = context.estimator.count_prompt(self._history)
        context.estimator.observe_usage(self._history, real)
        # The window in the estimator's units: the history compacts until its estimate, scaled
        # by how far the estimate was off, fits the backend's context.
        fitted = math.floor(window * estimated / real)
        if self._window is not None:
            fitted = min(fitted, self._window)  # never widen what an earlier overflow narrowed
        self._window = max(1, min(window, fitted))
        self._window_known = True
        _log.info(
            "workflow.context_overflow",
            actor=self._name,
            prompt_tokens=real,
            backend_context=window,
            estimated=estimated,
            window=self._window,
        )
        return True

    async def _backend_window(self) -> int | None:
        """The backend's context for one call (asked once), or None where it does not say."""
        if not self._window_known:
            self._window = await self._slot.client_for(self._model).context_length()
            self._window_known = True
        return self._window

    async def _observe(self, response: LLMResponse) -> None:
        """Report a reply's token use to the BudgetActor and calibrate the token estimator."""
        prompt = response.usage.prompt_tokens
        if prompt is None:
            return
        if self._budget is not None:
            await self._budget.send(
                ObservedUsage(self._name, prompt + (response.usage.completion_tokens or 0))
            )
        if self._context is not None:
            self._context.estimator.observe_usage(self._history, prompt)

    def _constraint_now(self) -> OutputConstraint | None:
        """This iteration's constraint: narrowed to the tools callable now (see
        ``Guardrails.callable_now``), leaving out for one iteration a tool the loop guard just
        blocked. On the last iteration, with no required step pending, only the terminal tools:
        a run that has done its steps ends with an answer rather than a MaxIterationsError
        (the real 0.5B kept calling lookups until the budget ran out) -- even right after a
        list-coverage refusal, which otherwise leaves the terminal tools out for one batch
        (the real 1.5B then spent its last iteration on a lookup and ended unanswered). An
        answer after one sent back for leaving out the results is one of them
        (``Guardrails.answer_choices``)."""
        avoid, self._avoid = self._avoid, frozenset()
        allowed = self._guardrails.callable_now(avoid)
        guardrails = self._guardrails
        last = self._iteration >= self._max_iterations
        if last and not guardrails.tracker.pending(guardrails.required_steps):
            finishing = tuple(t for t in guardrails.tools if t.name in guardrails.terminal_tools)
            allowed = finishing or allowed
        # A blocked tool that must stay callable is offered without the call it blocked.
        return self._narrowed.to(
            allowed,
            exclude=guardrails.excluded_calls,
            answers=guardrails.answer_choices,
            pins=guardrails.pinned_calls,
        )

    async def _execute(
        self,
        calls: list[ToolCall],
        options: TurnOptions,
        stats: RunStats,
        *,
        resumed: bool = False,
    ) -> WorkflowResult | None:
        """Run ``calls`` in order and record their results; ``resumed``: these calls were cut
        off by a cancellation (or a restart), and the non-idempotent one that had started is
        answered, not run again; the calls after it never started, and run. A call its policy
        says to approve waits for the answer first; one cut while it ran is asked again
        (``resumed``), and the approver decides whether it runs again."""
        finished = {r.call.call_id for r in self._batch}  # kept from before a restart
        for call in calls:
            if call.call_id in finished:
                continue
            started = trio.current_time()
            # Had it started when the turn was cut? Unknown for a run seeded from an error.
            cut = resumed and (self._running is _UNKNOWN or call.call_id == self._running)
            gate = self._approvals
            asked = gate is not None and gate.asks(call.tool)
            declined = await gate.ask(call, resumed=cut) if gate is not None and asked else None
            if declined is not None:
                result = declined
            elif cut and not asked and not self._safe_to_repeat(call):
                result = ToolResult(call=call, error=_interrupted(call))
            else:
                self._running = call.call_id
                if not self._safe_to_repeat(call):
                    await self._persist()  # a restart must know it may have taken effect
                result = await self._run_tool(call)
            self._running = None
            if self._tracer is not None:
                self._tracer.tool(result, duration_s=trio.current_time() - started)
            self._batch.append(result)
            await self._persist()  # the tool ran: its result must survive a restart
        results, self._batch = self._batch, []
        return await self._record(results, options, stats)

    async def _record(
        self, results: list[ToolResult], options: TurnOptions, stats: RunStats
    ) -> WorkflowResult | None:
        stats.tool_calls += len(results)
        stats.tool_errors += sum(1 for r in results if not r.ok)
        outcome = self._guardrails.record(results)
        for rule in outcome.rules:
            stats.count_rule(rule)
        if outcome.done:
            self._turn_open = False  # the terminal result ends the turn: stored with it
        if self._tracer is not None:
            self._tracer.recorded(results, outcome)
        await self._extend(outcome.messages, options)
        if outcome.done:
            assert outcome.terminal_call is not None
            return self._result(outcome.terminal_output or "", outcome.terminal_call, stats)
        if outcome.fatal is not None:
            raise outcome.fatal
        return None

    async def _keep_finished(
        self, options: TurnOptions, stats: RunStats
    ) -> _TurnOk | _TurnFailed | None:
        """A cancellation cut a batch short: record the calls that finished, so ``resume()``
        runs only the rest. If the terminal tool was among them the turn is done after all;
        if their errors spent the tool-error budget, it failed with that budget's error."""
        results, self._batch = self._batch, []
        try:
            result = await self._record(results, options, stats)
        except ForgeError as exc:
            return _TurnFailed(exc)
        return _TurnOk(result) if result is not None else None

    def _safe_to_repeat(self, call: ToolCall) -> bool:
        if self._guardrails.is_synthetic_respond(call):
            return True
        tool = self._workflow.tools.get(call.tool)
        return tool is None or tool.idempotent

    async def _run_tool(self, call: ToolCall) -> ToolResult:
        if self._guardrails.is_synthetic_respond(call):
            return ToolResult(call=call, output=str(call.args.get("message", "")))
        tool = self._workflow.tools[call.tool]
        try:
            with _timeout(tool):
                value = await _invoke(tool, call.args)
        except trio.TooSlowError:
            return ToolResult(
                call=call,
                error=TimeoutError(f"{call.tool} did not finish within {tool.timeout:g} s"),
            )
        except Exception as exc:  # noqa: BLE001 -- a tool's failure is fed back to the model, counted
            return ToolResult(call=call, error=exc)
        except BaseException as exc:
            # SystemExit (argparse inside a tool), GeneratorExit, a group of them: the tool's
            # own failure, which must not take the session down. Cancellation is ours, and
            # Ctrl-C the operator's (trio raises it in whichever task runs): both go on.
            if isinstance(exc, trio.Cancelled | KeyboardInterrupt) or _holds_cancel(exc):
                raise
            return ToolResult(call=call, error=ToolExitError(call.tool, exc))
        return ToolResult(call=call, output=_render(value))

    # --- history -------------------------------------------------------------------------------

    async def _append(self, message: Message, options: TurnOptions) -> None:
        await self._extend([message], options)

    async def _extend(self, messages: list[Message], options: TurnOptions) -> None:
        """Commit ``messages`` to the session store (if any), append them together, then tell
        the sink: what the sink sees is stored, and a cancellation landing in the sink cannot
        leave half of them out (a call without its result, a reply without its correction)."""
        if self._log is not None:
            await self._log.commit(messages, self._control_state())
        self._history.extend(messages)
        sink = options.on_message
        if sink is None:
            return
        for message in messages:
            pending = sink(message)
            if inspect.isawaitable(pending):
                await pending

    async def _persist(self) -> None:
        """Commit the control state alone (no new messages), where there is a store."""
        if self._log is not None:
            await self._log.commit([], self._control_state())

    def _control_state(self) -> ControlState:
        tracker = self._guardrails.tracker
        return ControlState(
            iteration=self._iteration,
            turn_open=self._turn_open,
            completed_steps=tracker.completed_steps,
            step_calls=tracker.calls,
            budgets=self._guardrails.budgets,
            finished=tuple(StoredResult.of(r) for r in self._batch),
            running=self._running,
        )

    async def _reject(self, messages: list[Message], options: TurnOptions) -> None:
        if options.on_chunk is not None:
            await options.on_chunk(ResetChunk("reply rejected by the guardrails; retrying"))
        await self._extend(messages, options)

    def _forget_transients(self) -> None:
        """Drop nudges and failed attempts of finished turns; they only cost context now."""
        self._history = [m for m in self._history if not m.transient]

    def _result(
        self, output: str, call: ToolCall | None, stats: RunStats, *, answer_only: bool = False
    ) -> WorkflowResult:
        return WorkflowResult(
            output=output,
            terminal_call=call,
            messages=tuple(self._history),
            completed_steps=self._guardrails.tracker.completed_steps,
            iteration=self._iteration,
            stats=stats,
            answer_only=answer_only,
        )


_UNKNOWN = "\x00unknown"  # a call id no call has: "which call was running is not known"


def _unanswered(history: list[Message]) -> list[ToolCall]:
    """The calls of the last accepted reply that have no result: a cancelled batch's rest.

    Only an accepted reply (not transient) counts; a rejected one is answered by its
    correction, and a user message after it starts a new turn.
    """
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role is Role.USER:
            return []
        if message.tool_calls and not message.transient:
            answered = {m.tool_call_id for m in history[index + 1 :] if m.tool_call_id}
            return [c for c in message.tool_calls if c.call_id not in answered]
    return []


def _interrupted(call: ToolCall) -> ToolInterruptedError:
    return ToolInterruptedError(
        f"{call.tool} was cancelled while it ran; it is not idempotent, so it was not run again",
        tool=call.tool,
        call_id=call.call_id,
    )


def _holds_cancel(exc: BaseException) -> bool:
    """Whether ``exc`` is a group holding a trio cancellation, which must propagate."""
    if not isinstance(exc, BaseExceptionGroup):
        return False
    cancelled, _ = exc.split(trio.Cancelled)
    return cancelled is not None


class ToolExitError(Exception):
    """A tool raised a BaseException that is not an Exception (SystemExit, GeneratorExit):
    fed back to the model as the call's error, like any other tool failure."""

    def __init__(self, tool: str, cause: BaseException) -> None:
        super().__init__(f"{tool} raised {type(cause).__name__}: {cause}")
        self.__cause__ = cause


def _timeout(tool: ToolDef) -> AbstractContextManager[object]:
    return trio.fail_after(tool.timeout) if tool.timeout is not None else nullcontext()


async def _invoke(tool: ToolDef, args: dict[str, Any]) -> Any:
    if tool.is_async:
        return await tool.callable(**args)
    # A sync tool runs in a worker thread so it cannot stall every other actor; it cannot be
    # interrupted, so on cancellation its result is abandoned.
    return await trio.to_thread.run_sync(lambda: tool.callable(**args), abandon_on_cancel=True)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    return msgspec.json.encode(value).decode()


def _log_compaction(name: str, event: CompactEvent) -> None:
    _log.info(
        "workflow.compacted",
        actor=name,
        phase=event.phase,
        tokens_before=event.tokens_before,
        tokens_after=event.tokens_after,
    )


# Cheap per-process id counter for actor names.
_names: collections.Counter[str] = collections.Counter()


def unique_actor_name(workflow: str) -> str:
    _names[workflow] += 1
    return f"workflow.{workflow}.{_names[workflow]}"
