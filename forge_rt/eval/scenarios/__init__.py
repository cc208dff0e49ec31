"""The scenario suite: our own scenarios with deterministic tools, grouped into tiers by tag.

Tiers: plumbing, quality, advanced, prerequisites, compaction, multiturn, stateful, contention.
"""

from forge_rt.eval._scenario import Scenario
from forge_rt.eval.scenarios._basic import ADVANCED, PLUMBING, QUALITY
from forge_rt.eval.scenarios._structured import (
    COMPACTION,
    CONTENTION,
    MULTITURN,
    PREREQUISITES,
    STATEFUL,
)

__all__ = ["SCENARIOS", "TIERS", "select"]

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        *PLUMBING,
        *QUALITY,
        *ADVANCED,
        *PREREQUISITES,
        *COMPACTION,
        *MULTITURN,
        *STATEFUL,
        *CONTENTION,
    )
}

TIERS: tuple[str, ...] = tuple(dict.fromkeys(s.tier for s in SCENARIOS.values()))


def select(names: list[str] | None) -> list[Scenario]:
    """Scenarios by name or tag (all when ``names`` is empty); an unknown name is an error."""
    if not names:
        return list(SCENARIOS.values())
    chosen: dict[str, Scenario] = {}
    for name in names:
        if name in SCENARIOS:
            chosen[name] = SCENARIOS[name]
            continue
        tagged = [s for s in SCENARIOS.values() if name in s.tags]
        if not tagged:
            raise ValueError(
                f"unknown scenario or tag {name!r}; tags: {list(TIERS)}; "
                f"scenarios: {sorted(SCENARIOS)}"
            )
        chosen.update((s.name, s) for s in tagged)
    return list(chosen.values())
