"""Statistics for eval results: Wilson intervals, McNemar's exact test, pass^k, efficiency."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from forge_rt.eval._record import RunRecord

__all__ = ["Summary", "mcnemar_p", "paired_mcnemar", "pass_hat_k", "summarise", "wilson"]


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score 95% interval for a proportion (``(0, 1)`` when ``n`` is 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def pass_hat_k(outcomes_by_scenario: Mapping[str, Sequence[bool]], k: int) -> float:
    """pass^k: the chance that k runs of a scenario all pass, averaged over scenarios.

    Per scenario with ``n`` runs of which ``c`` passed: C(c, k) / C(n, k) (unbiased).
    Scenarios with fewer than ``k`` runs are left out.
    """
    values = []
    for outcomes in outcomes_by_scenario.values():
        n, c = len(outcomes), sum(outcomes)
        if n >= k:
            values.append(math.comb(c, k) / math.comb(n, k))
    return sum(values) / len(values) if values else float("nan")


class Summary(msgspec.Struct, kw_only=True):
    """Aggregates of one group of runs (one ablation on one model)."""

    runs: int
    completed: int
    correct: int
    completion: float
    completion_ci: tuple[float, float]
    score: float
    score_ci: tuple[float, float]
    efficiency: float
    wasted_calls: int
    pass_hat_3: float
    errors: dict[str, int]
    wall_p50_s: float
    wall_p95_s: float
    tokens_mean: float
    mcnemar_vs_full: float | None = None


def summarise(records: Iterable[RunRecord]) -> Summary:
    """Score, completion, efficiency and wasted calls over ``records``."""
    rows = list(records)
    n = len(rows)
    completed = sum(r.completed for r in rows)
    correct = sum(r.correct for r in rows)
    ideal = sum(r.ideal_calls for r in rows if r.correct)
    actual = sum(r.tool_calls for r in rows if r.correct)
    errors: dict[str, int] = defaultdict(int)
    by_scenario: dict[str, list[bool]] = defaultdict(list)
    for r in rows:
        if r.error_type:
            errors[r.error_type] += 1
        by_scenario[r.scenario].append(r.correct)
    return Summary(
        runs=n,
        completed=completed,
        correct=correct,
        completion=completed / n if n else 0.0,
        completion_ci=wilson(completed, n),
        score=correct / n if n else 0.0,
        score_ci=wilson(correct, n),
        efficiency=ideal / actual if actual else float("nan"),
        wasted_calls=sum(max(0, r.tool_calls - r.ideal_calls) for r in rows),
        pass_hat_3=pass_hat_k(by_scenario, 3),
        errors=dict(errors),
        wall_p50_s=percentile([r.wall_s for r in rows], 50),
        wall_p95_s=percentile([r.wall_s for r in rows], 95),
        tokens_mean=(
            sum(r.prompt_tokens + r.completion_tokens for r in rows) / n if n else float("nan")
        ),
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` by the nearest-rank method (NaN when empty): the
    smallest value with at least ``q`` percent of the values at or below it."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def paired_mcnemar(full: Iterable[RunRecord], other: Iterable[RunRecord]) -> float:
    """McNemar p-value of ``other`` against ``full`` on correctness, paired by (scenario, run)."""
    a = {(r.scenario, r.run): r.correct for r in full}
    b = {(r.scenario, r.run): r.correct for r in other}
    keys = a.keys() & b.keys()
    only_a = sum(1 for k in keys if a[k] and not b[k])
    only_b = sum(1 for k in keys if b[k] and not a[k])
    return mcnemar_p(only_a, only_b)
