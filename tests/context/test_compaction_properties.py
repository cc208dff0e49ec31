"""Compaction invariants over random well-formed histories (hypothesis)."""

from __future__ import annotations

from ctx_histories import (
    histories,
    orphaned_calls,
    orphaned_results,
    protected_window,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_rt.context import (
    CompactStrategy,
    SlidingWindowCompact,
    TieredCompact,
    TokenEstimator,
    protected_window_start,
)
from forge_rt.core import Message, MessageType

# deadline=None: the machine is shared, and a slow example is not a wrong one.
SETTINGS = settings(max_examples=150, deadline=None)

strategies = st.one_of(
    st.builds(
        TieredCompact,
        keep_recent=st.integers(0, 4),
        truncate_chars=st.sampled_from([0, 20, 200]),
    ),
    st.builds(SlidingWindowCompact, keep_recent=st.integers(0, 5)),
)
# A target as a fraction of the history's estimate: 0 forces the deepest cut.
fractions = st.sampled_from([0.0, 0.2, 0.5, 0.8, 0.95, 1.0])

KEPT_TYPES = {MessageType.SYSTEM_PROMPT, MessageType.USER_INPUT, MessageType.SUMMARY}


def run(
    strategy: CompactStrategy, history: list[Message], fraction: float
) -> tuple[list[Message], int, int, int]:
    estimator = TokenEstimator()
    before = estimator.count_messages(history)
    target = int(before * fraction)
    result = strategy.compact(history, target, estimator)
    return result.messages, before, target, result.tokens_after


@SETTINGS
@given(histories())
def test_generated_histories_are_well_formed(history: list[Message]) -> None:
    """The generator only builds histories that answer every call (the properties' premise)."""
    assert orphaned_calls(history) == []
    assert orphaned_results(history) == []


@SETTINGS
@given(histories(), strategies, fractions)
def test_system_prompt_and_user_turns_are_kept(
    history: list[Message], strategy: CompactStrategy, fraction: float
) -> None:
    """System prompts, every user turn (the first included) and summaries survive, in order."""
    out, *_ = run(strategy, history, fraction)
    assert [m for m in out if m.type in KEPT_TYPES] == [m for m in history if m.type in KEPT_TYPES]
    assert out[:2] == history[:2]


@SETTINGS
@given(histories(), strategies, fractions)
def test_protected_window_is_kept_verbatim(
    history: list[Message], strategy: CompactStrategy, fraction: float
) -> None:
    """The last keep_recent iterations come back unchanged at the end of the history."""
    out, *_ = run(strategy, history, fraction)
    window = protected_window(history, strategy.keep_recent)  # type: ignore[attr-defined]
    assert out[len(out) - len(window) :] == window
    assert len(history) - len(window) == protected_window_start(history, strategy.keep_recent)  # type: ignore[attr-defined]


@SETTINGS
@given(histories(), strategies, fractions)
def test_no_orphaned_calls_or_results(
    history: list[Message], strategy: CompactStrategy, fraction: float
) -> None:
    """Every call keeps an answer before the next assistant turn; every answer keeps its call."""
    out, *_ = run(strategy, history, fraction)
    assert orphaned_calls(out) == []
    assert orphaned_results(out) == []


@SETTINGS
@given(histories(), strategies, fractions)
def test_token_estimate_never_grows_and_is_reported_right(
    history: list[Message], strategy: CompactStrategy, fraction: float
) -> None:
    """The result is never larger than the input, and tokens_after is the result's estimate."""
    out, before, _, after = run(strategy, history, fraction)
    assert after == TokenEstimator().count_messages(out)
    assert after <= before
    assert len(out) <= len(history)


@SETTINGS
@given(histories(), st.integers(0, 4), fractions)
def test_tiered_stops_at_the_first_phase_that_fits(
    history: list[Message], keep_recent: int, fraction: float
) -> None:
    """TieredCompact either reaches the target or has gone to phase 3 (or could cut nothing)."""
    estimator = TokenEstimator()
    target = int(estimator.count_messages(history) * fraction)
    result = TieredCompact(keep_recent=keep_recent).compact(history, target, estimator)
    assert result.tokens_after <= target or result.phase in (0, 3)


@SETTINGS
@given(histories(), strategies, fractions)
def test_compaction_is_deterministic(
    history: list[Message], strategy: CompactStrategy, fraction: float
) -> None:
    """The same history, target and settings give the same result, with fresh or warm estimators."""
    first = run(strategy, history, fraction)
    estimator = TokenEstimator()
    estimator.count_messages(history)  # a warm cache must not change the outcome
    second = strategy.compact(history, first[2], estimator)
    assert (second.messages, second.tokens_after) == (first[0], first[3])
