"""Replay: today's guardrails over a recorded run's replies, with no model and no tools.

For each actor of a trace, :func:`replay` rebuilds its :class:`~forge_rt.guardrails.Guardrails`
from the header (the tool specs need no callables), then walks the events in order as the
runtime did: a new user turn resets the per-turn budgets (``new_turn``), each recorded reply
goes to ``check`` with the ``constrained`` flag it had, each recorded batch of tool results to
``record``. Each decision is compared with the recorded one; every difference is reported
with its actor, turn and iteration.

After a difference the run is followed along the recorded path (the recorded results are fed
back, as if the model had gone on as it did), so one changed decision does not hide later
ones; a later difference in the same turn may be a consequence of the first.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

import msgspec
import pydantic

from forge_rt.core import Prerequisite, StepTracker, ToolCall, ToolSpec
from forge_rt.errors import ConfigurationError, ToolInterruptedError, ToolResolutionError
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolResult
from forge_rt.trace._decision import decision_of, record_decision
from forge_rt.trace._events import (
    Decision,
    RecordDecision,
    Recorded,
    ReplyReceived,
    ToolRan,
    ToolRecord,
    TraceEvent,
    TraceHeader,
    TurnStarted,
    VerdictMade,
)
from forge_rt.trace._reader import read_trace

__all__ = ["Difference", "ReplayReport", "replay", "replay_events"]


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """One decision today's guardrails make differently: ``what`` is ``verdict`` (a reply's
    check) or ``record`` (a batch's results); ``recorded`` and ``replayed`` the two decisions."""

    actor: str
    turn: int
    iteration: int
    what: str
    recorded: Decision | RecordDecision
    replayed: Decision | RecordDecision

    def fields(self) -> list[str]:
        """The fields in which the two decisions differ."""
        a, b = msgspec.structs.asdict(self.recorded), msgspec.structs.asdict(self.replayed)
        return [k for k in a if a[k] != b[k]]


class ReplayReport(msgspec.Struct, kw_only=True):
    """What a replay found: how much it checked, and every difference.

    ``schema_only`` names tools whose pydantic parameter model could not be imported here, so
    their calls were validated against the recorded JSON schema instead (coercion and defaults
    may differ from the model's).
    """

    actors: list[str] = msgspec.field(default_factory=list)
    turns: int = 0
    replies: int = 0
    records: int = 0
    differences: list[Difference] = msgspec.field(default_factory=list)
    schema_only: list[str] = msgspec.field(default_factory=list)

    @property
    def same(self) -> bool:
        """Whether today's guardrails decided every recorded reply and batch as recorded."""
        return not self.differences


def replay(
    path: str | os.PathLike[str],
    *,
    options: GuardrailOptions | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ReplayReport:
    """Replay the trace at ``path`` (a file or a folder) through today's guardrails.

    ``options`` replaces each actor's recorded :class:`GuardrailOptions`; ``overrides`` changes
    fields of them (``{"max_retries": 1}``) -- a deliberate guardrail change to check against
    recorded model output without editing code.
    """
    return replay_events(read_trace(path), options=options, overrides=overrides)


def replay_events(
    events: list[TraceEvent],
    *,
    options: GuardrailOptions | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> ReplayReport:
    """:func:`replay` over events already read."""
    report = ReplayReport()
    actors: dict[str, _Actor] = {}
    for event in events:
        if isinstance(event, TraceHeader):
            chosen = options if options is not None else event.options
            if overrides:
                chosen = _overridden(chosen, overrides)
            actors[event.actor] = _Actor(event, chosen, report)
            report.actors.append(event.actor)
        else:
            actors[event.actor].feed(event)
    return report


def _overridden(options: GuardrailOptions, overrides: Mapping[str, Any]) -> GuardrailOptions:
    known = set(GuardrailOptions.__struct_fields__)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigurationError(
            f"replay: {unknown} are not GuardrailOptions fields; use one of {sorted(known)}"
        )
    return msgspec.structs.replace(options, **overrides)


class _Actor:
    """One actor's guardrails, fed the recorded events in order."""

    def __init__(self, header: TraceHeader, options: GuardrailOptions, report: ReplayReport):
        self._report = report
        self._actor = header.actor
        specs = [_spec(t, report) for t in header.tools]
        self._guardrails = Guardrails(
            specs,
            required_steps=header.required_steps,
            terminal_tools=header.terminal_tools,
            prerequisites={
                name: [
                    Prerequisite(
                        tool=p.tool, match_arg=p.match_arg, prerequisite_arg=p.prerequisite_arg
                    )
                    for p in prereqs
                ]
                for name, prereqs in header.prerequisites.items()
            },
            respond_tool=header.respond_tool,
            tracker=StepTracker(header.completed_steps),
            options=options,
            writes=header.writes,
        )
        self._turn = 0
        self._iteration = 0
        self._replayed: Decision | None = None
        # Recorded call id -> the replayed call it stands for, while the decisions agree.
        self._calls: dict[str, ToolCall] = {}
        self._results: list[ToolRan] = []
        self._replayed_calls: list[ToolCall] | None = None

    def feed(self, event: TraceEvent) -> None:
        match event:
            case TurnStarted():
                self._turn = event.turn
                self._report.turns += 1
                if event.user_text is not None:
                    self._guardrails.new_turn(event.user_text)
            case ReplyReceived():
                self._iteration = event.iteration
                action = self._guardrails.check(
                    event.response,
                    constrained=event.constrained,
                    text_offered=event.text_offered,
                    last_chance=event.last_chance,
                )
                self._replayed = decision_of(action)
                self._report.replies += 1
                self._calls = {}
                self._replayed_calls = action.calls if isinstance(action, Execute) else None
            case VerdictMade():
                replayed, self._replayed = self._replayed, None
                assert replayed is not None, "a verdict follows its reply"
                recorded = event.decision
                if recorded.rule is None:  # written before rules were named
                    replayed = msgspec.structs.replace(replayed, rule=None)
                if replayed.comparable() != recorded.comparable():
                    self._differ("verdict", recorded, replayed)
                elif self._replayed_calls is not None:
                    self._calls = {
                        r.call_id: c
                        for r, c in zip(recorded.calls, self._replayed_calls, strict=True)
                        if r.call_id is not None
                    }
            case ToolRan():
                self._results.append(event)
            case Recorded():
                results, self._results = self._results, []
                outcome = self._guardrails.record([self._result(r) for r in results])
                self._report.records += 1
                replayed_record = record_decision(outcome)
                if replayed_record != event.decision:
                    self._differ("record", event.decision, replayed_record)
            case _:
                pass  # requests, slot events and turn ends are what happened, not decisions

    def _result(self, ran: ToolRan) -> ToolResult:
        """The recorded result, for the call as the replayed guardrails accepted it."""
        call = self._calls.get(ran.call.call_id, ran.call)
        if ran.error_kind is None:
            return ToolResult(call=call, output=ran.output)
        message = ran.error or ""
        error: BaseException
        if ran.error_kind == "interrupted":
            error = ToolInterruptedError(message, tool=call.tool, call_id=call.call_id)
        elif ran.error_kind == "resolution":
            error = _named(ran.error_type, ToolResolutionError)(message)
        else:
            error = _named(ran.error_type, Exception)(message)
        return ToolResult(call=call, error=error)

    def _differ(
        self, what: str, recorded: Decision | RecordDecision, replayed: Decision | RecordDecision
    ) -> None:
        self._report.differences.append(
            Difference(
                actor=self._actor,
                turn=self._turn,
                iteration=self._iteration,
                what=what,
                recorded=recorded,
                replayed=replayed,
            )
        )


def _named(name: str | None, base: type[Exception]) -> type[Exception]:
    """An exception class called ``name`` (the recorded error's type) deriving from ``base``:
    the guardrails write the type's name into the text the model reads, and decide by base."""
    if name is None or name == base.__name__:
        return base
    return type(name, (base,), {})


def _spec(record: ToolRecord, report: ReplayReport) -> ToolSpec:
    parameters: type[pydantic.BaseModel] | dict[str, Any] = record.parameters
    if record.model is not None:
        model = _import_model(record.model)
        if model is None:
            report.schema_only.append(record.name)
        else:
            parameters = model
    return ToolSpec(name=record.name, description=record.description, parameters=parameters)


def _import_model(ref: str) -> type[pydantic.BaseModel] | None:
    """The pydantic model ``module:QualName`` names, or ``None`` where it cannot be imported
    here (a test's local class, a module not installed): replay then says so."""
    module_name, _, qualname = ref.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError:
        return None
    for part in qualname.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    if isinstance(value, type) and issubclass(value, pydantic.BaseModel):
        return value
    return None
