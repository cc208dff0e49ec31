"""What to do with one checked reply: the closed set of actions a loop must handle.

Every action renders the exact messages the loop appends to its history
(:meth:`messages`), so the runtime, the proxy and foreign loops never build correction messages
themselves. Rejected replies and their corrections are ``transient``: a long-running session
keeps them out of its persisted history, and compaction drops them first.

Two rules decide what runs when one call of a reply cannot:

- A call that may not run *yet* -- a terminal call while required steps are pending, a call whose
  prerequisite has not succeeded -- is refused on its own: the other calls of the reply run
  (:class:`Execute` with ``refused``), since running them is exactly what the refused call is
  waiting for. Only a reply with nothing left to run is :class:`StepBlocked`.
- A call that is *invalid* (an unknown tool, arguments the schema rejects) holds its valid
  siblings back (:class:`ToolErrors`, each sibling with a ``[NotExecuted]`` note). Its fix is a
  re-sent batch, and small models re-send the whole batch: siblings run now would run twice,
  which for a tool with side effects (a booking, a message) is a second booking.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from forge_rt.core import Message, MessageType, Role, ToolCall
from forge_rt.errors import ForgeError
from forge_rt.guardrails._dialects import Dialect
from forge_rt.guardrails._nudges import Nudge

__all__ = [
    "Action",
    "BlockReason",
    "Execute",
    "Fatal",
    "Refusal",
    "Rejection",
    "RetryReason",
    "RetryWithNudge",
    "StepBlocked",
    "TextAnswer",
    "ToolErrors",
    "retry_reason",
]

BlockReason = Literal["premature_terminal", "prerequisite", "loop"]


def _strip_reasoning(calls: list[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(msgspec.structs.replace(c, reasoning=None) if c.reasoning else c for c in calls)


def _rejected_batch(calls: list[ToolCall], nudges: list[Nudge], content: str) -> list[Message]:
    by_id = {n.call_id: n for n in nudges}
    missing = [c.call_id for c in calls if c.call_id not in by_id]
    if missing:
        raise ValueError(f"rejected batch has no correction for call(s) {missing}")
    out = [Message.assistant_calls(calls, content=content, transient=True)]
    out.extend(by_id[c.call_id].message() for c in calls)
    return out


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """One call of an accepted reply that may not run yet, and the tool-channel nudge that
    answers it (``nudge.call_id`` is ``call.call_id``); ``reason`` says why: a terminal call
    too early or a prerequisite missing (the rule ``steps``)."""

    call: ToolCall
    nudge: Nudge
    reason: Literal["premature_terminal", "prerequisite"]

    @property
    def rule(self) -> str:
        """The rule of the pipeline that refused the call."""
        return "steps"

    def __post_init__(self) -> None:
        if self.nudge.call_id != self.call.call_id:
            raise ValueError(
                f"refusal of call {self.call.call_id} carries the nudge of {self.nudge.call_id}"
            )


class Execute(msgspec.Struct, frozen=True, kw_only=True):
    """Run ``calls`` (arguments already validated and coerced), then report with ``record()``.

    ``refused`` holds the calls of the same reply that may not run yet, each answered by its
    nudge (they are rendered by :meth:`messages`; do not run them). ``ignored`` maps a call id
    to the arguments dropped from it because its schema does not have them (``record()`` tells
    the model). ``collapsed`` counts identical calls dropped from the reply;
    ``rescued_dialects`` names the text formats the calls were rescued from (empty for native
    calls).
    """

    calls: list[ToolCall]
    refused: list[Refusal] = msgspec.field(default_factory=list)
    ignored: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    collapsed: int = 0
    rescued_dialects: tuple[Dialect, ...] = ()
    reasoning: str | None = None
    text: str = ""

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("Execute needs at least one call to run; refuse a whole reply instead")

    def messages(self, raw_text: str | None = None) -> list[Message]:
        """The refused calls with their nudges, the reasoning (if any), the assistant turn.

        Refused calls come first, as a transient assistant turn of their own answered by their
        transient nudges: every tool call of the history gets exactly one tool message, and once
        transients are dropped the kept turn and its results still pair up. The calls that run
        are rendered structurally; their content is ``raw_text`` when given, else the prose
        that came with native calls (empty for rescued calls, so the history shows the model
        the canonical call shape rather than its malformed text).
        """
        out: list[Message] = []
        if self.refused:
            refused = [r.call for r in self.refused]
            out.append(Message.assistant_calls(_strip_reasoning(refused), transient=True))
            out.extend(r.nudge.message() for r in self.refused)
        if self.reasoning:
            out.append(
                Message(role=Role.ASSISTANT, content=self.reasoning, type=MessageType.REASONING)
            )
        content = self.text if raw_text is None else raw_text
        out.append(Message.assistant_calls(_strip_reasoning(self.calls), content=content))
        return out


class RetryWithNudge(msgspec.Struct, frozen=True, kw_only=True):
    """The reply held no usable call: show it, then ask again on the user channel.

    ``rule`` on every rejecting action (and a text answer) names the rule of
    :data:`~forge_rt.guardrails.RULES` that decided it (``schema`` for a tool's own contract).
    """

    nudge: Nudge
    raw: str = ""
    rule: str = ""

    def messages(self, raw_text: str | None = None) -> list[Message]:
        """The failed reply as a transient assistant turn, then the transient nudge."""
        text = self.raw if raw_text is None else raw_text
        return [Message.assistant_text(text, transient=True), self.nudge.message()]


class ToolErrors(msgspec.Struct, frozen=True, kw_only=True):
    """Some calls name unknown tools or carry bad arguments; the whole batch is retried.

    ``errors`` holds one correction per failing call, ``held_back`` one note per valid call of
    the same reply that was not run; both are paired with their call by ``call_id``.
    ``redraw``: the reply is drawn again on the same history, the refused calls and their
    corrections kept out of it (:meth:`messages` is empty); what changes is the constraint,
    which leaves the refused tools out. The corrections still say why, in the trace.
    """

    calls: list[ToolCall]
    errors: list[Nudge]
    held_back: list[Nudge] = msgspec.field(default_factory=list)
    collapsed: int = 0
    text: str = ""
    rule: str = ""
    redraw: bool = False

    def messages(self, raw_text: str | None = None) -> list[Message]:
        """The transient assistant tool-call turn and one transient tool message per call;
        nothing for a redraw."""
        if self.redraw:
            return []
        content = self.text if raw_text is None else raw_text
        return _rejected_batch(self.calls, [*self.errors, *self.held_back], content)


class StepBlocked(msgspec.Struct, frozen=True, kw_only=True):
    """Valid calls that may not run now (``reason`` says which rule); the whole batch is blocked."""

    calls: list[ToolCall]
    errors: list[Nudge]
    reason: BlockReason
    held_back: list[Nudge] = msgspec.field(default_factory=list)
    text: str = ""
    rule: str = ""

    def messages(self, raw_text: str | None = None) -> list[Message]:
        """The transient assistant tool-call turn and one transient tool message per call."""
        content = self.text if raw_text is None else raw_text
        return _rejected_batch(self.calls, [*self.errors, *self.held_back], content)


class TextAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """Text with no call is the answer: where the constraint offered text (the rule
    ``prose_answers``), or with the rule ``retry_nudges`` off."""

    text: str
    rule: str = ""

    def messages(self, raw_text: str | None = None) -> list[Message]:
        """The answer as a (kept) assistant turn."""
        return [Message.assistant_text(self.text if raw_text is None else raw_text)]


class Fatal(msgspec.Struct, frozen=True, kw_only=True):
    """A budget is exhausted; ``error`` says which, with full context. The run must end."""

    error: ForgeError

    def messages(self, raw_text: str | None = None) -> list[Message]:
        """Nothing: the run ends with ``error``."""
        return []


Action = Execute | RetryWithNudge | ToolErrors | StepBlocked | TextAnswer | Fatal

Rejection = RetryWithNudge | ToolErrors | StepBlocked
"""The actions that reject a reply: append its correction and ask the model again."""


class RetryReason(enum.StrEnum):
    """Why a reply was rejected: the one vocabulary retries are counted in, everywhere.

    The runtime's ``RunStats.retries``, the proxy's ``forge_proxy_retries_total`` metric and the
    eval's records all key their counts by these values.
    """

    NO_CALL = "no_call"  # RetryWithNudge: prose, an empty or truncated reply, an unparseable call
    INVALID_CALL = "invalid_call"  # ToolErrors: an unknown tool or arguments the schema rejects
    PREMATURE_TERMINAL = "premature_terminal"  # StepBlocked: finished before the required steps
    PREREQUISITE = "prerequisite"  # StepBlocked: a tool called before its prerequisite
    LOOP = "loop"  # StepBlocked: the same call again, with nothing new to learn from it


def retry_reason(action: Rejection) -> RetryReason:
    """The :class:`RetryReason` of a rejecting action."""
    if isinstance(action, RetryWithNudge):
        return RetryReason.NO_CALL
    if isinstance(action, ToolErrors):
        return RetryReason.INVALID_CALL
    return RetryReason(action.reason)
