"""Step and prerequisite enforcement: required steps before a terminal tool, tools before tools.

What has run is read from the :class:`~forge_rt.core.StepTracker`, never from the message
history, so compaction cannot make a done step look pending (or the reverse). A violation blocks
the whole reply with tool-channel corrections; each rule has its own budget of consecutive
blocked replies, and a successful execution resets both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import structlog

from forge_rt.core import MessageType, Prerequisite, Role, StepTracker, ToolCall
from forge_rt.errors import PrerequisiteError, StepEnforcementError
from forge_rt.guardrails._actions import BlockReason, StepBlocked
from forge_rt.guardrails._nudges import (
    MAX_TIER,
    Nudge,
    held_back,
    premature_terminal_nudge,
    prerequisite_nudge,
)

__all__ = ["StepEnforcer", "blocked_batch"]

log = structlog.get_logger(__name__)


def blocked_batch(
    calls: Sequence[ToolCall],
    errors: Sequence[Nudge],
    reason: BlockReason,
    *,
    kind: MessageType,
    tier: int = 1,
    text: str = "",
) -> StepBlocked:
    """A :class:`StepBlocked` for ``calls``: the given errors plus a note for every other call."""
    return StepBlocked(
        calls=list(calls),
        errors=list(errors),
        reason=reason,
        held_back=held_back(calls, errors, kind=kind, tier=tier),
        text=text,
    )


def _normalise(
    prerequisites: Mapping[str, Sequence[Prerequisite | str]],
) -> dict[str, tuple[Prerequisite, ...]]:
    out: dict[str, tuple[Prerequisite, ...]] = {}
    for tool, prereqs in prerequisites.items():
        items = tuple(Prerequisite(tool=p) if isinstance(p, str) else p for p in prereqs)
        for p in items:
            if p.tool == tool:
                raise ValueError(f"tool {tool!r} lists itself as a prerequisite")
        if items:
            out[tool] = items
    return out


class StepEnforcer:
    """Blocks premature terminal calls and calls whose prerequisites have not succeeded.

    ``prerequisites`` maps a tool name to what must have succeeded before it: a tool name, or a
    :class:`Prerequisite` that also requires a matching argument value. ``max_premature`` and
    ``max_prereq`` are how many blocked replies in a row are corrected; the next one raises
    :class:`StepEnforcementError` / :class:`PrerequisiteError`.
    """

    def __init__(
        self,
        required_steps: Iterable[str],
        terminal_tools: Iterable[str],
        prerequisites: Mapping[str, Sequence[Prerequisite | str]],
        tracker: StepTracker,
        max_premature: int = 3,
        max_prereq: int = 3,
    ) -> None:
        if max_premature < 0 or max_prereq < 0:
            raise ValueError(
                f"budgets must be >= 0, got max_premature={max_premature}, max_prereq={max_prereq}"
            )
        self.required_steps = tuple(required_steps)
        self.terminal_tools = frozenset(terminal_tools)
        clash = self.terminal_tools.intersection(self.required_steps)
        if clash:
            raise ValueError(f"{sorted(clash)} cannot be both terminal and a required step")
        self.prerequisites = _normalise(prerequisites)
        self.tracker = tracker
        self.max_premature = max_premature
        self.max_prereq = max_prereq
        self._premature = 0
        self._prereq = 0

    @property
    def premature_count(self) -> int:
        """Replies blocked in a row for calling a terminal tool too early."""
        return self._premature

    @property
    def prereq_count(self) -> int:
        """Replies blocked in a row for unmet prerequisites."""
        return self._prereq

    @property
    def pending(self) -> list[str]:
        """Required steps not yet done, in order."""
        return self.tracker.pending(self.required_steps)

    def missing_prerequisites(self, call: ToolCall) -> list[Prerequisite]:
        """The prerequisites of ``call`` that the tracker does not show as satisfied."""
        return [
            p
            for p in self.prerequisites.get(call.tool, ())
            if not self.tracker.satisfies(p, call.args)
        ]

    def check(self, calls: Sequence[ToolCall], *, text: str = "") -> StepBlocked | None:
        """Premature terminal calls first, then prerequisites; ``None`` when the batch may run.

        Raises the rule's typed error when its budget is exhausted.
        """
        blocked = self.check_premature(calls, text=text)
        if blocked is not None:
            return blocked
        return self.check_prerequisites(calls, text=text)

    def check_premature(self, calls: Sequence[ToolCall], *, text: str = "") -> StepBlocked | None:
        """Block the batch if it calls a terminal tool while required steps are pending."""
        pending = self.pending
        early = [c for c in calls if c.tool in self.terminal_tools] if pending else []
        if not early:
            return None
        self._premature += 1
        if self._premature > self.max_premature:
            log.warning("guardrails.premature_exhausted", tool=early[0].tool, pending=pending)
            raise StepEnforcementError(
                f"the model called terminal tool {early[0].tool!r} {self._premature} times in a "
                f"row before required steps {pending} were done (budget {self.max_premature}). "
                "Make the step order explicit in the system prompt, or raise max_premature",
                terminal_tool=early[0].tool,
                pending_steps=pending,
                attempts=self._premature,
            )
        tier = min(self._premature, MAX_TIER)
        errors = [
            Nudge(
                kind=MessageType.STEP_NUDGE,
                role=Role.TOOL,
                content=premature_terminal_nudge(tier, c.tool, pending),
                call_id=c.call_id,
                tool=c.tool,
                tier=tier,
            )
            for c in early
        ]
        log.info("guardrails.premature_terminal", tool=early[0].tool, pending=pending, tier=tier)
        return blocked_batch(
            calls, errors, "premature_terminal", kind=MessageType.STEP_NUDGE, tier=tier, text=text
        )

    def check_prerequisites(
        self, calls: Sequence[ToolCall], *, text: str = ""
    ) -> StepBlocked | None:
        """Block the batch if any call's prerequisites have not succeeded yet.

        Only calls that already succeeded count: a prerequisite in the same reply has not run
        yet, and may fail, so the model is told to call it on its own first.
        """
        blocked = [(c, m) for c in calls if (m := self.missing_prerequisites(c))]
        if not blocked:
            return None
        self._prereq += 1
        call, missing = blocked[0]
        if self._prereq > self.max_prereq:
            log.warning("guardrails.prereq_exhausted", tool=call.tool, missing=missing[0].tool)
            raise PrerequisiteError(
                f"the model called {call.tool!r} {self._prereq} times in a row before its "
                f"prerequisite {missing[0].describe()} succeeded (budget {self.max_prereq}). "
                "Describe the dependency in the tool descriptions, or raise max_prereq",
                tool=call.tool,
                missing=missing[0].describe(),
                attempts=self._prereq,
            )
        tier = min(self._prereq, MAX_TIER)
        errors = [
            Nudge(
                kind=MessageType.PREREQUISITE_NUDGE,
                role=Role.TOOL,
                content=prerequisite_nudge(tier, c.tool, m, args=c.args),
                call_id=c.call_id,
                tool=c.tool,
                tier=tier,
            )
            for c, m in blocked
        ]
        log.info("guardrails.prerequisite", tool=call.tool, missing=missing[0].tool, tier=tier)
        return blocked_batch(
            calls, errors, "prerequisite", kind=MessageType.PREREQUISITE_NUDGE, tier=tier, text=text
        )

    def record(self, call: ToolCall) -> None:
        """``call`` succeeded: mark the step done and break both blocked-reply rows."""
        self.tracker.record(call)
        self.reset_premature()
        self.reset_prereq()

    def reset_premature(self) -> None:
        self._premature = 0

    def reset_prereq(self) -> None:
        self._prereq = 0
