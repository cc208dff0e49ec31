"""ContextManager: when it compacts, what it records, threshold callbacks, live budgets."""

from __future__ import annotations

import pytest
from ctx_histories import WEATHER_JSON, call
from structlog.testing import capture_logs

from forge_rt.context import (
    CompactEvent,
    ContextManager,
    ContextUsage,
    NoCompact,
    SlidingWindowCompact,
    TieredCompact,
    TokenEstimator,
)
from forge_rt.core import Message


def history(turns: int) -> list[Message]:
    """A weather session with ``turns`` call/result iterations (about 420 tokens each)."""
    messages = [Message.system("You answer weather questions."), Message.user("Paris?")]
    for turn in range(turns):
        c = call("get_weather", f"c{turn}", city="Paris")
        messages += [Message.assistant_calls([c]), Message.tool_result(c, WEATHER_JSON)]
    return messages


def budget_for(messages: list[Message], fraction: float) -> int:
    """The budget at which ``messages`` fill ``fraction`` of it."""
    return round(TokenEstimator().count_messages(messages) / fraction)


def test_under_threshold_returns_the_history_and_no_event() -> None:
    """Below budget * threshold nothing is compacted and no event is returned."""
    messages = history(4)
    manager = ContextManager(budget_for(messages, 0.5))
    out, event = manager.maybe_compact(messages)
    assert (out, event) == (messages, None)


def test_over_threshold_compacts_below_it_and_records_the_event() -> None:
    """Above the threshold the strategy cuts to under budget * threshold; the event says how."""
    messages = history(8)
    budget = budget_for(messages, 0.9)
    manager = ContextManager(budget)
    with capture_logs() as logs:
        out, event = manager.maybe_compact(messages, iteration=8)
    assert event is not None
    tokens_before = TokenEstimator().count_messages(messages)
    tokens_after = TokenEstimator().count_messages(out)
    assert event == CompactEvent(
        phase=1,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        budget=budget,
        target=int(budget * 0.75),
        dropped=0,
        truncated=6,
        strategy="TieredCompact",
        iteration=8,
    )
    assert tokens_after <= manager.target_tokens
    assert [log["event"] for log in logs] == ["context compacted"]
    assert logs[0]["tokens_after"] == tokens_after


def test_threshold_is_configurable() -> None:
    """With threshold=0.5 a history at 60% of the budget is compacted."""
    messages = history(8)
    _, event = ContextManager(budget_for(messages, 0.6), threshold=0.5).maybe_compact(messages)
    assert event is not None
    assert event.target == int(budget_for(messages, 0.6) * 0.5)


def test_no_compact_over_threshold_still_reports() -> None:
    """With NoCompact the history passes unchanged, and the event shows nothing could be cut."""
    messages = history(8)
    out, event = ContextManager(budget_for(messages, 0.9), NoCompact()).maybe_compact(messages)
    assert out == messages
    assert event is not None
    assert (event.phase, event.tokens_before, event.strategy) == (
        0,
        event.tokens_after,
        "NoCompact",
    )


def test_strategy_is_a_constructor_choice() -> None:
    """A SlidingWindowCompact manager keeps only its window of iterations."""
    messages = history(8)
    manager = ContextManager(budget_for(messages, 0.9), SlidingWindowCompact(keep_recent=2))
    out, event = manager.maybe_compact(messages)
    assert out == messages[:2] + messages[-4:]
    assert event is not None
    assert event.strategy == "SlidingWindowCompact"


def test_usage_reports_tokens_budget_and_fraction() -> None:
    """usage() gives the estimate, the budget and their ratio, and fires no callback."""
    messages = history(2)
    tokens = TokenEstimator().count_messages(messages)
    manager = ContextManager(tokens * 4)
    fired: list[ContextUsage] = []
    manager.on_threshold(0.1, fired.append)
    assert manager.usage(messages) == ContextUsage(tokens=tokens, budget=tokens * 4, fraction=0.25)
    assert fired == []


def test_budget_can_be_changed_live() -> None:
    """Lowering budget_tokens makes the next call compact a history that fitted before."""
    messages = history(6)
    manager = ContextManager(budget_for(messages, 0.5))
    assert manager.maybe_compact(messages)[1] is None
    manager.budget_tokens = budget_for(messages, 0.9)
    out, event = manager.maybe_compact(messages)
    assert event is not None
    assert event.budget == manager.budget_tokens
    assert len(out) == len(messages)  # phase 1 truncates; it does not drop results


@pytest.mark.parametrize("bad", [0, -5], ids=["zero", "negative"])
def test_budget_must_be_positive(bad: int) -> None:
    """A non-positive budget is refused at construction and on update."""
    with pytest.raises(ValueError, match=rf"^budget_tokens must be a positive int, got {bad}$"):
        ContextManager(bad)
    manager = ContextManager(100)
    with pytest.raises(ValueError, match=rf"^budget_tokens must be a positive int, got {bad}$"):
        manager.budget_tokens = bad


@pytest.mark.parametrize("bad", [0.0, 1.5], ids=["zero", "above-one"])
def test_threshold_must_be_a_fraction(bad: float) -> None:
    """A threshold outside (0, 1] is refused."""
    with pytest.raises(ValueError, match=r"^ContextManager threshold must be in \(0, 1\]"):
        ContextManager(100, threshold=bad)


def test_threshold_callback_fires_once_until_usage_falls_below() -> None:
    """A callback fires on the first call at or above its fraction, not again while usage stays
    above, and again after usage dropped below and rose back."""
    manager = ContextManager(10_000, NoCompact())
    fired: list[float] = []
    manager.on_threshold(0.5, lambda usage: fired.append(round(usage.fraction, 2)))
    small, large = history(2), history(14)
    budget_small = TokenEstimator().count_messages(small)
    manager.budget_tokens = budget_small * 4  # small at 25%
    fraction_large = TokenEstimator().count_messages(large) / manager.budget_tokens
    assert fraction_large > 0.5
    manager.maybe_compact(small)
    assert fired == []
    manager.maybe_compact(large)
    manager.maybe_compact(large)
    assert fired == [round(fraction_large, 2)]
    manager.maybe_compact(small)  # below: re-armed
    manager.maybe_compact(large)
    assert fired == [round(fraction_large, 2)] * 2


def test_callback_rearms_when_compaction_brings_usage_down() -> None:
    """A callback that fired before a compaction is re-armed by the cut that went below it."""
    messages = history(8)
    manager = ContextManager(budget_for(messages, 0.9))
    fired: list[ContextUsage] = []
    manager.on_threshold(0.8, fired.append)
    manager.maybe_compact(messages)
    manager.maybe_compact(messages)  # the caller did not take the cut: usage is 90% again
    assert len(fired) == 2
    assert all(u.fraction == pytest.approx(0.9, abs=0.01) for u in fired)


def test_callbacks_fire_lowest_fraction_first() -> None:
    """Several thresholds crossed at once fire in ascending order."""
    manager = ContextManager(100, NoCompact())
    order: list[str] = []
    manager.on_threshold(0.9, lambda _: order.append("0.9"))
    manager.on_threshold(0.25, lambda _: order.append("0.25"))
    manager.on_threshold(0.5, lambda _: order.append("0.5"))
    manager.maybe_compact(history(2))  # about 10x the budget
    assert order == ["0.25", "0.5", "0.9"]


def test_callback_errors_propagate() -> None:
    """What a callback raises reaches the caller of maybe_compact."""
    manager = ContextManager(100, NoCompact())

    def boom(usage: ContextUsage) -> None:
        raise RuntimeError(f"at {usage.tokens}")

    manager.on_threshold(0.5, boom)
    with pytest.raises(RuntimeError, match=r"^at \d+$"):
        manager.maybe_compact(history(1))


def test_threshold_fraction_must_be_positive() -> None:
    """A zero or negative fraction is refused."""
    with pytest.raises(
        ValueError, match=r"^on_threshold fraction must be a positive number, got 0$"
    ):
        ContextManager(100).on_threshold(0, lambda _: None)


def test_learned_prompt_offset_counts_against_the_budget() -> None:
    """Once usage shows 2,000 tokens outside the messages (tool schemas), a history that fits
    alone is compacted, and the event's figures include that part."""
    messages = history(6)
    estimator = TokenEstimator()
    alone = estimator.count_messages(messages)
    manager = ContextManager(round(alone / 0.6), estimator=estimator)
    assert manager.maybe_compact(messages)[1] is None
    estimator.observe_usage(messages, alone + 2_000)
    assert manager.usage(messages).tokens == alone + 2_000
    out, event = manager.maybe_compact(messages)
    assert event is not None
    assert event.tokens_before == alone + 2_000
    assert event.tokens_after == estimator.count_prompt(out) <= manager.target_tokens


def test_default_strategy_is_tiered() -> None:
    """Without a strategy argument the manager uses TieredCompact with its defaults."""
    assert ContextManager(100).strategy == TieredCompact()
