"""Tracer: one actor's side of a trace -- builds each event from what the runtime has in hand.

The runtime's hooks are one line each (``if tracer is not None: tracer.reply(...)``); what an
event holds, how turns and iterations are numbered and how a verdict is written down is here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pydantic
import trio

from forge_rt.core import InferenceRequest, LLMResponse, OutputConstraint, Workflow
from forge_rt.errors import ForgeError, ToolInterruptedError, ToolResolutionError
from forge_rt.guardrails import Action, GuardrailOptions, RecordOutcome, ToolResult
from forge_rt.trace._decision import decision_of, messages_hash, record_decision
from forge_rt.trace._events import (
    SCHEMA_VERSION,
    PrerequisiteRecord,
    Recorded,
    ReplyReceived,
    RequestSent,
    SlotEvent,
    SlotEventKind,
    ToolRan,
    ToolRecord,
    TraceHeader,
    TurnEnded,
    TurnStarted,
    VerdictMade,
)
from forge_rt.trace._sinks import TraceSink

__all__ = ["Tracer", "TurnCosts", "constraint_kind"]


class TurnCosts(Protocol):
    """What a turn cost: the fields of the runtime's ``RunStats`` a turn's end records."""

    iterations: int
    inferences: int
    tool_calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_s: float


class Tracer:
    """Emits ``actor``'s events into ``sink``, numbering its turns and each turn's iterations
    (inference requests, retries included) from 1."""

    def __init__(self, sink: TraceSink, actor: str) -> None:
        self.sink = sink
        self.actor = actor
        self.turn = 0
        self.iteration = 0

    def header(
        self,
        workflow: Workflow,
        options: GuardrailOptions,
        *,
        completed_steps: Sequence[str] = (),
        constraint: OutputConstraint | None = None,
        constraint_reason: str | None = None,
        max_iterations: int | None = None,
    ) -> None:
        """What replay needs to rebuild this actor's guardrails (see :class:`TraceHeader`)."""
        self.sink.emit(
            TraceHeader(
                schema_version=SCHEMA_VERSION,
                actor=self.actor,
                t=trio.current_time(),
                workflow=workflow.name,
                tools=[_tool_record(t.spec) for t in workflow.tools.values()],
                required_steps=tuple(workflow.required_steps),
                terminal_tools=tuple(sorted(workflow.terminal_tools)),
                prerequisites={
                    name: [
                        PrerequisiteRecord(
                            tool=p.tool, match_arg=p.match_arg, prerequisite_arg=p.prerequisite_arg
                        )
                        for p in tool.prerequisites
                    ]
                    for name, tool in workflow.tools.items()
                    if tool.prerequisites
                },
                respond_tool=workflow.respond_tool,
                writes=tuple(sorted(n for n, t in workflow.tools.items() if not t.idempotent)),
                options=options,
                completed_steps=tuple(completed_steps),
                constraint=constraint_kind(constraint),
                constraint_reason=constraint_reason,
                max_iterations=max_iterations,
            )
        )

    def turn_started(self, user_text: str | None) -> None:
        self.turn += 1
        self.iteration = 0
        self.sink.emit(
            TurnStarted(
                actor=self.actor, t=trio.current_time(), turn=self.turn, user_text=user_text
            )
        )

    def request(self, request: InferenceRequest) -> None:
        self.iteration += 1
        self.sink.emit(
            RequestSent(
                actor=self.actor,
                t=trio.current_time(),
                turn=self.turn,
                iteration=self.iteration,
                messages=len(request.messages),
                messages_hash=messages_hash(request.messages),
                tools=tuple(t.name for t in request.tools),
                constraint=constraint_kind(request.constraint),
                max_tokens=request.sampling.max_tokens,
                priority=request.priority,
            )
        )

    def reply(
        self,
        response: LLMResponse,
        *,
        constrained: bool,
        text_offered: bool = False,
        last_chance: bool = False,
    ) -> None:
        self.sink.emit(
            ReplyReceived(
                actor=self.actor,
                t=trio.current_time(),
                turn=self.turn,
                iteration=self.iteration,
                response=response,
                constrained=constrained,
                text_offered=text_offered,
                last_chance=last_chance,
            )
        )

    def verdict(self, action: Action) -> None:
        self.sink.emit(
            VerdictMade(
                actor=self.actor,
                t=trio.current_time(),
                turn=self.turn,
                iteration=self.iteration,
                decision=decision_of(action),
            )
        )

    def tool(self, result: ToolResult, *, duration_s: float, restored: bool = False) -> None:
        """A call's result; ``restored``: it ran before a restart and came back from the store."""
        error = result.error
        self.sink.emit(
            ToolRan(
                actor=self.actor,
                t=trio.current_time(),
                turn=self.turn,
                call=result.call,
                output=result.output,
                error_type=type(error).__name__ if error is not None else None,
                error_kind=_error_kind(error),
                error=str(error) if error is not None else None,
                duration_s=duration_s,
                restored=restored,
            )
        )

    def recorded(self, results: Sequence[ToolResult], outcome: RecordOutcome) -> None:
        self.sink.emit(
            Recorded(
                actor=self.actor,
                t=trio.current_time(),
                turn=self.turn,
                calls=[r.call.call_id for r in results],
                decision=record_decision(outcome),
            )
        )

    def slot(self, kind: SlotEventKind, **fields: Any) -> None:
        self.sink.emit(SlotEvent(actor=self.actor, t=trio.current_time(), kind=kind, **fields))

    def slot_finished(self, job: int, response: LLMResponse, **fields: Any) -> None:
        usage, timings = response.usage, response.timings
        self.slot(
            "finished",
            job=job,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
            total_s=timings.total_s,
            first_token_s=timings.first_token_s,
            **fields,
        )

    def turn_ended(self, error: ForgeError | None, costs: TurnCosts) -> None:
        """The turn ended (``error``: how it failed), with what it cost (its ``RunStats``)."""
        self.sink.emit(
            TurnEnded(
                actor=self.actor,
                t=trio.current_time(),
                turn=self.turn,
                ok=error is None,
                error_type=type(error).__name__ if error is not None else None,
                error=str(error)[:500] if error is not None else None,
                iterations=costs.iterations,
                inferences=costs.inferences,
                tool_calls=costs.tool_calls,
                prompt_tokens=costs.prompt_tokens,
                completion_tokens=costs.completion_tokens,
                wall_s=costs.wall_s,
            )
        )


def constraint_kind(constraint: OutputConstraint | None) -> str | None:
    """``json_schema`` or ``grammar`` (the constraint's tag), or ``None``."""
    if constraint is None:
        return None
    return str(type(constraint).__struct_config__.tag)


def _tool_record(spec: Any) -> ToolRecord:
    parameters = spec.parameters
    model = None
    if isinstance(parameters, type) and issubclass(parameters, pydantic.BaseModel):
        model = f"{parameters.__module__}:{parameters.__qualname__}"
    return ToolRecord(
        name=spec.name, description=spec.description, parameters=spec.json_schema(), model=model
    )


def _error_kind(error: BaseException | None) -> Any:
    if error is None:
        return None
    if isinstance(error, ToolInterruptedError):
        return "interrupted"
    if isinstance(error, ToolResolutionError):
        return "resolution"
    return "error"
