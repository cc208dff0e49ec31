"""What an eval scenario is: a workflow with deterministic tools, the user turns, and a validator.

Every run builds a fresh ``ScenarioRun`` from the scenario's ``build`` function, so stateful tools
(a ticket system, a file store) start clean each time; the validator then judges the final answer
and, for stateful twins, the end state of that tool backend. ``oracle`` tells the simulated
backend what a perfect model would do next, so the sim's known failure rates can be checked
against what the guardrails recover.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from forge_rt.backends.sim import Intent, RequestView
from forge_rt.core import Workflow

__all__ = [
    "Contender",
    "Judge",
    "Scenario",
    "ScenarioRun",
    "Verdict",
    "select_from",
]


class Verdict(msgspec.Struct, frozen=True):
    """Whether a finished run is correct, and why not when it is not."""

    correct: bool
    reason: str = ""


# Judges the final output (the terminal tool's result or the respond message) of the last turn.
Judge = Callable[[str], Verdict]


class ScenarioRun(msgspec.Struct, kw_only=True):
    """One fresh instance of a scenario: its workflow (with fresh tool state) and its judge.

    ``turns`` are the user messages, sent in order to one workflow actor (multi-turn when more
    than one); ``judge`` sees the output of the last turn; ``state`` is the tool backend the
    judge may inspect (kept here so reports can show it).
    """

    workflow: Workflow
    turns: tuple[str, ...]
    judge: Judge
    state: Any = None


class Contender(msgspec.Struct, frozen=True, kw_only=True):
    """One extra workflow run concurrently on the same slot (multi-agent contention scenarios)."""

    build: Callable[[], ScenarioRun]
    priority: int
    start_after_s: float = 0.0
    label: str = ""


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """A named, tagged eval scenario.

    ``ideal_calls`` is the number of tool calls (including the terminal one) a perfect run
    makes; ``budget_tokens`` forces a small context (compaction scenarios); ``oracle`` drives
    the simulated backend; ``contenders`` run beside the main workflow on the same slot, and the
    main workflow runs at ``priority``.
    """

    name: str
    tags: tuple[str, ...]
    description: str
    build: Callable[[], ScenarioRun]
    ideal_calls: int
    oracle: Callable[[RequestView], Intent]
    budget_tokens: int | None = None
    priority: int = 0
    contenders: tuple[Contender, ...] = ()
    max_iterations: int = 12

    @property
    def tier(self) -> str:
        return self.tags[0]


def scripted_oracle(plan: Sequence[Intent]) -> Callable[[RequestView], Intent]:
    """An oracle that follows ``plan``: the n-th intent once n tool results are in the request."""

    def oracle(view: RequestView) -> Intent:
        done = sum(1 for m in view.messages if m.role == "tool")
        return plan[min(done, len(plan) - 1)]

    return oracle


def select_from(pool: Sequence[Scenario], names: Sequence[str]) -> list[Scenario]:
    """The scenarios of ``pool`` named by ``names`` -- each a scenario's name or a tag, which
    picks every scenario that has it -- in the pool's order (all of it when ``names`` is
    empty); a name that is neither is a ``ValueError`` listing the tags."""
    if not names:
        return list(pool)
    by_name = {s.name: s for s in pool}
    wanted: set[str] = set()
    for name in names:
        if name in by_name:
            wanted.add(name)
            continue
        tagged = {s.name for s in pool if name in s.tags}
        if not tagged:
            tags = sorted({t for s in pool for t in s.tags})
            raise ValueError(f"no scenario is named or tagged {name!r}; tags: {tags}")
        wanted |= tagged
    return [s for s in pool if s.name in wanted]
