"""ErrorTracker: consecutive retry and tool-error budgets that exhaust into typed errors."""

from __future__ import annotations

import pytest

from forge_rt.errors import ToolCallError, ToolExecutionError
from forge_rt.guardrails import ErrorTracker


def test_retries_count_up_to_the_budget() -> None:
    """Each bad reply in a row returns its position in the row (the nudge tier)."""
    tracker = ErrorTracker(max_retries=3)
    assert [tracker.record_retry("x", "prose") for _ in range(3)] == [1, 2, 3]


def test_retry_past_the_budget_raises_with_context() -> None:
    """The bad reply after the last allowed retry raises ToolCallError with full context."""
    tracker = ErrorTracker(max_retries=2)
    tracker.record_retry("first", "empty reply")
    tracker.record_retry("second", "empty reply")
    with pytest.raises(ToolCallError, match=r"^the model sent 3 replies in a row") as info:
        tracker.record_retry("third raw", "text instead of a tool call")
    error = info.value
    assert (error.attempts, error.last_raw, error.cause) == (
        3,
        "third raw",
        "text instead of a tool call",
    )


def test_zero_retries_makes_the_first_bad_reply_fatal() -> None:
    """With no retry budget the first bad reply raises."""
    with pytest.raises(ToolCallError):
        ErrorTracker(max_retries=0).record_retry("", "empty reply")


def test_reset_retries_breaks_the_row() -> None:
    """A good reply resets the row, so the budget applies to consecutive failures only."""
    tracker = ErrorTracker(max_retries=2)
    tracker.record_retry("a", "c")
    tracker.record_retry("b", "c")
    tracker.reset_retries()
    assert (tracker.retries, tracker.record_retry("c", "c")) == (0, 1)


def test_tool_errors_past_the_budget_raise_with_context() -> None:
    """The third consecutive tool failure (budget 2) raises, chained from the tool's error."""
    tracker = ErrorTracker(max_tool_errors=2)
    assert tracker.record_tool_error("fetch", OSError("a")) == 1
    assert tracker.record_tool_error("fetch", OSError("b")) == 2
    last = OSError("disk gone")
    with pytest.raises(ToolExecutionError, match=r"^tool 'fetch' failed with OSError") as info:
        tracker.record_tool_error("fetch", last)
    error = info.value
    assert (error.tool, error.attempts, error.last_error, error.__cause__) == (
        "fetch",
        3,
        last,
        last,
    )


def test_no_recovery_makes_first_tool_error_fatal() -> None:
    """max_tool_errors=0 raises on the first failure."""
    with pytest.raises(ToolExecutionError) as info:
        ErrorTracker(max_tool_errors=0).record_tool_error("t", RuntimeError("x"))
    assert info.value.attempts == 1


def test_reset_tool_errors_breaks_the_row() -> None:
    """A success resets the tool-error row."""
    tracker = ErrorTracker(max_tool_errors=1)
    tracker.record_tool_error("t", RuntimeError("x"))
    tracker.reset_tool_errors()
    assert tracker.record_tool_error("t", RuntimeError("y")) == 1


def test_budgets_are_independent() -> None:
    """Retries and tool errors are counted separately."""
    tracker = ErrorTracker(max_retries=1, max_tool_errors=1)
    tracker.record_retry("x", "c")
    tracker.record_tool_error("t", RuntimeError("x"))
    assert (tracker.retries, tracker.tool_errors) == (1, 1)


def test_negative_budget_is_rejected() -> None:
    """A negative budget is a configuration bug."""
    with pytest.raises(ValueError, match=r"^budgets must be >= 0"):
        ErrorTracker(max_retries=-1)
