"""StepEnforcer: required steps before terminal tools, prerequisites, separate budgets."""

from __future__ import annotations

import pytest

from forge_rt.core import MessageType, Prerequisite, Role, StepTracker, ToolCall
from forge_rt.errors import PrerequisiteError, StepEnforcementError
from forge_rt.guardrails import StepBlocked, StepEnforcer


def _call(tool: str, call_id: str = "c1", **args: object) -> ToolCall:
    return ToolCall(tool=tool, args=dict(args), call_id=call_id)


def _enforcer(
    tracker: StepTracker | None = None,
    *,
    prerequisites: dict[str, list[Prerequisite | str]] | None = None,
    max_premature: int = 3,
    max_prereq: int = 3,
) -> StepEnforcer:
    return StepEnforcer(
        required_steps=["search", "analyze"],
        terminal_tools=["report"],
        prerequisites=prerequisites or {},
        tracker=tracker if tracker is not None else StepTracker(),
        max_premature=max_premature,
        max_prereq=max_prereq,
    )


def test_premature_terminal_beside_a_step_refuses_only_the_terminal() -> None:
    """A terminal call before the required steps is refused; the step beside it may run."""
    refused = _enforcer().check([_call("search", "c1"), _call("report", "c2")])
    assert isinstance(refused, list)
    [refusal] = refused
    assert (refusal.call.call_id, refusal.reason) == ("c2", "premature_terminal")
    error = refusal.nudge
    assert (error.call_id, error.kind, error.role) == ("c2", MessageType.STEP_NUDGE, Role.TOOL)
    assert error.content == (
        "[StepEnforcementError] `report` cannot run yet, so it was not run: these steps are "
        "not done: `search`, `analyze`. `search` from the same reply runs now (results "
        "follow); then call `analyze`, and `report` last."
    )


def test_premature_terminal_alone_blocks_the_reply() -> None:
    """A reply whose only call is a premature terminal has nothing to run: it is blocked."""
    blocked = _enforcer().check([_call("report", "c2")])
    assert isinstance(blocked, StepBlocked)
    assert (blocked.reason, [e.call_id for e in blocked.errors], blocked.held_back) == (
        "premature_terminal",
        ["c2"],
        [],
    )
    assert blocked.errors[0].content.startswith("[StepEnforcementError] `report` cannot run yet")


def test_premature_nudges_escalate_then_exhaust() -> None:
    """Three blocked replies escalate tiers 1..3; the fourth raises with full context."""
    enforcer = _enforcer()
    tiers = []
    for _ in range(3):
        blocked = enforcer.check([_call("report")])
        assert blocked is not None
        tiers.append(blocked.errors[0].tier)
    assert tiers == [1, 2, 3]
    with pytest.raises(
        StepEnforcementError, match=r"^the model called terminal tool 'report' 4 times in a row"
    ) as info:
        enforcer.check([_call("report")])
    assert (info.value.terminal_tool, info.value.pending_steps, info.value.attempts) == (
        "report",
        ("search", "analyze"),
        4,
    )


def test_terminal_allowed_once_steps_are_done() -> None:
    """After every required step succeeded, the terminal call passes."""
    enforcer = _enforcer()
    enforcer.record(_call("search"))
    enforcer.record(_call("analyze"))
    assert enforcer.check([_call("report")]) is None


def test_pending_lists_only_undone_steps_in_order() -> None:
    """The premature nudge names only what is still pending."""
    enforcer = _enforcer()
    enforcer.record(_call("search"))
    blocked = enforcer.check([_call("report")])
    assert blocked is not None
    assert "`analyze`" in blocked.errors[0].content
    assert "`search`" not in blocked.errors[0].content


def test_success_resets_premature_budget() -> None:
    """A successful call breaks the row of premature terminal calls."""
    enforcer = _enforcer(max_premature=1)
    enforcer.check([_call("report")])
    enforcer.record(_call("search"))
    blocked = enforcer.check([_call("report")])
    assert blocked is not None
    assert (enforcer.premature_count, blocked.errors[0].tier) == (1, 1)


def test_state_lives_in_the_tracker() -> None:
    """A new enforcer over an existing tracker (a resumed run) sees the steps already done."""
    tracker = StepTracker(completed=["search", "analyze"])
    assert _enforcer(tracker).check([_call("report")]) is None


def test_prerequisite_by_name_blocks_until_met() -> None:
    """A tool whose prerequisite has not succeeded is blocked with a [PrereqError]."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]})
    blocked = enforcer.check([_call("analyze", "c9")])
    assert blocked is not None
    assert blocked.reason == "prerequisite"
    [error] = blocked.errors
    assert (error.kind, error.call_id) == (MessageType.PREREQUISITE_NUDGE, "c9")
    assert error.content.startswith("[PrereqError] `analyze` needs `search` to succeed first.")
    enforcer.record(_call("search"))
    assert enforcer.check([_call("analyze")]) is None


def test_prerequisite_by_matching_argument() -> None:
    """With match_arg, the prerequisite must have run with the same argument value."""
    prereq = Prerequisite(tool="mount_volume", match_arg="path")
    tracker = StepTracker()
    enforcer = StepEnforcer([], [], {"read_page": [prereq]}, tracker)
    tracker.record(_call("mount_volume", path="a.txt"))
    assert enforcer.check([_call("read_page", path="a.txt")]) is None
    blocked = enforcer.check([_call("read_page", path="b.txt")])
    assert blocked is not None
    assert 'needs `mount_volume` with path="b.txt"' in blocked.errors[0].content


def test_prerequisite_with_differently_named_argument() -> None:
    """prerequisite_arg names the argument on the prerequisite tool when it differs."""
    prereq = Prerequisite(tool="checkout", match_arg="branch", prerequisite_arg="name")
    tracker = StepTracker()
    enforcer = StepEnforcer([], [], {"commit": [prereq]}, tracker)
    tracker.record(_call("checkout", name="main"))
    assert enforcer.check([_call("commit", branch="main")]) is None
    assert enforcer.check([_call("commit", branch="dev")]) is not None


def test_prerequisite_in_same_reply_runs_and_the_dependent_call_waits() -> None:
    """A prerequisite called in the same reply has not run yet: it runs, the dependent waits."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]})
    refused = enforcer.check([_call("search", "c1"), _call("analyze", "c2")])
    assert isinstance(refused, list)
    [refusal] = refused
    assert (refusal.call.call_id, refusal.reason, refusal.nudge.kind) == (
        "c2",
        "prerequisite",
        MessageType.PREREQUISITE_NUDGE,
    )
    assert refusal.nudge.content == (
        "[PrereqError] `analyze` was not run: it needs `search` to succeed first. `search` from "
        "the same reply runs now (results follow); call `analyze` again once `search` succeeded."
    )


def test_refusals_for_both_rules_keep_the_reply_order() -> None:
    """A premature terminal and an unmet prerequisite are each refused; the free call runs."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]})
    calls = [_call("analyze", "c1"), _call("search", "c2"), _call("report", "c3")]
    refused = enforcer.check(calls)
    assert isinstance(refused, list)
    assert [(r.call.call_id, r.reason) for r in refused] == [
        ("c1", "prerequisite"),
        ("c3", "premature_terminal"),
    ]
    assert (enforcer.premature_count, enforcer.prereq_count) == (1, 1)


def test_prerequisite_budget_exhausts() -> None:
    """The reply after max_prereq blocked ones raises PrerequisiteError with context."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]}, max_prereq=1)
    enforcer.check([_call("analyze")])
    with pytest.raises(PrerequisiteError) as info:
        enforcer.check([_call("analyze")])
    assert (info.value.tool, info.value.missing, info.value.attempts) == ("analyze", "search", 2)


def test_budgets_are_separate() -> None:
    """Premature-terminal and prerequisite rows are counted separately."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]})
    enforcer.check([_call("report")])
    enforcer.check([_call("report")])
    enforcer.check([_call("analyze")])
    assert (enforcer.premature_count, enforcer.prereq_count) == (2, 1)


def test_premature_is_checked_before_prerequisites() -> None:
    """A batch with both problems is blocked for the premature terminal call."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]})
    blocked = enforcer.check([_call("analyze", "c1"), _call("report", "c2")])
    assert blocked is not None
    assert blocked.reason == "premature_terminal"


def test_string_prerequisites_are_normalised() -> None:
    """Plain tool names become Prerequisite objects."""
    enforcer = _enforcer(prerequisites={"analyze": ["search"]})
    assert enforcer.prerequisites == {"analyze": (Prerequisite(tool="search"),)}


def test_self_prerequisite_is_rejected() -> None:
    """A tool cannot be its own prerequisite."""
    with pytest.raises(ValueError, match=r"^tool 'a' lists itself as a prerequisite$"):
        StepEnforcer([], [], {"a": ["a"]}, StepTracker())


def test_terminal_required_step_is_rejected() -> None:
    """A tool cannot be both terminal and required before the terminal."""
    with pytest.raises(ValueError, match=r"cannot be both terminal and a required step$"):
        StepEnforcer(["report"], ["report"], {}, StepTracker())
