"""Step and prerequisite enforcement: required steps before a terminal tool, tools before tools.

What has run is read from the :class:`~forge_rt.core.StepTracker`, never from the message
history, so compaction cannot make a done step look pending (or the reverse). A call that breaks
a rule is refused with a tool-channel correction, and only that call: the rest of its reply runs
(a reply holding the pending step *and* the premature terminal call runs the step). A reply with
nothing left to run is blocked. Each rule has its own budget of consecutive replies with a
refusal, and a successful execution resets both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from actors import quiet_logger
from forge_rt.core import MessageType, Prerequisite, Role, StepTracker, ToolCall
from forge_rt.errors import PrerequisiteError, StepEnforcementError
from forge_rt.guardrails._actions import BlockReason, Refusal, StepBlocked
from forge_rt.guardrails._nudges import (
    MAX_TIER,
    Nudge,
    held_back,
    premature_terminal_nudge,
    prerequisite_nudge,
)

__all__ = ["StepEnforcer", "blocked_batch"]

log = quiet_logger(__name__)


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
    :class:`StepEnforcementError` / :class:`PrerequisiteError`."""

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

    def first_unmet(self, tool: str) -> str | None:
        """The tool to call before ``tool`` can run: its first prerequisite that never
        succeeded, followed down to one whose own prerequisites all have; ``None`` when nothing
        is missing. A prerequisite with ``match_arg`` counts as met once its tool succeeded
        with any value: the refusal of the call itself names the value."""
        found: str | None = None
        seen: set[str] = set()
        current = tool
        while current not in seen:
            seen.add(current)
            missing = [
                p.tool
                for p in self.prerequisites.get(current, ())
                if not self.tracker.is_done(p.tool)
            ]
            if not missing:
                break
            found = current = missing[0]
        return found

    def check(
        self, calls: Sequence[ToolCall], *, text: str = ""
    ) -> StepBlocked | list[Refusal] | None:
        """Which calls of a reply may not run yet (premature terminal calls, then unmet
        prerequisites): ``None`` when every call may run; the :class:`Refusal` of each call
        that may not when others may; :class:`StepBlocked` when no call may run. Raises the
        rule's typed error when its budget is exhausted."""
        pending = self.pending
        early = [c for c in calls if c.tool in self.terminal_tools] if pending else []
        early_ids = {c.call_id for c in early}
        waiting = [
            (c, m)
            for c in calls
            if c.call_id not in early_ids and (m := self.missing_prerequisites(c))
        ]
        refused_ids = early_ids | {c.call_id for c, _ in waiting}
        if not refused_ids:
            return None
        running = [c.tool for c in calls if c.call_id not in refused_ids]
        refusals = self._premature_refusals(early, pending, running) if early else []
        if waiting:
            refusals += self._prerequisite_refusals(waiting, running)
        order = {c.call_id: i for i, c in enumerate(calls)}
        refusals.sort(key=lambda r: order[r.call.call_id])
        if running:
            return refusals
        reason: BlockReason = "premature_terminal" if early else "prerequisite"
        return StepBlocked(
            calls=list(calls), errors=[r.nudge for r in refusals], reason=reason, text=text
        )

    def _premature_refusals(
        self, early: list[ToolCall], pending: list[str], running: list[str]
    ) -> list[Refusal]:
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
        log.info(
            "guardrails.premature_terminal",
            tool=early[0].tool,
            pending=pending,
            tier=tier,
            running=running,
        )
        return [
            Refusal(
                call=c,
                nudge=Nudge(
                    kind=MessageType.STEP_NUDGE,
                    role=Role.TOOL,
                    content=premature_terminal_nudge(tier, c.tool, pending, running=running),
                    call_id=c.call_id,
                    tool=c.tool,
                    tier=tier,
                ),
                reason="premature_terminal",
            )
            for c in early
        ]

    def _prerequisite_refusals(
        self, waiting: list[tuple[ToolCall, list[Prerequisite]]], running: list[str]
    ) -> list[Refusal]:
        """Refuse each call whose prerequisites have not succeeded yet: a prerequisite in the
        same reply may fail, so the call waits while it runs, and the model is told to send it
        again once that succeeded."""
        self._prereq += 1
        call, missing = waiting[0]
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
        log.info(
            "guardrails.prerequisite",
            tool=call.tool,
            missing=missing[0].tool,
            tier=tier,
            running=running,
        )
        return [
            Refusal(
                call=c,
                nudge=Nudge(
                    kind=MessageType.PREREQUISITE_NUDGE,
                    role=Role.TOOL,
                    content=prerequisite_nudge(tier, c.tool, m, args=c.args, running=running),
                    call_id=c.call_id,
                    tool=c.tool,
                    tier=tier,
                ),
                reason="prerequisite",
            )
            for c, m in waiting
        ]

    def record(self, call: ToolCall) -> None:
        """``call`` succeeded: mark the step done and break both blocked-reply rows."""
        self.tracker.record(call)
        self.reset_premature()
        self.reset_prereq()

    def restore_counts(self, *, premature: int, prereq: int) -> None:
        """Resume with ``premature`` and ``prereq`` attempts already used (a stored session's)."""
        self._premature = premature
        self._prereq = prereq

    def reset_premature(self) -> None:
        self._premature = 0

    def reset_prereq(self) -> None:
        self._prereq = 0
