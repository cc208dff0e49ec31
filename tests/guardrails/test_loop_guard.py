"""LoopGuard: the same call in reply after reply gets a nudge, then a typed error."""

from __future__ import annotations

import pytest

from forge_rt.core import MessageType, Role, ToolCall
from forge_rt.errors import ToolLoopError
from forge_rt.guardrails import LoopGuard


def _call(tool: str = "search", call_id: str = "c1", **args: object) -> ToolCall:
    return ToolCall(tool=tool, args=dict(args) or {"q": "x"}, call_id=call_id)


def test_third_identical_call_is_blocked_with_loop_nudge() -> None:
    """Two identical replies run; the third is blocked with a tool-channel loop nudge."""
    guard = LoopGuard()
    assert guard.observe([_call()]) is None
    assert guard.observe([_call()]) is None
    blocked = guard.observe([_call(call_id="c3")])
    assert blocked is not None
    assert blocked.reason == "loop"
    [error] = blocked.errors
    assert (error.role, error.kind, error.call_id, error.tier) == (
        Role.TOOL,
        MessageType.STEP_NUDGE,
        "c3",
        3,
    )
    assert error.content.startswith('[LoopError] You called `search` with {"q": "x"} 3 times')


def test_fourth_identical_call_raises() -> None:
    """After the loop nudge, one more identical reply raises ToolLoopError with context."""
    guard = LoopGuard()
    for _ in range(3):
        guard.observe([_call()])
    with pytest.raises(ToolLoopError, match=r"^the model called 'search' with") as info:
        guard.observe([_call()])
    assert (info.value.tool, info.value.args_repr, info.value.repeats) == (
        "search",
        '{"q":"x"}',
        4,
    )


def test_different_reply_breaks_the_row() -> None:
    """A reply without the call resets its count."""
    guard = LoopGuard()
    guard.observe([_call()])
    guard.observe([_call()])
    guard.observe([_call(q="other")])
    assert guard.observe([_call()]) is None
    assert guard.streak(_call()) == 1


def test_argument_order_does_not_hide_a_loop() -> None:
    """The same arguments in another key order are the same call."""
    guard = LoopGuard(max_repeats=2)
    guard.observe([ToolCall(tool="t", args={"a": 1, "b": 2})])
    assert guard.observe([ToolCall(tool="t", args={"b": 2, "a": 1})]) is not None


def test_loop_in_a_batch_blocks_the_whole_batch() -> None:
    """A looping call blocks its reply; the other call is held back, not run."""
    guard = LoopGuard(max_repeats=2)
    guard.observe([_call()])
    blocked = guard.observe([_call(call_id="a"), _call("fetch", "b", url="u")])
    assert blocked is not None
    assert ([e.call_id for e in blocked.errors], [h.call_id for h in blocked.held_back]) == (
        ["a"],
        ["b"],
    )


def test_repeated_batches_are_tracked_per_call() -> None:
    """A two-call batch sent again and again trips the guard for each of its calls."""
    guard = LoopGuard(max_repeats=2)
    batch = [_call(call_id="a"), _call("fetch", "b", url="u")]
    guard.observe(batch)
    blocked = guard.observe(batch)
    assert blocked is not None
    assert [e.call_id for e in blocked.errors] == ["a", "b"]


def test_reset_forgets_rows() -> None:
    """After reset, counting starts again."""
    guard = LoopGuard(max_repeats=2)
    guard.observe([_call()])
    guard.reset()
    assert (guard.observe([_call()]), guard.longest_streak) == (None, 1)


def test_max_repeats_below_two_is_rejected() -> None:
    """A limit of 1 would block every call."""
    with pytest.raises(ValueError, match=r"^max_repeats must be >= 2"):
        LoopGuard(max_repeats=1)
