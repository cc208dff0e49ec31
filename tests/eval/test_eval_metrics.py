"""Eval statistics: Wilson intervals, exact McNemar, pass^k and the per-group summary."""

from __future__ import annotations

import math

import pytest

from forge_rt.eval import RunRecord, mcnemar_p, paired_mcnemar, pass_hat_k, summarise, wilson


def _record(scenario: str, run: int, *, correct: bool, **fields: object) -> RunRecord:
    values: dict[str, object] = {
        "scenario": scenario,
        "tags": ("plumbing",),
        "run": run,
        "ablation": "full",
        "backend": "sim",
        "model": "sim",
        "completed": correct,
        "correct": correct,
    }
    values.update(fields)
    return RunRecord(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (50, 100, 0.4038, 0.5962),
        (1, 3, 0.0615, 0.7923),
    ],
    ids=["8-of-10", "0-of-10", "10-of-10", "50-of-100", "1-of-3"],
)
def test_wilson_matches_published_values(successes: int, n: int, low: float, high: float) -> None:
    """The Wilson 95% interval agrees with textbook values to four decimals."""
    got = wilson(successes, n)
    assert (low, high) == (pytest.approx(got[0], abs=5e-5), pytest.approx(got[1], abs=5e-5))


def test_wilson_of_no_runs_is_the_whole_range() -> None:
    """With no runs nothing is known: the interval is [0, 1]."""
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("only_a", "only_b", "p"),
    [
        (0, 0, 1.0),
        (0, 5, 2 / 32),
        (5, 0, 2 / 32),
        (1, 4, 2 * 6 / 32),
        (3, 3, 1.0),
        (0, 10, 2 / 1024),
        (2, 8, 2 * (1 + 10 + 45) / 1024),
    ],
    ids=["none", "0-5", "5-0", "1-4", "3-3", "0-10", "2-8"],
)
def test_mcnemar_is_the_exact_two_sided_binomial_test(only_a: int, only_b: int, p: float) -> None:
    """McNemar's p is twice the binomial tail of the smaller discordant count, capped at 1."""
    assert p == pytest.approx(mcnemar_p(only_a, only_b))


def test_paired_mcnemar_pairs_runs_by_scenario_and_run() -> None:
    """Only (scenario, run) pairs present on both sides count, and only discordant ones."""
    full = [_record(s, r, correct=True) for s in ("a", "b", "c") for r in (0, 1)]
    other = [
        _record(s, r, correct=s == "a", ablation="bare") for s in ("a", "b", "c") for r in (0, 1)
    ]
    other.append(_record("d", 0, correct=True, ablation="bare"))  # no partner: ignored
    assert mcnemar_p(4, 0) == paired_mcnemar(full, other)


def test_pass_hat_k_is_the_unbiased_all_k_pass_estimate() -> None:
    """pass^k averages C(c, k) / C(n, k) over scenarios with at least k runs."""
    outcomes = {"a": [True, True, True], "b": [True, False, True], "short": [True]}
    assert pass_hat_k(outcomes, 3) == 0.5
    assert pytest.approx((1 + 1 / 3) / 2) == pass_hat_k(outcomes, 2)
    assert pytest.approx((1 + 2 / 3 + 1) / 3) == pass_hat_k(outcomes, 1)


def test_pass_hat_k_without_enough_runs_is_nan() -> None:
    """No scenario has k runs: there is no estimate, not a zero."""
    assert math.isnan(pass_hat_k({"a": [True, True]}, 3))


def test_summarise_counts_score_completion_efficiency_and_waste() -> None:
    """Score and completion over attempts; efficiency over correct runs; waste over all runs."""
    records = [
        _record("a", 0, correct=True, ideal_calls=2, tool_calls=2),
        _record("a", 1, correct=True, ideal_calls=2, tool_calls=4),
        _record("b", 0, correct=False, completed=True, ideal_calls=3, tool_calls=5),
        _record("b", 1, correct=False, error_type="ToolCallError", ideal_calls=3, tool_calls=0),
    ]
    s = summarise(records)
    assert (s.runs, s.completed, s.correct) == (4, 3, 2)
    assert (s.completion, s.score) == (0.75, 0.5)
    assert wilson(3, 4) == s.completion_ci
    assert s.efficiency == 4 / 6
    assert s.wasted_calls == 4
    assert s.errors == {"ToolCallError": 1}


def test_percentile_is_nearest_rank() -> None:
    """p50 and p95 take the nearest rank: the smallest value with that share at or below it."""
    from forge_rt.eval._metrics import percentile

    values = [float(v) for v in range(1, 21)]  # 1..20
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (
        10.0,
        19.0,
        20.0,
    )
    assert math.isnan(percentile([], 95))
