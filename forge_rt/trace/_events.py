"""The trace's events: one tagged msgspec union, written one JSON object per line.

A trace is a sequence of events, each tagged by ``"e"`` and stamped with the ``actor`` (the
workflow actor or session name) it belongs to and ``t``, seconds on trio's clock. Several actors
may share one file; each actor's events start with its :class:`TraceHeader`, which records what
:func:`~forge_rt.trace.replay` needs to rebuild that actor's guardrails with no model and no tool
callables: the tool specs as JSON schemas, the required steps, terminal tools, prerequisites,
the :class:`~forge_rt.guardrails.GuardrailOptions` and the steps already done.

Per turn, in order: :class:`TurnStarted`; per attempt :class:`RequestSent`,
:class:`SlotEvent` (queued, started, preempted, continued, finished...),
:class:`ReplyReceived` (the whole reply: raw text, native calls, usage, timings),
:class:`VerdictMade` (the guardrails' :class:`Decision`); per tool :class:`ToolRan`; per batch
:class:`Recorded` (what recording the results decided); and :class:`TurnEnded`.

:data:`SCHEMA_VERSION` changes whenever an event changes incompatibly; a reader refuses a trace
of another version instead of misreading it (docs/traces.md lists the versions).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from forge_rt.core import LLMResponse, ToolCall
from forge_rt.guardrails import GuardrailOptions

__all__ = [
    "SCHEMA_VERSION",
    "CallRecord",
    "Decision",
    "PrerequisiteRecord",
    "RecordDecision",
    "Recorded",
    "RefusalRecord",
    "ReplyReceived",
    "RequestSent",
    "SlotEvent",
    "SlotEventKind",
    "ToolRan",
    "ToolRecord",
    "TraceEvent",
    "TraceHeader",
    "TurnEnded",
    "TurnStarted",
]

SCHEMA_VERSION = 2
"""The version of the event schema this forge_rt writes. Version 2 names each guardrail rule's
switch on its own (``GuardrailOptions``) and each verdict's rule; a version 1 trace is read
with its bundled switches translated (see ``forge_rt.trace._reader``)."""


class _Event(msgspec.Struct, kw_only=True, tag_field="e", omit_defaults=True):
    actor: str
    t: float


class ToolRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool as the model was told about it: enough to validate its calls again.

    ``model`` is ``"module:QualName"`` when the spec's parameters were a pydantic model; replay
    imports it where it can (its coercion and defaults can differ from the schema's).
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)
    model: str | None = None


class PrerequisiteRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One :class:`~forge_rt.core.Prerequisite`, as data."""

    tool: str
    match_arg: str | None = None
    prerequisite_arg: str | None = None


class TraceHeader(_Event, kw_only=True, tag="header"):
    """The first event of an actor: the schema version and what replay rebuilds from."""

    schema_version: int  # always written (a version 1 header left it out: that is version 1)
    workflow: str
    tools: list[ToolRecord]
    required_steps: tuple[str, ...] = ()
    terminal_tools: tuple[str, ...] = ()
    prerequisites: dict[str, list[PrerequisiteRecord]] = msgspec.field(default_factory=dict)
    respond_tool: bool = False
    writes: tuple[str, ...] = ()  # the tools that are not idempotent
    options: GuardrailOptions = msgspec.field(default_factory=GuardrailOptions)
    completed_steps: tuple[str, ...] = ()
    constraint: str | None = None  # the kind of the workflow's constraint, if any
    constraint_reason: str | None = None
    max_iterations: int | None = None


class TurnStarted(_Event, kw_only=True, tag="turn"):
    """A turn begins; ``user_text`` is ``None`` for a resumed turn (no new user message)."""

    turn: int
    user_text: str | None = None


class RequestSent(_Event, kw_only=True, tag="request"):
    """One inference request: its history (count and hash), tools offered, constraint kind."""

    turn: int
    iteration: int
    messages: int
    messages_hash: str
    tools: tuple[str, ...] = ()
    constraint: str | None = None
    max_tokens: int | None = None
    priority: int | None = None


class ReplyReceived(_Event, kw_only=True, tag="reply"):
    """The model's whole reply, as the guardrails got it; ``constrained``, ``text_offered`` and
    ``last_chance`` as ``check`` got them."""

    turn: int
    iteration: int
    response: LLMResponse
    constrained: bool = False
    text_offered: bool = False
    last_chance: bool = False


class CallRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A call a decision accepted: tool and arguments (``call_id`` is kept, not compared)."""

    tool: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    call_id: str | None = None


class RefusalRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A call of an accepted reply that was refused, and why."""

    tool: str
    reason: str


class Decision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the guardrails decided about one reply, in comparable form.

    ``kind``: ``execute``, ``text_answer``, ``retry_nudge``, ``tool_errors``, ``step_blocked``
    or ``fatal``. ``reason`` is the :class:`~forge_rt.guardrails.RetryReason` of a rejection,
    ``error`` the type of a fatal error; ``nudges`` the corrections the model is shown;
    ``rule`` the guardrail rule that decided (see :data:`~forge_rt.guardrails.RULES`; ``None``
    in a trace written before rules were named, and then not compared by replay).
    """

    kind: str
    reason: str | None = None
    rule: str | None = None
    calls: list[CallRecord] = msgspec.field(default_factory=list)
    refused: list[RefusalRecord] = msgspec.field(default_factory=list)
    dialects: tuple[str, ...] = ()
    collapsed: int = 0
    nudges: list[str] = msgspec.field(default_factory=list)
    error: str | None = None

    def comparable(self) -> Decision:
        """This decision without the call ids, which a rescued call gets afresh each time."""
        calls = [CallRecord(tool=c.tool, args=c.args) for c in self.calls]
        return msgspec.structs.replace(self, calls=calls)


class VerdictMade(_Event, kw_only=True, tag="verdict"):
    """The guardrails' decision about the reply just before it."""

    turn: int
    iteration: int
    decision: Decision


class ToolRan(_Event, kw_only=True, tag="tool"):
    """One call's result: ``output``, or the error it raised (type name, kind and message).

    ``error_kind``: ``resolution`` (a ToolResolutionError: called wrong), ``interrupted`` (cut
    off by a cancellation, not run again) or ``error``. ``restored``: the call finished in an
    earlier life of the actor (before a restart) and its result came back from the session
    store; this life records it, so its trace says what it recorded.
    """

    turn: int
    call: ToolCall
    output: str | None = None
    error_type: str | None = None
    error_kind: Literal["error", "resolution", "interrupted"] | None = None
    error: str | None = None
    duration_s: float = 0.0
    restored: bool = False


class RecordDecision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What recording a batch's results decided: done (by which terminal tool), or a fatal
    error's type; ``messages_hash`` covers the result messages the model reads next."""

    done: bool = False
    terminal_tool: str | None = None
    fatal: str | None = None
    failed: int = 0
    messages_hash: str = ""


class Recorded(_Event, kw_only=True, tag="record"):
    """A batch's results were recorded (``calls`` are their call ids, in order)."""

    turn: int
    calls: list[str]
    decision: RecordDecision


SlotEventKind = Literal[
    "queued", "started", "continued", "preempted", "finished", "failed", "abandoned", "evicted"
]


class SlotEvent(_Event, kw_only=True, tag="slot"):
    """One inference call on the slot: queued, started (or continued after a preemption),
    preempted, and how it ended, with its timings and token counts where known."""

    kind: SlotEventKind
    job: int
    priority: int = 0
    attempt: int = 0
    line: int | None = None
    tokens: int | None = None  # streamed by the attempt that was cut (preempted)
    wait_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    total_s: float | None = None
    first_token_s: float | None = None
    reason: str | None = None


class TurnEnded(_Event, kw_only=True, tag="turn_end"):
    """How the turn ended, and what it cost."""

    turn: int
    ok: bool
    error_type: str | None = None
    error: str | None = None
    iterations: int = 0
    inferences: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0


TraceEvent = (
    TraceHeader
    | TurnStarted
    | RequestSent
    | ReplyReceived
    | VerdictMade
    | ToolRan
    | Recorded
    | SlotEvent
    | TurnEnded
)
"""Any event of a trace."""
