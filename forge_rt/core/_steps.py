"""What the loop has done, kept outside the message history so compaction can never erase it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from forge_rt.core._messages import ToolCall
from forge_rt.core._tools import Prerequisite

__all__ = ["StepTracker"]


class _Record(msgspec.Struct, frozen=True):
    tool: str
    args: dict[str, Any]


class StepTracker:
    """Records every successful tool call; answers "is step X done?" and "is prerequisite met?".

    Only successful executions are recorded: a blocked, failed or unresolved call is not a step.
    """

    def __init__(self, completed: Iterable[str] = ()) -> None:
        self._order: list[str] = []
        self._calls: list[_Record] = []
        for step in completed:
            self._mark(step)

    @classmethod
    def restore(
        cls, completed: Iterable[str], calls: Iterable[tuple[str, dict[str, Any]]]
    ) -> StepTracker:
        """A tracker as :attr:`completed_steps` and :attr:`calls` described it (a stored
        session's): the calls keep prerequisites that match on an argument satisfiable."""
        tracker = cls(completed)
        tracker._calls = [_Record(tool, dict(args)) for tool, args in calls]
        return tracker

    @property
    def calls(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        """Every successful call as ``(tool, arguments)``, in the order they ran."""
        return tuple((r.tool, dict(r.args)) for r in self._calls)

    def _mark(self, tool: str) -> None:
        if tool not in self._order:
            self._order.append(tool)

    def record(self, call: ToolCall) -> None:
        """Note that ``call`` executed successfully."""
        self._mark(call.tool)
        self._calls.append(_Record(call.tool, dict(call.args)))

    @property
    def completed_steps(self) -> tuple[str, ...]:
        """Distinct tools that have succeeded, in the order they first succeeded."""
        return tuple(self._order)

    def is_done(self, tool: str) -> bool:
        return tool in self._order

    def pending(self, required: Iterable[str]) -> list[str]:
        """The required steps not yet done, in the order given."""
        return [step for step in required if step not in self._order]

    def satisfies(self, prerequisite: Prerequisite, args: dict[str, Any]) -> bool:
        """Whether ``prerequisite`` holds for a call with ``args``."""
        if prerequisite.match_arg is None:
            return self.is_done(prerequisite.tool)
        if prerequisite.match_arg not in args:
            return False
        wanted = args[prerequisite.match_arg]
        key = prerequisite.other_arg
        return any(
            r.tool == prerequisite.tool and key in r.args and r.args[key] == wanted
            for r in self._calls
        )

    def count(self, tool: str) -> int:
        """How many times ``tool`` has succeeded."""
        return sum(1 for r in self._calls if r.tool == tool)
