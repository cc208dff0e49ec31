"""The Guardrails facade: forge_rt's reliability stack for a loop you own.

Two calls per turn. ``check(reply)`` returns the :data:`Action` to take -- run these calls
(refusing those that may not run yet), retry with this nudge, feed back these tool errors, the
batch is blocked, or stop (a budget is exhausted) -- with the messages to append. After running
the calls, ``record(results)`` feeds the results back: it tracks steps and the tool-error budget,
notes ignored arguments, and says whether a terminal tool finished the task. The runtime and the
proxy use the same object. It remembers what it told the model, so that an argument copied from
a nudge or note is caught as an echo.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from actors import quiet_logger
from forge_rt.core import (
    RESPOND_TOOL_NAME,
    Message,
    MessageType,
    Prerequisite,
    Role,
    StepTracker,
    ToolCall,
    ToolSpec,
    Workflow,
)
from forge_rt.errors import (
    BudgetExhaustedError,
    ForgeError,
    ToolDeclinedError,
    ToolExecutionError,
    ToolInterruptedError,
    ToolResolutionError,
    WorkflowDefinitionError,
)
from forge_rt.guardrails._actions import (
    Action,
    Execute,
    Fatal,
    Refusal,
    RetryWithNudge,
    StepBlocked,
    TextAnswer,
    ToolErrors,
)
from forge_rt.guardrails._answered import AnsweredCalls
from forge_rt.guardrails._chains import ChainEnds, LookupChains
from forge_rt.guardrails._coverage import ListCoverage
from forge_rt.guardrails._dialects import Dialect
from forge_rt.guardrails._error_values import error_value_args
from forge_rt.guardrails._errors_budget import ErrorTracker
from forge_rt.guardrails._exclude import StartsWith
from forge_rt.guardrails._grounding import AnswerGrounding
from forge_rt.guardrails._guesses import ArgumentGrounding
from forge_rt.guardrails._loop_guard import LoopGuard
from forge_rt.guardrails._nudges import (
    MAX_TIER,
    Nudge,
    RetryCause,
    again_note,
    call_nudge,
    declined_text,
    error_detail,
    example_call,
    guessed_argument_nudge,
    held_back,
    ignored_args_note,
    interrupted_text,
    lost_number_nudge,
    markup_answer_nudge,
    next_step_text,
    other_item_nudge,
    repeat_note,
    resolution_text,
    retry_nudge,
    shown_note,
    superseded_answer_nudge,
    tool_error_text,
    uncovered_item_nudge,
    unlisted_item_nudge,
)
from forge_rt.guardrails._options import GuardrailOptions
from forge_rt.guardrails._placeholders import (
    EchoCorpus,
    has_echo_markup,
    normalise,
    strip_echo_markup,
)
from forge_rt.guardrails._quantities import RequestQuantities
from forge_rt.guardrails._relevance import judged, related, same_note_text, unrelated_call_text
from forge_rt.guardrails._rescue_args import schema_of, valid_with
from forge_rt.guardrails._respond import respond_spec, workflow_writes
from forge_rt.guardrails._rules import RULES, SCHEMA_RULE
from forge_rt.guardrails._selection import ItemSelection
from forge_rt.guardrails._shape import CallShape
from forge_rt.guardrails._steps import StepEnforcer
from forge_rt.guardrails._unfounded import (
    UnfoundedCalls,
    unfounded_call_text,
)
from forge_rt.guardrails._validator import (
    CallKey,
    Reply,
    ResponseValidator,
    ValidationResult,
    call_key,
)

__all__ = ["Budgets", "Guardrails", "RecordOutcome", "ToolResult"]

log = quiet_logger(__name__)


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """How one executed call went: its ``output``, or the ``error`` it raised. Raise
    :class:`~forge_rt.errors.ToolResolutionError` from a tool to tell the model it was called
    wrong; that is fed back without counting as a failure."""

    call: ToolCall
    output: str | None = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        if self.output is not None and self.error is not None:
            raise ValueError(
                f"ToolResult for {self.call.tool!r} has both an output and an error; give one"
            )

    @property
    def ok(self) -> bool:
        return self.error is None


class RecordOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What recording a batch's results means for the loop: ``messages`` to append, in call
    order; ``done`` when a terminal tool succeeded (``terminal_call`` / ``terminal_output``), and
    the run ends with that result; else ``fatal`` when the tool-error budget ran out (append the
    messages, then end the run with it). ``rules``: the ``results`` rules that added to a message
    (such as ``error_values``), for the run's record."""

    messages: list[Message]
    rules: tuple[str, ...] = ()
    done: bool = False
    terminal_call: ToolCall | None = None
    terminal_output: str | None = None
    fatal: ForgeError | None = None
    succeeded: int = 0
    failed: int = 0


class Budgets(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of every budget: used so far (in a row) against its limit."""

    retries: int
    max_retries: int
    tool_errors: int
    max_tool_errors: int
    premature: int
    max_premature: int
    prereq: int
    max_prereq: int
    loop_streak: int
    loop_repeats: int | None
    completed_steps: tuple[str, ...]


_DEFAULT_OPTIONS = GuardrailOptions()

STEP_PATIENCE = 3
"""Batches in a row that completed no pending required step, after which only the pending steps
are callable: a model that skips a required lookup keeps guessing its value; three batches leave
room for the lookups a step may need first."""

STALE_PATIENCE = 2
"""Batches in a row made only of calls that already succeeded in the turn, after which, with no
required step pending, only the terminal tools are callable: a repeated lookup teaches nothing.
This also catches two lookups alternated, which the loop guard (same call in a row) never sees."""

FAILURE_STREAK = 2
"""Replies in a row in which one tool failed (an error, "called wrong", or arguments its schema
rejects) after which :meth:`Guardrails.callable_now` leaves it out until some call succeeds: a
model tends to re-send a failing tool with more guesses; one failure is often a typo it fixes."""


# The messages whose text the model was given as fact (a correction is not one).
_FACTS = frozenset(
    {
        MessageType.SYSTEM_PROMPT,
        MessageType.USER_INPUT,
        MessageType.TOOL_RESULT,
        MessageType.SUMMARY,
    }
)


class Guardrails:
    """Validation, rescue, nudges, step and prerequisite enforcement, budgets and the loop guard.

    ``options`` says which guardrails are on and their budgets (see :class:`GuardrailOptions`).
    ``respond_tool=True`` adds the synthetic ``respond`` tool ahead of ``tools`` (see
    :func:`~forge_rt.guardrails.with_respond`) -- unless ``tools`` has a tool of
    that name, which stays the caller's own (see :meth:`is_synthetic_respond`); when no
    ``terminal_tools`` are given, ``respond`` is the terminal tool. ``tracker``: resume with
    steps already done. ``withheld`` maps the tools a policy denies (left out of ``tools``) to
    the reason a call of one is refused with (see :func:`~forge_rt.guardrails.apply_policy`).
    ``markers``: texts that mark the corrections the caller wrote into a history the model reads
    (the proxy's); an argument holding one is refused (rule ``placeholders``). ``writes``: the
    tools that are not idempotent: a call of one that already succeeded in the turn is answered
    with its result, not run again (rule ``answered_calls``).
    """

    def __init__(
        self,
        tools: Sequence[ToolSpec],
        *,
        required_steps: Sequence[str] = (),
        terminal_tools: Sequence[str] | frozenset[str] = (),
        prerequisites: Mapping[str, Sequence[Prerequisite | str]] | None = None,
        respond_tool: bool = False,
        tracker: StepTracker | None = None,
        options: GuardrailOptions = _DEFAULT_OPTIONS,
        withheld: Mapping[str, str] | None = None,
        markers: Sequence[str] = (),
        writes: Iterable[str] = (),
    ) -> None:
        terminal = frozenset(terminal_tools)
        self._synthetic_respond = respond_tool and all(t.name != RESPOND_TOOL_NAME for t in tools)
        specs = [respond_spec(), *tools] if self._synthetic_respond else list(tools)
        if self._synthetic_respond:
            # A caller's own ``respond`` tool that a policy withholds gives way to the
            # synthetic one: answering the user is never withheld.
            withheld = {k: v for k, v in (withheld or {}).items() if k != RESPOND_TOOL_NAME}
        if respond_tool:
            terminal = terminal or frozenset({RESPOND_TOOL_NAME})
        prereqs = dict(prerequisites or {})
        _check_names(specs, required_steps, terminal, prereqs)
        self.options = options
        self._guesses = ArgumentGrounding()  # the facts given so far, for a value from nowhere
        self._unfounded = UnfoundedCalls(self._guesses)
        self._validator = ResponseValidator(
            specs,
            rescue=options.rescue,
            placeholders=options.placeholders,
            withheld=withheld,
            facts=self._guesses if options.placeholders else None,
            markers=re.compile("|".join(map(re.escape, markers))) if markers else None,
            answer_tool=RESPOND_TOOL_NAME if self._synthetic_respond else None,
        )
        self._answered = AnsweredCalls(options.max_retries)
        self._writes = frozenset(writes)
        self._errors = ErrorTracker(
            options.max_retries, options.max_tool_errors if options.recovery else 0
        )
        self._tracker = tracker if tracker is not None else StepTracker()
        self._steps = StepEnforcer(
            required_steps,
            terminal,
            prereqs,
            self._tracker,
            options.max_premature,
            options.max_prereq,
        )
        loop_repeats = options.loop_repeats
        self._loop = LoopGuard(loop_repeats) if loop_repeats is not None else None
        self._succeeded: set[CallKey] = set()  # call keys that ran successfully in this task
        self._failed_with: dict[CallKey, str] = {}  # this turn's last error, for the loop nudge
        self._grounding = AnswerGrounding()  # this turn's results, for an answer from nowhere
        self._chains = LookupChains()  # which result fed which call, for an answer mid-chain
        self._coverage = ListCoverage()  # this turn's lists and calls, for a fan-out cut short
        self._quantities = RequestQuantities()  # the request's numbers, for one lost on the way
        self._selection = ItemSelection()  # this turn's listings, for an item picked wrong
        # Narrowings that hold until the next batch runs (see callable_now, excluded_calls):
        self._covering = False  # an item is uncovered: no terminal tool is offered
        self._covered: tuple[ToolCall, ...] = ()  # meanwhile, the calls that covered the others
        self._finding: str | None = None  # a guessed value's step: only it is offered
        self._failing: dict[str, int] = {}  # tool -> failures in a row
        self._last_ok: frozenset[str] = frozenset()  # tools that succeeded in the last batch
        self._pending_before = len(self._tracker.pending(self._steps.required_steps))
        self._idle = 0  # batches in a row that did not advance a required step
        self._stale = 0  # batches in a row that only repeated calls that had succeeded
        self._specs = {spec.name: spec for spec in self._validator.tools}
        # What the model was told, to catch it copied back; a result it relays is no copy.
        self._echoes = EchoCorpus(known=self._guesses.holds)
        self._ignored: dict[str, tuple[str, ...]] = {}  # arguments dropped from the calls to run
        self._results_fired: list[str] = []  # results rules that added to this batch's messages
        self._pins: dict[str, dict[str, Any]] = {}  # tool -> values its next call must carry
        self._unrelated_out: frozenset[str] = frozenset()  # tools sent back as unrelated
        self._markup_answered = False  # this turn's answer was tool-result markup
        self._told_this_turn = False  # a non-terminal synthetic respond ran: not offered again
        # The texts the next answers are held to (see :attr:`answer_choices`); empty: the
        # turn's results as they are when the constraint is built; None: no hold.
        self._answer_hold: tuple[str, ...] | None = None
        self._answer_whole = False  # the hold is to all its texts at once (``every_end``)
        self._request = ""  # this turn's request, where a listed value may be named
        self._pipeline = self._judges()

    @classmethod
    def from_workflow(
        cls,
        workflow: Workflow,
        *,
        options: GuardrailOptions = _DEFAULT_OPTIONS,
        tracker: StepTracker | None = None,
        withheld: Mapping[str, str] | None = None,
    ) -> Guardrails:
        """Guardrails for ``workflow``: its tools, steps, prerequisites; ``withheld`` as above."""
        return cls(
            [t.spec for t in workflow.tools.values()],
            required_steps=workflow.required_steps,
            terminal_tools=workflow.terminal_tools,
            prerequisites={n: t.prerequisites for n, t in workflow.tools.items()},
            respond_tool=workflow.respond_tool,
            tracker=tracker,
            options=options,
            withheld=withheld,
            writes=workflow_writes(workflow),
        )

    def call_shape(self, *, parallel: bool = True) -> CallShape:
        """The shape of this run's constrained replies: the options' (see
        :meth:`GuardrailOptions.call_shape`), a fan-out list of one call for the tools that write."""
        return self.options.call_shape(parallel=parallel, writes=self._writes)

    def is_synthetic_respond(self, call: ToolCall) -> bool:
        """Whether ``call`` is of the synthetic ``respond`` tool, whose ``message`` the loop takes
        as the answer; a caller's own tool named ``respond`` runs like any other tool."""
        return self._synthetic_respond and call.tool == RESPOND_TOOL_NAME

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Every tool the model may call (including ``respond`` when enabled)."""
        return self._validator.tools

    @property
    def terminal_tools(self) -> frozenset[str]:
        return self._steps.terminal_tools

    @property
    def required_steps(self) -> tuple[str, ...]:
        return self._steps.required_steps

    @property
    def tracker(self) -> StepTracker:
        """The steps done so far; control state that lives outside the message history."""
        return self._tracker

    @property
    def errors(self) -> ErrorTracker:
        return self._errors

    @property
    def budgets(self) -> Budgets:
        """How much of each budget is used right now, for reporting."""
        return Budgets(
            retries=self._errors.retries,
            max_retries=self._errors.max_retries,
            tool_errors=self._errors.tool_errors,
            max_tool_errors=self._errors.max_tool_errors,
            premature=self._steps.premature_count,
            max_premature=self._steps.max_premature,
            prereq=self._steps.prereq_count,
            max_prereq=self._steps.max_prereq,
            loop_streak=self._loop.longest_streak if self._loop is not None else 0,
            loop_repeats=self._loop.max_repeats if self._loop is not None else None,
            completed_steps=self._tracker.completed_steps,
        )

    def restore_budgets(self, used: Budgets) -> None:
        """Set the per-turn budgets' use to ``used`` (a snapshot from :attr:`budgets`, kept by
        a session store): a turn resumed after a restart has no more retries, tool errors,
        premature or prerequisite attempts left than it had. The loop guard's rows start over."""
        self._errors.restore(retries=used.retries, tool_errors=used.tool_errors)
        self._steps.restore_counts(premature=used.premature, prereq=used.prereq)

    def new_turn(self, request: str | None = None) -> None:
        """A new user turn starts, asked by ``request`` where known: forget what only described
        the last one. The loop guard's rows, the budgets, the failure rows and what succeeded
        are per turn: a user who asks the same thing twice gets the same call without it
        counting as a loop or a repeat. The steps done stay (the session's control state), and
        so does what the model was told (an echo of an earlier nudge is still an echo)."""
        if self._loop is not None:
            self._loop.reset()
        self._errors.reset_retries()
        self._errors.reset_tool_errors()
        self._steps.reset_premature()
        self._steps.reset_prereq()
        self._succeeded.clear()
        self._failed_with.clear()
        self._answered.new_turn()
        self._grounding.reset(request or "")
        self._guesses.new_turn(request or "")
        self._unfounded.new_turn()
        self._markup_answered = False
        self._told_this_turn = False
        self._answer_hold = None
        self._answer_whole = False
        self._request = request or ""
        self._chains.new_turn(request or "")
        self._coverage.reset(request)
        self._quantities.reset(request or "")
        self._selection.reset(request or "")
        self._pins = {}
        self._unrelated_out = frozenset()
        self._covering = False
        self._covered = ()
        self._finding = None
        self._failing.clear()
        self._last_ok = frozenset()
        self._pending_before = len(self._tracker.pending(self._steps.required_steps))
        self._idle = 0
        self._stale = 0

    def observe_history(self, messages: Sequence[Message]) -> None:
        """Start the turn a history is in the middle of (a caller that sends the whole
        conversation, the proxy): its last user message is the request, and the calls answered
        after it are the turn's results so far (calls answered before it are no repeats). The
        loop guard, the budgets and the steps are not touched."""
        starts = [i for i, m in enumerate(messages) if m.type is MessageType.USER_INPUT]
        self._answered.observe(messages[starts[-1] :] if starts else messages, self._specs)
        if not starts:
            return
        start = starts[-1]
        for earlier in starts[:-1]:
            self._chains.remember_request(messages[earlier].content)
        self.new_turn(messages[start].content)
        self.learn_facts(messages)  # the turn's results too: the ids a call may use
        calls = {c.call_id: c for m in messages[start:] for c in m.tool_calls or ()}
        for message in messages[start + 1 :]:
            call = calls.get(message.tool_call_id or "")
            if message.type is not MessageType.TOOL_RESULT or call is None:
                continue
            self._chains.consult(call.tool, call.args)
            self._coverage.add_call(call, ok=True)
            self._quantities.add_call(self._specs.get(call.tool), call, ok=True)
            if call.tool not in self.terminal_tools:
                self._learn_result(call, message.content)

    def learn_facts(self, messages: Iterable[Message]) -> None:
        """Take what ``messages`` gave the model as fact (not corrections) as values a call may
        use (rules ``placeholders``, ``guessed_values``): for a history the guardrails did not
        see being made (a restored session, the proxy's request)."""
        for message in messages:
            if message.type in _FACTS:
                # A result's [Note] is ours, not the tool's: a copy of it stays an echo.
                self._guesses.learn(strip_echo_markup(message.content))

    def _learn_result(self, call: ToolCall, output: str) -> None:
        """Record a non-terminal call's ``output`` for the checks that read the turn's results."""
        self._grounding.add_result(call.tool, output)
        self._grounding.add_subject(call.args.values())
        self._selection.add_result(call.tool, output)
        self._chains.add_result(call.tool, call.args, output)
        self._coverage.add_source(call.tool, output)

    @property
    def excluded_calls(self) -> tuple[ToolCall, ...]:
        """The calls the next constraint is to exclude (``NarrowedConstraint.to(...,
        exclude=...)``): after an answer was sent back for an item a listed fan-out left out,
        the calls that covered its siblings; the repeats of answered calls the warning blocked
        (rule ``answered_calls``); and, once an answer of this turn was tool-result markup, a
        synthetic ``respond`` whose message starts with ``<`` (a model that answered with markup
        repeats it after each correction). As with every excluded string, the next value must
        then be of safe characters: no quote, backslash or line break."""
        calls = {call_key(c): c for c in self._covered}
        calls.update((call_key(c), c) for c in self._answered.blocked)
        if self._markup_answered and self._synthetic_respond:
            markup = ToolCall(
                tool=RESPOND_TOOL_NAME, args={"message": StartsWith("<")}, call_id="markup"
            )
            calls[call_key(markup)] = markup
        return tuple(calls.values())

    @property
    def left_out_tools(self) -> frozenset[str]:
        """Tools the next constraint of a caller that owns the loop (the proxy) leaves out:
        those whose answered call the model insisted on past the warning (``answered_calls``),
        and, until a batch runs after an ``unrelated_tools`` refusal, every tool that shares no
        word with the request (as :meth:`callable_now` does)."""
        return self._answered.warned | self._unrelated_out

    @property
    def pinned_calls(self) -> tuple[ToolCall, ...]:
        """The values a tool's next call is constrained to, as calls holding only them (for
        ``NarrowedConstraint.to(..., pins=...)``): set by the rule ``named_row`` to the id of
        the row the request names, until a call of the tool runs."""
        return tuple(
            ToolCall(tool=tool, args=dict(values), call_id=f"pin-{tool}")
            for tool, values in self._pins.items()
        )

    @property
    def answer_choices(self) -> tuple[str, ...]:
        """The texts the next synthetic ``respond`` message is constrained to (empty: any), for
        ``NarrowedConstraint.to(..., answers=...)``.

        Set, with ``GuardrailOptions.answer_from_results``, once this turn's answer was sent
        back for using nothing the tools returned (to the turn's last distinct successful
        results, later ones included; with none, nothing is constrained) or for leaving out what
        a lookup chain ended with (to those ends' results): told so in words, a small model
        sends the same answer again. Two or more choices also offer all of them, one per
        line, as one answer (a comparison needs both)."""
        if self._answer_hold is None:
            return ()
        choices = self._answer_hold or self._grounding.recent_successes
        if len(choices) < 2:
            return choices
        if self._answer_whole:
            return ("\n".join(choices),)
        return (*choices, "\n".join(choices))

    def callable_now(self, avoid: frozenset[str] = frozenset()) -> tuple[ToolSpec, ...]:
        """The tools a reply may call right now, for constraining the next one.

        An enumerable choice belongs in the grammar, not in a nudge: while required steps are
        pending the terminal tools are left out, and so is every tool whose prerequisite tools
        have not succeeded (one that must match an argument is checked once the arguments are
        known). Then, each only while some tool is left: after :data:`STEP_PATIENCE` idle
        batches (or a loop guard block) only the pending steps; with none pending, after
        :data:`STALE_PATIENCE` stale batches only the terminal tools; not ``avoid`` (a tool the
        loop guard just blocked); not a tool that failed in :data:`FAILURE_STREAK` replies in a
        row, until some call succeeds; until the next batch runs, no terminal tool after a
        ``list_coverage`` refusal and only the step a guessed value was sent back to; not the
        synthetic ``respond`` once shown to the user this turn in a workflow it does not end.
        With step enforcement off, every tool but the failing ones and the spent ``respond``
        (and, after a coverage refusal, the terminals).
        """
        failing = (
            {t for t, n in self._failing.items() if n >= FAILURE_STREAK}
            if self.options.failure_streak
            else set()
        )
        if self._told_this_turn and self._synthetic_respond:
            failing.add(RESPOND_TOOL_NAME)  # said once; the rest of the turn is the task
        failing |= self._unrelated_out  # sent back as unrelated: not again before a batch runs
        if not self.options.steps:
            kept = _kept(list(self.tools), lambda name: name not in failing)
            if self._covering:
                kept = _kept(kept, lambda name: name not in self.terminal_tools)
            return tuple(kept)
        pending = self._tracker.pending(self.required_steps)
        allowed = []
        for spec in self.tools:
            if pending and spec.name in self.terminal_tools:
                continue
            if not self._prerequisites_met(spec.name):
                continue
            allowed.append(spec)
        # The preferences below narrow the choice only while something is left to call.
        if pending and self._idle >= STEP_PATIENCE:
            allowed = _kept(allowed, lambda name: name in pending)
        if not pending and self.options.stale_calls and self._stale >= STALE_PATIENCE:
            allowed = _kept(allowed, lambda name: name in self.terminal_tools)
        allowed = _kept(allowed, lambda name: name not in avoid)
        if self._covering:
            allowed = _kept(allowed, lambda name: name not in self.terminal_tools)
        if self._finding is not None:
            allowed = _kept(allowed, lambda name: name == self._finding)
        return tuple(_kept(allowed, lambda name: name not in failing))

    def check(
        self,
        response: Reply,
        *,
        constrained: bool = False,
        text_offered: bool = False,
        last_chance: bool = False,
    ) -> Action:
        """Decide what to do with one reply (an LLMResponse, native calls, or text).

        ``constrained``: the reply was decoded under a tool-call constraint, so its text is read
        as the call the constraint promised even with rescue parsing off. ``text_offered``: the
        constraint admitted plain text beside calls, so text with no call is the model's answer
        where ``GuardrailOptions.prose_answers`` is on (free decoding cannot tell an answer from
        a call announced in prose, and retries it). ``last_chance``: no reply may follow this
        one, so the ``answer`` rules do not judge it (sending it back could only end the run
        unanswered).

        Order: rescue and validation (no call → retry nudge; unknown tool or bad arguments →
        tool errors), then steps and prerequisites (those calls are refused, the rest runs),
        then the ``calls`` and ``answer`` rules. An exhausted budget comes back as
        :class:`Fatal`, never raised.
        """
        try:
            action = self._check(response, constrained, text_offered, last_chance)
        except BudgetExhaustedError as exc:
            return Fatal(error=exc)
        for call in _calls_of(action):
            self._echoes.learn_own(call.args)  # before the texts that may quote them
        for text in _shown(action):
            self._echoes.add(text)
        return action

    def _check(
        self, response: Reply, constrained: bool, text_offered: bool, last_chance: bool
    ) -> Action:
        self._ignored = {}
        result = self._validator.validate(response, echoes=self._echoes, constrained=constrained)
        if result.needs_retry:
            return self._retry(result, text_offered=text_offered)
        if result.errors:
            return self._invalid(result)
        self._errors.reset_retries()
        refused: list[Refusal] = []
        if self.options.steps:
            ordered = self._steps.check(result.calls, text=result.text)
            if isinstance(ordered, StepBlocked):
                return msgspec.structs.replace(ordered, rule="steps")
            refused = ordered or []
        refused_ids = {r.call.call_id for r in refused}
        runnable = [c for c in result.calls if c.call_id not in refused_ids]
        reply = _Reply(raw=_last_raw(result), text=result.text, text_offered=text_offered)
        judged = self._judge(result, runnable, refused, reply, last_chance=last_chance)
        if not isinstance(judged, _Passed):
            return judged
        self._ignored = {k: v for k, v in result.ignored.items() if k not in refused_ids}
        return Execute(
            calls=list(judged.runnable),
            refused=refused,
            ignored=dict(self._ignored),
            collapsed=result.collapsed + judged.dropped,
            # A call written under the constraint was not rescued: the constraint made it.
            rescued_dialects=tuple(d for d in result.dialects if d is not Dialect.CONSTRAINED_JSON),
            reasoning=result.reasoning,
            text=result.text,
        )

    def _judge(
        self,
        result: ValidationResult,
        runnable: list[ToolCall],
        refused: Sequence[Refusal],
        reply: _Reply,
        *,
        last_chance: bool,
    ) -> ToolErrors | StepBlocked | _Passed:
        """Run the ``calls`` and ``answer`` rules over a parsed reply, in order: the first
        objection is the verdict; else what passed -- the calls that run and how many were
        dropped (the steps' ``refused`` skip the rules that judge a whole reply)."""
        dropped = 0
        for name, judge in self._pipeline:
            if refused and name in _WHOLE_REPLY:
                continue  # judged only when every call of the reply may run
            if last_chance and name in _ANSWER_RULES:
                continue  # no iteration is left to answer a correction
            verdict = judge(runnable, reply)
            if isinstance(verdict, _Redraw):
                return ToolErrors(
                    calls=result.calls,
                    errors=list(verdict.nudges),
                    collapsed=result.collapsed,
                    text=result.text,
                    rule=name,
                    redraw=True,
                )
            if isinstance(verdict, _Dropped):
                runnable = [c for c in runnable if c not in verdict.calls]
                dropped += len(verdict.calls)
            elif isinstance(verdict, StepBlocked):
                blocked = _with_refusals(verdict, result.calls, refused)
                return msgspec.structs.replace(blocked, rule=name)
            elif verdict:
                return ToolErrors(
                    calls=result.calls,
                    errors=verdict,
                    held_back=held_back(result.calls, verdict, kind=MessageType.RETRY_NUDGE),
                    collapsed=result.collapsed,
                    text=result.text,
                    rule=name,
                )
        return _Passed(runnable=tuple(runnable), dropped=dropped)

    def _judges(self) -> tuple[tuple[str, _Judge], ...]:
        """The ``calls`` and ``answer`` rules that are on, in the registry's order, with judges."""
        judges: dict[str, _Judge] = {
            "answered_calls": self._answered_again,
            "unrelated_tools": self._unrelated,
            "unfounded_calls": self._from_nowhere,
            "guessed_values": self._guessed,
            "listing_pick": self._picked_wrong,
            "named_row": self._unlisted,
            "loop_guard": self._looping,
            "list_coverage": self._uncovered,
            "lost_numbers": self._lost_number,
            "answer_grounding": self._ungrounded,
            "chain_ends": self._superseded,
            "every_end": self._left_out,
        }
        staged = [r.name for r in RULES if r.stage in ("calls", "answer") and r.name != "steps"]
        if sorted(staged) != sorted(judges):
            raise AssertionError(f"rules without a judge: {sorted(set(staged) ^ set(judges))}")
        return tuple((name, judges[name]) for name in staged if self.options.enabled(name))

    def _tool_calls(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """``calls`` less the synthetic ``respond``: the calls that run a tool."""
        return [c for c in calls if not self.is_synthetic_respond(c)]

    def _invalid(self, result: ValidationResult) -> ToolErrors:
        """A reply with calls the validator refused: the corrections, the other calls held back."""
        self._errors.record_retry(_last_raw(result), _summary(result.errors))
        self._count_failures(e.tool for e in result.errors if e.tool)
        self._refused_answer(result)
        errors = [self._markup_answer(e, result.calls) or e for e in result.errors]
        return ToolErrors(
            calls=result.calls,
            errors=errors,
            held_back=held_back(result.calls, result.errors, kind=MessageType.RETRY_NUDGE),
            collapsed=result.collapsed,
            text=result.text,
            rule="placeholders" if result.placeholders else SCHEMA_RULE,
        )

    def _answered_again(
        self, runnable: Sequence[ToolCall], reply: _Reply
    ) -> _Dropped | StepBlocked | None:
        """The rule ``answered_calls`` (see :mod:`forge_rt.guardrails._answered`)."""
        repeated = self._answered.again(self._tool_calls(runnable))
        if not repeated:
            return None
        if len(repeated) < len(runnable):
            log.info("guardrails.answered_calls_dropped", tools=[c.tool for c in repeated])
            return _Dropped(calls=tuple(repeated))
        log.info("guardrails.answered_from_history", tools=[c.tool for c in repeated])
        return self._answered.judge(
            repeated, raw=reply.raw, text=reply.text, next_step=self.next_step
        )

    def _looping(self, runnable: Sequence[ToolCall], reply: _Reply) -> StepBlocked | None:
        """The loop guard's block of a reply that repeats a call past its warning, if it does;
        it also narrows what the next constraint offers (see :meth:`callable_now`)."""
        assert self._loop is not None  # judged only with the loop guard on
        looping = self._loop.observe(
            runnable,
            text=reply.text,
            next_step=self.next_step,
            failed_with=lambda call: self._failed_with.get(call_key(call)),
        )
        if looping is None:
            return None
        if self.options.stale_calls and any(call_key(c) in self._succeeded for c in looping.calls):
            self._stale = max(self._stale, STALE_PATIENCE)  # a loop on a lookup that answered
        if self._tracker.pending(self.required_steps):
            # A loop with steps pending: only those steps until one is done (STEP_PATIENCE).
            self._idle = max(self._idle, STEP_PATIENCE)
        return looping

    def _from_nowhere(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``unfounded_calls`` (see :mod:`forge_rt.guardrails._unfounded`), where a text
        answer was open; an answer beside such calls is held back with them."""
        if not reply.text_offered:
            return []
        calls = self._tool_calls(runnable)
        found = self._unfounded.check(calls, self._specs)
        for each in found:
            log.info("guardrails.unfounded_call", tool=each.call.tool, values=len(each.values))
        return [call_nudge(each.call, unfounded_call_text(each)) for each in found]

    def _unrelated(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge] | _Redraw:
        """The rule ``unrelated_tools`` (see :mod:`forge_rt.guardrails._relevance`), judged
        where a text answer was open. Until a batch runs, the constraint leaves out every tool
        unrelated to the request. Where another tool (``respond`` included) is left, the reply is
        drawn again without a note, since a small model shown the note copies it."""
        if not reply.text_offered or self._grounding.any_result:
            return []
        calls = self._tool_calls(runnable)
        if any(c.tool in self.required_steps for c in calls):
            return []  # the workflow's own steps are what its requests are about
        asked = self._chains.request_words  # a follow-up's topic is the conversation's
        found = self._unfounded.unrelated(calls, self._specs, asked)
        if not found:
            return []
        log.info("guardrails.unrelated_tools", tools=[c.tool for c in found])
        self._unrelated_out = frozenset(
            t.name
            for t in self.tools
            if not (self._synthetic_respond and t.name == RESPOND_TOOL_NAME)
            and judged(t)
            and not related(asked, t)
        )
        # One note a tool: a fan-out of one tool sent back with the same note on every call
        # shows the model that text many times over, and a small model answers with it.
        first = {c.tool: c for c in reversed(found)}  # each tool's first call
        nudges = [
            call_nudge(
                c,
                unrelated_call_text(c, self._specs[c.tool])
                if first[c.tool] is c
                else same_note_text(c.tool),
            )
            for c in found
        ]
        if any(t.name not in self._unrelated_out for t in self.tools):
            return _Redraw(nudges=tuple(nudges))
        return nudges

    def _guessed(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``guessed_values`` (see :mod:`forge_rt.guardrails._guesses`)."""
        found = []
        for call in runnable:
            spec = self._specs.get(call.tool)
            if spec is None or self.is_synthetic_respond(call):
                continue
            source = self._guess_source(call.tool)
            props: Mapping[str, Any] = schema_of(spec).get("properties") or {}
            guess = self._guesses.check(call, props, source=source.name if source else None)
            if guess is None:
                continue
            fits = (valid_with(spec, call.args, guess.field, c) for c in guess.candidates)
            fixed = next((args for args in fits if args is not None), None)
            if fixed is None:
                if source is None:
                    continue  # no candidate fits the schema, and no step to point at
                self._finding = source.name
            log.info("guardrails.guessed_argument", tool=call.tool, field=guess.field)
            found.append(
                call_nudge(
                    call, guessed_argument_nudge(spec, guess.field, fixed=fixed, source=source)
                )
            )
        return found

    def _picked_wrong(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``listing_pick`` (see :mod:`forge_rt.guardrails._selection`)."""
        for call in runnable:
            spec = self._specs.get(call.tool)
            if spec is None or call.tool in self.terminal_tools:
                continue
            other = self._selection.check(call)
            if other is None:
                continue
            args = valid_with(spec, call.args, other.field, other.value)
            if args is None:
                continue
            log.info("guardrails.other_item", tool=call.tool, field=other.field)
            content = other_item_nudge(
                spec,
                args,
                field=other.field,
                picked=other.picked,
                named=other.named,
                source=other.tool,
            )
            return [call_nudge(call, content)]
        return []

    def _unlisted(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``named_row`` (see :mod:`forge_rt.guardrails._selection`); the row's
        identifier is pinned for the tool's next call (see :attr:`pinned_calls`)."""
        for call in runnable:
            spec = self._specs.get(call.tool)
            if spec is None or call.tool in self.terminal_tools:
                continue
            props: Mapping[str, Any] = schema_of(spec).get("properties") or {}

            def unfounded(field: str, value: str | int, props: Mapping[str, Any] = props) -> bool:
                return field in props and self._guesses.unfounded(field, value, props[field])

            def accepts(
                field: str, value: str | int, spec: ToolSpec = spec, call: ToolCall = call
            ) -> bool:
                return valid_with(spec, call.args, field, value) is not None

            row = self._selection.named_row(call, unfounded, accepts)
            if row is None:
                continue
            args = valid_with(spec, call.args, row.field, row.value)
            if args is None:
                raise AssertionError("named_row returned a value its schema refuses")
            log.info("guardrails.named_row", tool=call.tool, field=row.field)
            self._pins.setdefault(call.tool, {})[row.field] = row.value
            content = unlisted_item_nudge(
                spec, args, field=row.field, named=row.named, source=row.tool
            )
            return [call_nudge(call, content)]
        return []

    def _guess_source(self, tool: str) -> ToolSpec | None:
        """The pending required step a guessed value of ``tool`` should come from: the first
        that is not ``tool`` itself, not terminal, and may run now."""
        if not self.options.steps:
            return None
        for step in self._tracker.pending(self.required_steps):
            if step == tool or step in self.terminal_tools:
                continue
            if self._prerequisites_met(step) and step in self._specs:
                return self._specs[step]
        return None

    def _prerequisites_met(self, tool: str) -> bool:
        """Whether every prerequisite tool of ``tool`` has succeeded (one that must match an
        argument is checked once the call's arguments are known)."""
        return all(self._tracker.is_done(p.tool) for p in self._steps.prerequisites.get(tool, ()))

    def _uncovered(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``list_coverage`` (see :mod:`forge_rt.guardrails._coverage`)."""
        if len(runnable) != 1 or runnable[0].tool not in self.terminal_tools:
            return []
        call = runnable[0]
        found = self._coverage.check()
        if found is None or (spec := self._specs.get(found.call.tool)) is None:
            return []
        self._covering = True
        self._covered = self._coverage.calls_of(found.call.tool)
        log.info("guardrails.uncovered_item", tool=found.call.tool, item=found.item)
        content = uncovered_item_nudge(
            found.source, found.covered, found.item, found.call.tool, spec, found.call.args
        )
        return [call_nudge(call, content)]

    def _lost_number(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``lost_numbers`` (see :mod:`forge_rt.guardrails._quantities`)."""
        if len(runnable) != 1 or runnable[0].tool not in self.terminal_tools:
            return []
        call = runnable[0]
        lost = self._quantities.check(call.args)
        if lost is None or (spec := self._specs.get(lost.call.tool)) is None:
            return []
        self._covering = True  # as for an uncovered item: the next reply may not answer
        log.info("guardrails.lost_number", tool=lost.call.tool)
        return [call_nudge(call, lost_number_nudge(lost.number, spec, lost.call.args))]

    def _ungrounded(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``answer_grounding`` (see :mod:`forge_rt.guardrails._grounding`)."""
        if len(runnable) != 1 or not self.is_synthetic_respond(runnable[0]):
            return []
        call = runnable[0]
        nudge = self._grounding.check(str(call.args.get("message", "")))
        if nudge is None:
            return []
        log.info("guardrails.ungrounded_answer", tool=call.tool)
        self._answer_from(())
        return [call_nudge(call, nudge)]

    def _markup_answer(self, error: Nudge, calls: Sequence[ToolCall]) -> Nudge | None:
        """The correction :func:`markup_answer_nudge` in place of ``error`` when it refuses a
        synthetic ``respond`` whose message holds tool-result markup and there are results."""
        if not self.options.markup_answers:
            return None
        call = next((c for c in calls if c.call_id == error.call_id), None)
        if call is None or not self.is_synthetic_respond(call):
            return None
        message = call.args.get("message")
        if not isinstance(message, str) or not has_echo_markup(message):
            return None
        self._markup_answered = True  # the next constraints write no answer that starts so
        successes = self._grounding.recent_successes  # a tool's error is no answer to relay
        log.info("guardrails.markup_answer", tool=call.tool, results=bool(successes))
        if not successes:
            return None
        content = markup_answer_nudge(" | ".join(successes))
        return msgspec.structs.replace(error, content=content)

    def _superseded(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``chain_ends`` (see :mod:`forge_rt.guardrails._chains`)."""
        return self._ends_left_out(
            runnable, lambda args, steps: self._chains.check(args, steps=steps), whole=False
        )

    def _left_out(self, runnable: Sequence[ToolCall], reply: _Reply) -> list[Nudge]:
        """The rule ``every_end`` (see :meth:`LookupChains.left_out`)."""
        answered_once = self._grounding.refused
        return self._ends_left_out(
            runnable,
            lambda args, steps: self._chains.left_out(
                args, steps=steps, answered_once=answered_once
            ),
            whole=True,
        )

    def _ends_left_out(
        self,
        runnable: Sequence[ToolCall],
        left_out: Callable[[Mapping[str, object], frozenset[str]], ChainEnds | None],
        *,
        whole: bool,
    ) -> list[Nudge]:
        """The correction for a reply that is only a terminal call whose text ``left_out`` (a
        :class:`LookupChains` reading) finds short of the turn's ends: the call with the ends'
        results as its text; the next answer is held to them (``whole``: to all at once)."""
        if len(runnable) != 1:
            return []
        call = runnable[0]
        spec = self._specs.get(call.tool)
        if call.tool not in self.terminal_tools or spec is None:
            return []
        steps = frozenset(self.required_steps) if self.options.steps else frozenset()
        ends = left_out(call.args, steps)
        if ends is None:
            return []
        event = "guardrails.left_out_answer" if whole else "guardrails.superseded_answer"
        log.info(event, tool=call.tool, ends=ends.tools)
        if self.is_synthetic_respond(call):
            self._answer_from(ends.results, whole=whole)
        content = superseded_answer_nudge(ends.tools, ends.results, spec, call.args, ends.field)
        return [call_nudge(call, content)]

    def _refused_answer(self, result: ValidationResult) -> None:
        """A synthetic ``respond`` the validator refused (a copied correction, a placeholder):
        hold the next answers to the turn's successful results, as after an answer from nowhere."""
        refused = result.failed_ids
        if any(self.is_synthetic_respond(c) and c.call_id in refused for c in result.calls):
            self._answer_from(())

    def _answer_from(self, results: Sequence[str], *, whole: bool = False) -> None:
        """Hold the turn's next answers to ``results``, or (empty) to the turn's successful
        results as they come (see :attr:`answer_choices`); ``whole``: to all at once. A later
        hold to fixed texts replaces an earlier one; one to the results keeps fixed texts held."""
        if not (self.options.answer_from_results and self._synthetic_respond):
            return
        fixed = tuple(dict.fromkeys(r for r in results if r.strip()))
        if fixed or self._answer_hold is None:
            self._answer_hold = fixed
            self._answer_whole = whole and len(fixed) > 1

    def _retry(self, result: ValidationResult, *, text_offered: bool = False) -> Action:
        if not self.options.retry_nudges:
            return TextAnswer(text=result.raw)
        cause = result.cause
        assert cause is not None  # set by the validator whenever needs_retry is
        if text_offered and self.options.prose_answers and cause is RetryCause.PROSE:
            if not self._echoes.copies(normalise(result.raw)):
                log.info("guardrails.prose_answer", chars=len(result.raw))
                return TextAnswer(text=result.raw, rule="prose_answers")
            cause = RetryCause.ECHO  # text that mostly copies a correction is no answer
        if text_offered and (cut := self._cut_answer(result)) is not None:
            return cut
        tier = self._errors.record_retry(result.raw, cause.value)
        nudge = Nudge(
            kind=MessageType.RETRY_NUDGE,
            role=Role.USER,
            content=retry_nudge(tier, self.tools, cause=cause, fragment=result.malformed),
            tier=min(tier, MAX_TIER),
        )
        log.info("guardrails.retry", cause=cause.value, tier=nudge.tier)
        return RetryWithNudge(nudge=nudge, raw=result.raw, rule="retry_nudges")

    def _cut_answer(self, result: ValidationResult) -> TextAnswer | None:
        """The answer a reply stopped before its end was writing, where ``cut_answers`` takes
        it, as a chat API returns an answer that ran past its length: a retry costs another
        reply as long, and the answer may run long again (a copy of a correction is no
        answer)."""
        so_far = result.answer_so_far
        if not self.options.cut_answers or so_far is None:
            return None
        if self._echoes.copies(normalise(so_far)):
            return None
        log.info("guardrails.cut_answer", chars=len(so_far))
        return TextAnswer(text=so_far, rule="cut_answers")

    def next_step(self, avoid: str | None = None) -> str:
        """The call that moves the task on, with an example: a pending required step, else the
        call for an item a listed fan-out left out (``list_coverage``), else a terminal tool.
        ``avoid`` is the tool the model is stuck on."""
        by_name = {t.name: t for t in self.tools}
        pending = [s for s in self._tracker.pending(self.required_steps) if s != avoid]
        if pending:
            return next_step_text(by_name[pending[0]], finish=False)
        uncovered = self._coverage.peek() if self.options.list_coverage else None
        if uncovered is not None and (spec := by_name.get(uncovered.call.tool)) is not None:
            # A listed fan-out left an item out: that call is next, even for the stuck tool.
            return (
                f"Next, call `{spec.name}` for {uncovered.item!r}: "
                f"{example_call(spec, uncovered.call.args)}"
            )
        terminal = sorted(self.terminal_tools - {avoid} if avoid else self.terminal_tools)
        if not terminal:
            return ""
        choice = RESPOND_TOOL_NAME if RESPOND_TOOL_NAME in terminal else terminal[0]
        before = self._steps.first_unmet(choice) if self.options.steps else None
        if before is not None and before != avoid and before in by_name:
            # The terminal cannot run yet: name what it waits for (told only to finish, a
            # model re-runs the steps it has done).
            return next_step_text(by_name[before], finish=False)
        return next_step_text(by_name[choice], finish=True)

    def record(self, results: Sequence[ToolResult]) -> RecordOutcome:
        """Feed back how the calls of an :class:`Execute` went. Successes are recorded as steps
        (first, so control state is right even when a budget runs out) and break the
        tool-error and blocked-reply rows. A ToolResolutionError is fed back uncounted and is
        no step, with the corrected call where its message lists the value meant; any other
        error is fed back and counted. A call that ran without arguments its schema lacks gets
        a ``[Note]`` naming them."""
        self._covering = False  # a batch ran: the terminal tools are offered again
        self._covered = ()
        self._unrelated_out = frozenset()
        self._finding = None
        repeated = {r.call.call_id for r in results if self._observe_result(r)}
        stale = bool(results) and all(r.call.call_id in repeated for r in results)
        self._stale = self._stale + 1 if stale else 0
        # The same tool again right after it succeeded: small models chain a tool on its own
        # result or wander among lookups instead of answering; its result says what comes next.
        again = self._again(results)
        ignored, self._ignored = self._ignored, {}
        self._results_fired = []
        for result in results:
            self._pins.pop(result.call.tool, None)  # a pin holds until its tool's call runs
        messages: list[Message] = []
        fatal: ForgeError | None = None
        for result in results:
            note = self._ignored_note(result.call, ignored.get(result.call.call_id, ()))
            if result.error is None:
                messages.append(self._success_message(result, note, repeated, again))
                continue
            messages.append(self._failure_message(result, result.error, note))
            if fatal is None and _counts_as_failure(result.error, self.options.recovery):
                fatal = self._count_tool_error(result.call, result.error)
        failed = any(r.error is not None and _is_failure(r.error) for r in results)
        if fatal is None and self.options.recovery and failed:
            self._results_fired.append("recovery")  # a failure fed back, not the run's end
        return self._outcome(results, messages, fatal)

    def _observe_result(self, result: ToolResult) -> bool:
        """Learn from one call's result what the later checks read; ``True`` for a success of a
        call that already succeeded in the turn."""
        call = result.call
        key = call_key(call)
        self._chains.consult(call.tool, call.args)
        self._coverage.add_call(call, ok=result.ok)
        self._quantities.add_call(self._specs.get(call.tool), call, ok=result.ok)
        if result.error is not None:
            if _is_failure(result.error):
                self._failed_with[key] = error_detail(result.error)
                self._guesses.learn(str(result.error))
            self._grounding.add_result(call.tool, str(result.error), failed=True)
            return False
        self._guesses.learn(result.output or "")
        self._guesses.learn_args(call.args)
        repeated = key in self._succeeded
        self._succeeded.add(key)
        if call.tool in self._writes:
            self._answered.wrote(call, result.output or "")
        self._failed_with.pop(key, None)
        self._steps.record(call)
        if call.tool not in self.terminal_tools and not self._told_user(call):
            self._learn_result(call, result.output or "")
        return repeated

    def _success_message(
        self, result: ToolResult, note: str, repeated: set[str], again: frozenset[str]
    ) -> Message:
        """The result message of a call that succeeded, with its notes (none on a terminal's)."""
        call = result.call
        output = result.output or ""
        self._errors.reset_tool_errors()
        if call.tool in self.terminal_tools:
            return Message.tool_result(call, output)
        if self._told_user(call):
            self._told_this_turn = self.options.result_notes
        result_note = self._result_note(call, repeated=call.call_id in repeated, again=again)
        if result_note:
            self._results_fired.append("result_notes")
        return Message.tool_result(call, output + result_note + note)

    def _failure_message(self, result: ToolResult, error: BaseException, note: str) -> Message:
        """The result message of a call that did not succeed: declined, interrupted, called
        wrong (with the corrected call its error's values give), or failed."""
        call = result.call
        if isinstance(error, ToolDeclinedError):
            return Message.tool_result(call, self._told(declined_text(call.tool, error.reason)))
        if isinstance(error, ToolInterruptedError):
            return Message.tool_result(call, interrupted_text(call.tool, error) + note)
        if isinstance(error, ToolResolutionError) and self.options.recovery:
            corrected = self._listed_call(call, error) if self.options.error_values else None
            if corrected is not None:
                self._results_fired.append("error_values")
            text = resolution_text(call.tool, error, corrected=corrected)
        else:
            text = tool_error_text(call.tool, error)
        return Message.tool_result(call, text + self._skipped_step(call) + note)

    def _count_tool_error(self, call: ToolCall, error: BaseException) -> ForgeError | None:
        """Count one failure against the tool-error budget; the error that ends the run, if so."""
        try:
            self._errors.record_tool_error(call.tool, error)
        except ToolExecutionError as exc:
            return exc
        return None

    def _outcome(
        self, results: Sequence[ToolResult], messages: list[Message], fatal: ForgeError | None
    ) -> RecordOutcome:
        """What the batch means: done with its first successful terminal call, else ``fatal``."""
        failed = sum(1 for r in results if not r.ok)
        self._count_failures(r.call.tool for r in results if not r.ok)
        if any(r.ok for r in results):
            self._failing.clear()  # progress: every tool gets its chance again
        terminal = next((r for r in results if r.ok and r.call.tool in self.terminal_tools), None)
        if terminal is not None:
            log.debug("guardrails.done", tool=terminal.call.tool)  # workflow.turn says it
            return RecordOutcome(
                messages=messages,
                rules=tuple(self._results_fired),
                done=True,
                terminal_call=terminal.call,
                terminal_output=terminal.output,
                succeeded=len(results) - failed,
                failed=failed,
            )
        return RecordOutcome(
            messages=messages,
            rules=tuple(self._results_fired),
            fatal=fatal,
            succeeded=len(results) - failed,
            failed=failed,
        )

    def _result_note(self, call: ToolCall, *, repeated: bool, again: frozenset[str]) -> str:
        """The note (rule ``result_notes``) for a successful non-terminal ``call``'s result: for
        an answer shown mid-task, that the task goes on (else it is read as done); for a repeat
        of a call that succeeded, that it did; for a tool that also ran in the last batch, what
        comes next."""
        if not self.options.result_notes:
            return ""
        if self._told_user(call):
            next_step = self.next_step(avoid=call.tool)
            return self._told(shown_note(sorted(self.terminal_tools), next_step))
        if repeated:
            return self._told(repeat_note(call.tool, self.next_step(avoid=call.tool)))
        if call.tool in again:
            pending = self._tracker.pending(self.required_steps)
            return self._told(
                again_note(call.tool, self.next_step(avoid=call.tool), pending=pending)
            )
        return ""

    def _again(self, results: Sequence[ToolResult]) -> frozenset[str]:
        """Tools of this batch that also succeeded in the last one; and the count of batches in
        a row that did not advance a required step (see :data:`STEP_PATIENCE`)."""
        ok = frozenset(r.call.tool for r in results if r.ok)
        last, self._last_ok = self._last_ok, ok
        pending = self._tracker.pending(self.required_steps)
        advanced = len(pending) < self._pending_before
        self._pending_before = len(pending)
        self._idle = 0 if advanced or not pending else self._idle + 1
        return ok & last

    def _count_failures(self, tools: Iterable[str]) -> None:
        """One more reply in which each of ``tools`` failed (counted once per reply)."""
        for tool in set(tools):
            self._failing[tool] = self._failing.get(tool, 0) + 1

    def _told_user(self, call: ToolCall) -> bool:
        """Whether ``call`` is a synthetic ``respond`` in a workflow it does not end: a message
        shown to the user mid-task, not a result to learn from."""
        return self.is_synthetic_respond(call) and call.tool not in self.terminal_tools

    def _skipped_step(self, call: ToolCall) -> str:
        """For a failed call made while an earlier required step is still pending: point at
        that step (small models skip a lookup and guess its result, then keep guessing)."""
        if not self.options.steps:
            return ""
        pending = self._tracker.pending(self.required_steps)
        order = list(self.required_steps)
        if call.tool in order:
            earlier = [s for s in pending if order.index(s) < order.index(call.tool)]
        else:
            earlier = [s for s in pending if s != call.tool]
        if not earlier:
            return ""
        spec = {t.name: t for t in self.tools}[earlier[0]]
        return self._told(
            f"\n[Note] `{earlier[0]}` has not been called yet; it gives what `{call.tool}` "
            f"needs. {next_step_text(spec, finish=False)}"
        )

    def _told(self, text: str) -> str:
        """``text``, remembered as said to the model (a later argument must not copy it)."""
        self._echoes.add(text)
        return text

    def _ignored_note(self, call: ToolCall, ignored: Sequence[str]) -> str:
        if not ignored:
            return ""
        return self._told(ignored_args_note(self._specs[call.tool], ignored))

    def _listed_call(self, call: ToolCall, error: BaseException) -> str | None:
        """The refused call with the value ``error`` lists, if one matches (``error_values``)."""
        spec = self._specs.get(call.tool)
        if spec is None:
            return None
        args = error_value_args(
            spec, call.args, str(error), request=self._request, tools=self._specs
        )
        if args is None:
            return None
        log.info("guardrails.error_value", tool=call.tool)
        return example_call(spec, args)


class _Reply(msgspec.Struct, frozen=True, kw_only=True):
    """What a judge reads of a parsed reply besides its runnable calls: the reply as sent, its
    prose, and whether the constraint offered text."""

    raw: str
    text: str
    text_offered: bool


class _Redraw(msgspec.Struct, frozen=True, kw_only=True):
    """A judge's verdict that the reply is drawn again with its tools left out, its
    corrections not shown (see ``ToolErrors.redraw``)."""

    nudges: tuple[Nudge, ...]


class _Dropped(msgspec.Struct, frozen=True, kw_only=True):
    """A judge's verdict that ``calls`` do not run while the rest of the reply does."""

    calls: tuple[ToolCall, ...]


class _Passed(msgspec.Struct, frozen=True, kw_only=True):
    """A reply no rule objected to: the calls that run and how many repeats were dropped."""

    runnable: tuple[ToolCall, ...]
    dropped: int


_Judge = Callable[
    [Sequence[ToolCall], _Reply], "list[Nudge] | StepBlocked | _Dropped | _Redraw | None"
]
"""A ``calls`` or ``answer`` rule: the corrections of the reply (empty: no objection), or the
loop guard's block."""

_ANSWER_RULES = frozenset(r.name for r in RULES if r.stage == "answer")

# The rules judged only when every call of a reply may run: with one refused by the steps,
# that refusal is the correction, and the rest runs.
_WHOLE_REPLY = frozenset(
    r.name
    for r in RULES
    if r.stage in ("calls", "answer") and r.name not in ("steps", "answered_calls", "loop_guard")
)


def _is_failure(error: BaseException) -> bool:
    """Whether a call's ``error`` is the tool failing: not a user's no, not an interruption
    (the failures the rule ``recovery`` feeds back; off, they end the run)."""
    return not isinstance(error, ToolDeclinedError | ToolInterruptedError)


def _counts_as_failure(error: BaseException, recovery: bool) -> bool:
    """Whether a call's ``error`` counts against the tool-error budget: a failure, and not
    "called wrong" while failures are fed back."""
    return _is_failure(error) and not (isinstance(error, ToolResolutionError) and recovery)


def _with_refusals(
    looping: StepBlocked, calls: list[ToolCall], refused: Sequence[Refusal]
) -> StepBlocked:
    """A loop block of the runnable calls, widened to the whole reply: refused calls keep the
    nudge that says why they may not run, every other call the loop's note."""
    if not refused:
        return looping
    errors = [*looping.errors, *(r.nudge for r in refused)]
    return StepBlocked(
        calls=calls,
        errors=errors,
        reason=looping.reason,
        held_back=held_back(calls, errors, kind=MessageType.STEP_NUDGE, tier=3),
        text=looping.text,
    )


def _shown(action: Action) -> list[str]:
    """The texts of ``action`` that the model will read as corrections."""
    match action:
        case RetryWithNudge():
            return [action.nudge.content]
        case ToolErrors(redraw=True):
            return []
        case ToolErrors() | StepBlocked():
            return [n.content for n in (*action.errors, *action.held_back)]
        case Execute():
            return [r.nudge.content for r in action.refused]
        case _:
            return []


def _calls_of(action: Action) -> list[ToolCall]:
    """The calls of the reply ``action`` judged, run or sent back."""
    match action:
        case ToolErrors() | StepBlocked():
            return list(action.calls)
        case Execute():
            return [*action.calls, *(r.call for r in action.refused)]
        case _:
            return []


def _kept(specs: list[ToolSpec], keep: Callable[[str], bool]) -> list[ToolSpec]:
    """The specs ``keep`` accepts by name, or all of them when it accepts none."""
    kept = [spec for spec in specs if keep(spec.name)]
    return kept or specs


def _last_raw(result: ValidationResult) -> str:
    """The reply as sent: its text, or its native calls as JSON when it had no text."""
    if result.raw:
        return result.raw
    calls = [{"name": c.tool, "arguments": c.args} for c in result.calls]
    return msgspec.json.encode(calls).decode()


_SUMMARY_CHARS = 600


def _summary(errors: Sequence[Nudge]) -> str:
    """The corrections of a rejected reply on one line, for the error a run ends with: each
    whole (what was wrong, expected against got, the call to send), not just its first line."""
    parts = []
    for error in errors:
        text = " ".join(error.content.split())
        parts.append(text if len(text) <= _SUMMARY_CHARS else text[:_SUMMARY_CHARS] + "...")
    return "; ".join(parts)


def _check_names(
    tools: Sequence[ToolSpec],
    required_steps: Sequence[str],
    terminal: frozenset[str],
    prerequisites: Mapping[str, Sequence[Prerequisite | str]],
) -> None:
    names = {t.name for t in tools}

    def known(name: str, role: str) -> None:
        if name not in names:
            raise WorkflowDefinitionError(
                f"Guardrails: {role} {name!r} is not one of the tools {sorted(names)}"
            )

    for step in required_steps:
        known(step, "required step")
    for tool in terminal:
        known(tool, "terminal tool")
    for tool, prereqs in prerequisites.items():
        known(tool, "tool with prerequisites")
        for p in prereqs:
            known(p if isinstance(p, str) else p.tool, f"prerequisite of {tool!r}")
