"""Compaction strategies: deterministic cuts that bring a history under a token target.

No strategy calls a model: compaction runs before every inference, and a cut must be the same
every time for the same history (so the backend's prefix cache and a resumed session see the same
prompt). Every strategy keeps the system prompt(s), every user turn and every summary, never grows
the history, and never leaves an assistant tool call without a tool message answering each of its
call ids (strict chat templates reject that): a result that must go is replaced by a short
placeholder that names the tool.

An *iteration* is an assistant turn (consecutive assistant messages, e.g. reasoning then its tool
call, form one turn) plus everything that follows it up to the next assistant turn: tool results,
nudges, user turns. The last ``keep_recent`` iterations are the protected window and are returned
verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from forge_rt.context._estimate import TokenEstimator
from forge_rt.core import Message, MessageType, Role

__all__ = [
    "CompactResult",
    "CompactStrategy",
    "NoCompact",
    "SlidingWindowCompact",
    "TieredCompact",
    "protected_window_start",
    "unanswered_calls",
]

# Kept by every strategy: the instructions and everything the user said.
_ALWAYS_KEPT = frozenset({MessageType.SYSTEM_PROMPT, MessageType.USER_INPUT, MessageType.SUMMARY})
# Kept by TieredCompact in every phase: tool calls too (what the model did is its memory).
_NEVER_CUT = _ALWAYS_KEPT | {MessageType.TOOL_CALL}
# Corrections for a moment that has passed: first to go.
_NUDGES = frozenset(
    {
        MessageType.STEP_NUDGE,
        MessageType.PREREQUISITE_NUDGE,
        MessageType.RETRY_NUDGE,
        MessageType.CONTEXT_WARNING,
    }
)
# The model's own interpretation: kept through phase 2, dropped in phase 3.
_PROSE = frozenset({MessageType.REASONING, MessageType.TEXT_RESPONSE})

# A tool result is only truncated when it is longer than the limit by more than this, so a
# truncated result (limit + a marker shorter than this) is never truncated again.
_TRUNCATE_SLACK = 64


class CompactResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a strategy returned: the new history and what it cost.

    ``phase`` is 0 when nothing changed, else the escalation level applied (``TieredCompact``:
    1-3; ``SlidingWindowCompact``: 1). ``dropped`` counts messages removed or replaced by a
    placeholder; ``truncated`` counts messages shortened.
    """

    messages: list[Message]
    phase: int
    tokens_before: int
    tokens_after: int
    dropped: int = 0
    truncated: int = 0


@runtime_checkable
class CompactStrategy(Protocol):
    """Brings a history under ``target_tokens`` if it can; must be deterministic and never grow it."""

    def compact(
        self, messages: Sequence[Message], target_tokens: int, estimator: TokenEstimator
    ) -> CompactResult: ...


def protected_window_start(messages: Sequence[Message], keep_recent: int) -> int:
    """Index where the last ``keep_recent`` iterations begin (``len(messages)`` if none are kept).

    With fewer iterations than ``keep_recent``, every iteration is protected and the window starts
    at the first assistant turn.
    """
    if keep_recent <= 0:
        return len(messages)
    starts: list[int] = []
    previous_assistant = False
    for index, message in enumerate(messages):
        assistant = message.role is Role.ASSISTANT
        if assistant and not previous_assistant:
            starts.append(index)
        previous_assistant = assistant
    if not starts:
        return len(messages)
    return starts[max(0, len(starts) - keep_recent)]


def unanswered_calls(messages: Sequence[Message]) -> list[str]:
    """Call ids of assistant tool calls with no tool message answering them before the next
    assistant message, in order. A history a strict chat template accepts returns ``[]``."""
    missing: list[str] = []
    pending: dict[str, None] = {}
    for message in messages:
        if message.role is Role.ASSISTANT:
            missing.extend(pending)
            pending = dict.fromkeys(c.call_id for c in message.tool_calls or ())
        elif message.role is Role.TOOL and message.tool_call_id is not None:
            pending.pop(message.tool_call_id, None)
    missing.extend(pending)
    return missing


def _unchanged(messages: Sequence[Message], tokens: int) -> CompactResult:
    return CompactResult(
        messages=list(messages), phase=0, tokens_before=tokens, tokens_after=tokens
    )


class NoCompact(msgspec.Struct, frozen=True):
    """Never cuts anything: for short workflows, abundant memory, or a proxy that must not touch
    its caller's history."""

    def compact(
        self, messages: Sequence[Message], target_tokens: int, estimator: TokenEstimator
    ) -> CompactResult:
        """The history as it is (phase 0), with its estimate."""
        return _unchanged(messages, estimator.count_messages(messages))


class SlidingWindowCompact(msgspec.Struct, frozen=True):
    """Keeps system prompts, user turns, summaries and the last ``keep_recent`` iterations.

    When the history is over the target, every older iteration goes whole (its tool calls with
    their results, so nothing is orphaned). Simple and predictable: the kept prefix does not
    change between cuts, and one cut leaves a lot of headroom.
    """

    keep_recent: int = 4

    def __post_init__(self) -> None:
        if self.keep_recent < 0:
            raise ValueError(
                f"SlidingWindowCompact keep_recent must be >= 0, got {self.keep_recent}"
            )

    def compact(
        self, messages: Sequence[Message], target_tokens: int, estimator: TokenEstimator
    ) -> CompactResult:
        """Drop every iteration older than the window if the history is over ``target_tokens``."""
        counts = estimator.count_each(messages)
        before = sum(counts)
        if before <= target_tokens:
            return _unchanged(messages, before)
        boundary = protected_window_start(messages, self.keep_recent)
        kept: list[Message] = []
        after = before
        dropped = 0
        for index in range(boundary):
            message = messages[index]
            if message.type in _ALWAYS_KEPT:
                kept.append(message)
            else:
                after -= counts[index]
                dropped += 1
        kept.extend(messages[boundary:])
        return CompactResult(
            messages=kept,
            phase=1 if dropped else 0,
            tokens_before=before,
            tokens_after=after,
            dropped=dropped,
        )


class TieredCompact(msgspec.Struct, frozen=True):
    """Three escalating phases over the messages before the protected window (the default).

    1. drop nudges (step, prerequisite, retry, context warnings); truncate tool results to
       ``truncate_chars`` characters plus a marker saying how much was cut;
    2. as 1, but replace tool results with a placeholder naming the tool;
    3. as 2, and drop reasoning and plain-text replies: only tool calls, system prompts, user
       turns and summaries remain before the window.

    A phase runs only if the one before it did not reach the target; each is applied to the
    whole eligible range, which leaves headroom so the next cut (which changes the prompt prefix
    and so costs the backend's prefix cache) comes later. Phase 3 is returned even when it falls
    short: the protected window is never cut. A replacement that would cost more tokens than
    the original (a two-character result versus its placeholder) is not made.
    """

    keep_recent: int = 2
    truncate_chars: int = 200

    def __post_init__(self) -> None:
        if self.keep_recent < 0:
            raise ValueError(f"TieredCompact keep_recent must be >= 0, got {self.keep_recent}")
        if self.truncate_chars < 0:
            raise ValueError(
                f"TieredCompact truncate_chars must be >= 0, got {self.truncate_chars}"
            )

    def compact(
        self, messages: Sequence[Message], target_tokens: int, estimator: TokenEstimator
    ) -> CompactResult:
        """Apply phases 1, 2, 3 in turn until the history is at most ``target_tokens``."""
        counts = estimator.count_each(messages)
        before = sum(counts)
        if before <= target_tokens:
            return _unchanged(messages, before)
        planner = _TieredPlanner(
            messages,
            counts,
            protected_window_start(messages, self.keep_recent),
            estimator,
            self.truncate_chars,
        )
        plan = planner.plan(1)
        for phase in (2, 3):
            if plan.tokens_after <= target_tokens:
                break
            plan = planner.plan(phase)
        return planner.build(plan)


class _Rewrite(msgspec.Struct, frozen=True):
    """A message's new content (a truncation or a placeholder), priced before it is built."""

    content: str
    tokens: int
    units: float
    placeholder: bool


class _Plan(msgspec.Struct, frozen=True):
    """One phase's cuts: index -> rewrite, or None to drop; and the resulting token count."""

    phase: int
    changes: dict[int, _Rewrite | None]
    tokens_after: int
    removed: int
    truncated: int
    placeholders: int


class _TieredPlanner:
    """Prices each phase over one history without building it; builds only the phase chosen.

    Rewrites are priced once and shared between phases (placeholders by their text).
    """

    def __init__(
        self,
        messages: Sequence[Message],
        counts: list[int],
        boundary: int,
        estimator: TokenEstimator,
        truncate_chars: int,
    ) -> None:
        self.messages = messages
        self.counts = counts
        self.before = sum(counts)
        self.boundary = boundary
        self.estimator = estimator
        self.truncate_chars = truncate_chars
        self._truncations: dict[int, _Rewrite | None] = {}
        self._placeholders: dict[int, _Rewrite | None] = {}
        self._placeholder_costs: dict[str, tuple[int, float]] = {}
        self._call_names: dict[str, str] | None = None
        # What each phase may touch, sorted once: messages that go in every phase (nudges not on
        # the tool channel), tool-channel messages (results and nudges: they answer calls), the
        # results among them, and reasoning / text replies (phase 3).
        self._dropped_always: list[int] = []
        self._answers: list[int] = []
        self._results: list[int] = []
        self._prose: list[int] = []
        for index in range(boundary):
            message = messages[index]
            kind = message.type
            if kind in _NEVER_CUT or message.tool_calls is not None:
                continue
            if message.role is Role.TOOL:
                self._answers.append(index)
                if kind is MessageType.TOOL_RESULT:
                    self._results.append(index)
            elif kind in _NUDGES:
                self._dropped_always.append(index)
            elif kind in _PROSE:
                self._prose.append(index)

    def _call_name(self, call_id: str) -> str | None:
        if self._call_names is None:
            self._call_names = {
                call.call_id: call.tool
                for message in self.messages[: self.boundary]
                if message.tool_calls
                for call in message.tool_calls
            }
        return self._call_names.get(call_id)

    def _rewrite(self, index: int, content: str, *, placeholder: bool) -> _Rewrite | None:
        """``content`` for message ``index`` if that makes it cheaper, else None."""
        if placeholder:
            # Placeholders repeat (one text per tool) and all sit on the tool role: price once.
            cost = self._placeholder_costs.get(content)
            if cost is None:
                cost = self.estimator._rewrite_cost(self.messages[index], content)
                self._placeholder_costs[content] = cost
            tokens, units = cost
        else:
            tokens, units = self.estimator._rewrite_cost(self.messages[index], content)
        if tokens >= self.counts[index]:
            return None
        return _Rewrite(content, tokens, units, placeholder)

    def _truncation(self, index: int) -> _Rewrite | None:
        if index not in self._truncations:
            content = self.messages[index].content
            limit = self.truncate_chars
            rewrite = None
            if len(content) > limit + _TRUNCATE_SLACK:
                cut = len(content) - limit
                text = f"{content[:limit]}… [{cut} more characters dropped to save context]"
                rewrite = self._rewrite(index, text, placeholder=False)
            self._truncations[index] = rewrite
        return self._truncations[index]

    def _placeholder(self, index: int, call_name: str) -> _Rewrite | None:
        if index not in self._placeholders:
            if self.messages[index].type is MessageType.TOOL_RESULT:
                text = f"[result of {call_name} dropped to save context; call it again if needed]"
            else:
                text = f"[this {call_name} call was not executed; the reason was dropped to save context]"
            self._placeholders[index] = self._rewrite(index, text, placeholder=True)
        return self._placeholders[index]

    def plan(self, phase: int) -> _Plan:
        """Price ``phase``'s cuts over everything before the protected window."""
        messages = self.messages
        changes: dict[int, _Rewrite | None] = dict.fromkeys(self._dropped_always)
        if phase >= 3:
            changes.update(dict.fromkeys(self._prose))
        removed = len(changes)
        truncated = placeholders = 0
        # Tool-channel messages this phase cuts, and the calls a kept one still answers: a call
        # left with no answer keeps one, as a placeholder.
        if phase == 1:
            answered = {messages[index].tool_call_id for index in self._results}
            cut_answers = [
                i for i in self._answers if messages[i].type is not MessageType.TOOL_RESULT
            ]
            for index in self._results:
                rewrite = self._truncation(index)
                if rewrite is not None:
                    changes[index] = rewrite
                    truncated += 1
        else:
            answered = set()
            cut_answers = self._answers
        # Of several cut answers to one call, a result makes the better placeholder than a nudge.
        chosen: dict[str | None, int] = {}
        for index in cut_answers:
            call_id = messages[index].tool_call_id
            if call_id not in chosen or (
                messages[index].type is MessageType.TOOL_RESULT
                and messages[chosen[call_id]].type is not MessageType.TOOL_RESULT
            ):
                chosen[call_id] = index
        for index in cut_answers:
            call_id = messages[index].tool_call_id
            assert call_id is not None  # Message guarantees it for the tool role
            call_name = self._call_name(call_id)
            if call_id in answered or call_name is None or chosen[call_id] != index:
                # A kept message or the chosen stand-in answers this call, or it answers no call.
                changes[index] = None
                removed += 1
                continue
            answered.add(call_id)
            rewrite = self._placeholder(index, messages[index].tool_name or call_name)
            if rewrite is not None:  # else the original stays: it is the cheaper answer
                changes[index] = rewrite
                placeholders += 1
        after = self.before
        for index, rewrite in changes.items():
            after -= self.counts[index]
            if rewrite is not None:
                after += rewrite.tokens
        return _Plan(phase, changes, after, removed, truncated, placeholders)

    def build(self, plan: _Plan) -> CompactResult:
        """The history with ``plan`` applied."""
        if not plan.changes:
            return _unchanged(self.messages, self.before)
        out: list[Message] = []
        changes = plan.changes
        remember = self.estimator._remember
        for index, message in enumerate(self.messages):
            if index not in changes:
                out.append(message)
                continue
            rewrite = changes[index]
            if rewrite is None:
                continue
            if rewrite.placeholder:
                assert message.tool_call_id is not None
                new = Message(
                    role=Role.TOOL,
                    content=rewrite.content,
                    type=MessageType.TOOL_RESULT,
                    tool_call_id=message.tool_call_id,
                    tool_name=message.tool_name or self._call_name(message.tool_call_id),
                    step_index=message.step_index,
                    transient=message.transient,
                )
            else:
                new = message.with_content(rewrite.content)
            remember(new, rewrite.units)
            out.append(new)
        return CompactResult(
            messages=out,
            phase=plan.phase,
            tokens_before=self.before,
            tokens_after=plan.tokens_after,
            dropped=plan.removed + plan.placeholders,
            truncated=plan.truncated,
        )
