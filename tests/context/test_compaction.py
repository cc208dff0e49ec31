"""Compaction strategies on real-shaped histories: each phase, placeholders, windows."""

from __future__ import annotations

import pytest
from ctx_histories import (
    WEATHER_JSON,
    call,
    orphaned_calls,
    reasoning,
    retry_nudge,
    tool_nudge,
)

from forge_rt.context import (
    CompactResult,
    CompactStrategy,
    NoCompact,
    SlidingWindowCompact,
    TieredCompact,
    TokenEstimator,
    protected_window_start,
    unanswered_calls,
)
from forge_rt.core import Message, MessageType, Role

STEP_TEXT = (
    "[StepEnforcementError] report cannot run yet: the required steps get_forecast and "
    "get_weather have not completed. Call them first, then call report again."
)

C1 = call("get_weather", "c1", city="Paris")
C2 = call("report", "c2", summary="rain")
C3 = call("get_forecast", "c3", city="Paris", days=12)
C4 = call("get_weather", "c4", city="Lyon")
C5 = call("get_weather", "c5", city="Nice")
C6 = call("report", "c6", summary="rain in Paris, sun in Nice")

SYSTEM = Message.system("You are a weather assistant. Use the tools, then call report.")
USER = Message.user("What is the weather in Paris this week, and in Nice?")
THINK = reasoning("I should look up Paris first, then the forecast, then Nice.")
CALL1 = Message.assistant_calls([C1])
RESULT1 = Message.tool_result(C1, WEATHER_JSON)
TEXT2 = Message.assistant_text("It will rain in Paris. report(summary='rain')")
NUDGE2 = retry_nudge()
CALL3 = Message.assistant_calls([C2])
NUDGE3 = tool_nudge(MessageType.STEP_NUDGE, C2, STEP_TEXT)
CALL4 = Message.assistant_calls([C3, C4])
RESULT4A = Message.tool_result(C3, WEATHER_JSON)
RESULT4B = Message.tool_result(C4, "ok")
CALL5 = Message.assistant_calls([C5])
RESULT5 = Message.tool_result(C5, WEATHER_JSON)
CALL6 = Message.assistant_calls([C6])
RESULT6 = Message.tool_result(C6, "report delivered")

HISTORY = [
    SYSTEM,
    USER,
    THINK,
    CALL1,
    RESULT1,
    TEXT2,
    NUDGE2,
    CALL3,
    NUDGE3,
    CALL4,
    RESULT4A,
    RESULT4B,
    CALL5,
    RESULT5,
    CALL6,
    RESULT6,
]
WINDOW = [CALL5, RESULT5, CALL6, RESULT6]


def truncated(text: str, limit: int = 200) -> str:
    return f"{text[:limit]}… [{len(text) - limit} more characters dropped to save context]"


def placeholder(tool: str) -> str:
    return f"[result of {tool} dropped to save context; call it again if needed]"


def rejected(tool: str) -> str:
    return f"[this {tool} call was not executed; the reason was dropped to save context]"


def shape(messages: list[Message]) -> list[tuple[str, str, str | None]]:
    """Type, content and answered call id of each message, for readable comparisons."""
    return [(m.type.value, m.content, m.tool_call_id) for m in messages]


@pytest.fixture
def estimator() -> TokenEstimator:
    return TokenEstimator()


def tiered(target: int, estimator: TokenEstimator, **kw: int) -> CompactResult:
    return TieredCompact(**kw).compact(HISTORY, target, estimator)


def test_strategies_satisfy_the_protocol() -> None:
    """The three built-in strategies are CompactStrategy instances."""
    for strategy in (NoCompact(), SlidingWindowCompact(), TieredCompact()):
        assert isinstance(strategy, CompactStrategy)


def test_fixture_history_is_well_formed() -> None:
    """The hand-built history answers every call (so any orphan later is compaction's doing)."""
    assert orphaned_calls(HISTORY) == []
    assert unanswered_calls(HISTORY) == []


def test_under_target_is_phase_zero_and_unchanged(estimator: TokenEstimator) -> None:
    """A history already under the target comes back as it is, phase 0."""
    before = estimator.count_messages(HISTORY)
    result = tiered(before, estimator)
    assert (0, before, before, 0, 0) == (
        result.phase,
        result.tokens_before,
        result.tokens_after,
        result.dropped,
        result.truncated,
    )
    assert result.messages == HISTORY


def test_phase_one_drops_nudges_and_truncates_old_results(estimator: TokenEstimator) -> None:
    """Phase 1: nudges go (a nudge that is a call's only answer becomes a placeholder), old
    results are cut to 200 characters with a marker, reasoning and text stay."""
    before = estimator.count_messages(HISTORY)
    result = tiered(before - 1, estimator)
    assert result.phase == 1
    assert [
        ("system_prompt", SYSTEM.content, None),
        ("user_input", USER.content, None),
        ("reasoning", THINK.content, None),
        ("tool_call", "", None),
        ("tool_result", truncated(WEATHER_JSON), "c1"),
        ("text_response", TEXT2.content, None),
        ("tool_call", "", None),
        ("tool_result", rejected("report"), "c2"),
        ("tool_call", "", None),
        ("tool_result", truncated(WEATHER_JSON), "c3"),
        ("tool_result", "ok", "c4"),
    ] == shape(result.messages[:-4])
    assert result.messages[-4:] == WINDOW
    assert (result.dropped, result.truncated) == (2, 2)
    assert estimator.count_messages(result.messages) == result.tokens_after < before


def test_phase_two_replaces_old_results_with_placeholders(estimator: TokenEstimator) -> None:
    """Phase 2: old results become placeholders naming the tool; a result already cheaper than
    its placeholder stays; reasoning and text responses are preserved."""
    phase1 = tiered(estimator.count_messages(HISTORY) - 1, estimator)
    result = tiered(phase1.tokens_after - 1, estimator)
    assert result.phase == 2
    assert [
        ("system_prompt", SYSTEM.content, None),
        ("user_input", USER.content, None),
        ("reasoning", THINK.content, None),
        ("tool_call", "", None),
        ("tool_result", placeholder("get_weather"), "c1"),
        ("text_response", TEXT2.content, None),
        ("tool_call", "", None),
        ("tool_result", rejected("report"), "c2"),
        ("tool_call", "", None),
        ("tool_result", placeholder("get_forecast"), "c3"),
        ("tool_result", "ok", "c4"),
    ] == shape(result.messages[:-4])
    assert result.messages[-4:] == WINDOW
    assert (result.dropped, result.truncated) == (4, 0)


def test_phase_three_keeps_only_calls_before_the_window(estimator: TokenEstimator) -> None:
    """Phase 3: reasoning and text responses go too; what is left before the window is the
    system prompt, the user turn and the tool calls with their (placeholder) answers."""
    result = tiered(0, estimator)
    assert result.phase == 3
    assert [
        ("system_prompt", SYSTEM.content, None),
        ("user_input", USER.content, None),
        ("tool_call", "", None),
        ("tool_result", placeholder("get_weather"), "c1"),
        ("tool_call", "", None),
        ("tool_result", rejected("report"), "c2"),
        ("tool_call", "", None),
        ("tool_result", placeholder("get_forecast"), "c3"),
        ("tool_result", "ok", "c4"),
    ] == shape(result.messages[:-4])
    assert result.messages[-4:] == WINDOW
    assert (result.dropped, result.truncated) == (6, 0)
    assert result.tokens_after > 0


def test_placeholder_keeps_the_pairing_fields(estimator: TokenEstimator) -> None:
    """A placeholder is a TOOL_RESULT on the tool role that answers the same call id."""
    result = tiered(0, estimator)
    stand_in = next(m for m in result.messages if m.tool_call_id == "c2")
    assert (
        stand_in.role,
        stand_in.type,
        stand_in.tool_name,
    ) == (Role.TOOL, MessageType.TOOL_RESULT, "report")
    assert orphaned_calls(result.messages) == []


def test_assistant_calls_are_never_cut(estimator: TokenEstimator) -> None:
    """Every assistant tool-call message survives phase 3 unchanged, in order."""
    result = tiered(0, estimator)
    calls = [m for m in HISTORY if m.tool_calls]
    assert calls == [m for m in result.messages if m.tool_calls]


def test_truncated_results_are_not_truncated_again(estimator: TokenEstimator) -> None:
    """A result truncated by an earlier phase 1 is left as it is by the next phase 1."""
    already = Message.tool_result(C1, truncated(WEATHER_JSON))
    history = [SYSTEM, USER, CALL1, already, TEXT2, NUDGE2, CALL5, RESULT5]
    result = TieredCompact(keep_recent=1).compact(
        history, estimator.count_messages(history) - 1, estimator
    )
    assert (result.phase, result.dropped, result.truncated) == (1, 1, 0)
    assert already in result.messages


def test_short_results_are_not_truncated(estimator: TokenEstimator) -> None:
    """A result within truncate_chars plus the marker's allowance is left whole in phase 1."""
    short = Message.tool_result(C1, "x" * 250)
    history = [SYSTEM, USER, CALL1, short, TEXT2, NUDGE2, CALL5, RESULT5]
    result = TieredCompact(keep_recent=1).compact(
        history, estimator.count_messages(history) - 1, estimator
    )
    assert (result.phase, result.truncated) == (1, 0)
    assert short in result.messages


def test_truncate_chars_sets_the_kept_prefix(estimator: TokenEstimator) -> None:
    """truncate_chars=50 keeps the first 50 characters of an old result."""
    result = tiered(estimator.count_messages(HISTORY) - 1, estimator, truncate_chars=50)
    assert truncated(WEATHER_JSON, 50) == result.messages[4].content


def test_keep_recent_zero_compacts_everything(estimator: TokenEstimator) -> None:
    """With keep_recent=0 the latest iteration is eligible too."""
    result = tiered(0, estimator, keep_recent=0)
    assert placeholder("get_weather") == result.messages[-3].content
    assert result.messages[-1].content == "report delivered"  # cheaper than its placeholder


def test_window_larger_than_history_changes_nothing(estimator: TokenEstimator) -> None:
    """When every iteration is protected there is nothing to cut: phase 0, same history."""
    result = tiered(0, estimator, keep_recent=10)
    assert (result.phase, result.messages) == (0, HISTORY)
    assert result.tokens_before == result.tokens_after


def test_reasoning_and_its_call_form_one_iteration() -> None:
    """Six iterations: the window of 6 starts at the reasoning before the first call."""
    assert HISTORY.index(THINK) == protected_window_start(HISTORY, 6)
    assert HISTORY.index(TEXT2) == protected_window_start(HISTORY, 5)
    assert HISTORY.index(CALL5) == protected_window_start(HISTORY, 2)
    assert len(HISTORY) == protected_window_start(HISTORY, 0)


def test_a_call_answered_twice_needs_no_placeholder(estimator: TokenEstimator) -> None:
    """In phase 1 a nudge is dropped outright when a result still answers the same call; when
    both go, the result's placeholder is the one kept."""
    nudge = tool_nudge(MessageType.PREREQUISITE_NUDGE, C1, "[PrereqError] call login first. " * 3)
    history = [SYSTEM, USER, CALL1, nudge, RESULT1, CALL5, RESULT5]
    result = TieredCompact(keep_recent=1).compact(
        history, estimator.count_messages(history) - 1, estimator
    )
    assert [("tool_result", truncated(WEATHER_JSON), "c1")] == shape(
        [m for m in result.messages if m.tool_call_id == "c1"]
    )
    two_gone = TieredCompact(keep_recent=1).compact(history, 0, estimator)
    assert [("tool_result", placeholder("get_weather"), "c1")] == shape(
        [m for m in two_gone.messages if m.tool_call_id == "c1"]
    )


def test_tiered_rejects_negative_settings() -> None:
    """Negative keep_recent or truncate_chars is refused with the field named."""
    with pytest.raises(ValueError, match=r"^TieredCompact keep_recent must be >= 0, got -1$"):
        TieredCompact(keep_recent=-1)
    with pytest.raises(ValueError, match=r"^TieredCompact truncate_chars must be >= 0, got -5$"):
        TieredCompact(truncate_chars=-5)


def test_sliding_window_drops_old_iterations_whole(estimator: TokenEstimator) -> None:
    """Over the target, iterations older than the window go with their calls and results;
    system prompt and user turns stay."""
    later_user = Message.user("And Nice?")
    history = [*HISTORY[:7], later_user, *HISTORY[7:]]
    result = SlidingWindowCompact(keep_recent=2).compact(history, 0, estimator)
    assert [SYSTEM, USER, later_user, *WINDOW] == result.messages
    assert (result.phase, result.dropped) == (1, 10)
    assert estimator.count_messages(result.messages) == result.tokens_after
    assert orphaned_calls(result.messages) == []


def test_sliding_window_under_target_is_unchanged(estimator: TokenEstimator) -> None:
    """Under the target, the sliding window cuts nothing."""
    result = SlidingWindowCompact().compact(HISTORY, 10**6, estimator)
    assert (result.phase, result.messages) == (0, HISTORY)


def test_sliding_window_rejects_negative_window() -> None:
    """A negative window is refused."""
    with pytest.raises(
        ValueError, match=r"^SlidingWindowCompact keep_recent must be >= 0, got -2$"
    ):
        SlidingWindowCompact(keep_recent=-2)


def test_no_compact_returns_the_history(estimator: TokenEstimator) -> None:
    """NoCompact never cuts, even far over the target, and reports the estimate."""
    result = NoCompact().compact(HISTORY, 0, estimator)
    tokens = estimator.count_messages(HISTORY)
    assert (HISTORY, 0, tokens, tokens) == (
        result.messages,
        result.phase,
        result.tokens_before,
        result.tokens_after,
    )


def test_unanswered_calls_lists_missing_answers() -> None:
    """unanswered_calls names each call id left without a tool message before the next turn."""
    history = [SYSTEM, USER, CALL4, RESULT4A, CALL5, RESULT5, CALL6]
    assert unanswered_calls(history) == ["c4", "c6"]
