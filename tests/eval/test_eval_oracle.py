"""Scenario oracles model a perfect model: retry nudges and unplanned calls do not derail the plan."""

from __future__ import annotations

from forge_rt.backends.sim import RequestView, ViewMessage, ViewToolCall
from forge_rt.eval.scenarios._kit import call, plan_oracle

PLAN_1 = [call("get_weather", city="Paris"), call("respond", message="Paris: 18C")]
PLAN_2 = [call("get_weather", city="Rome"), call("respond", message="Rome: 24C")]


def _view(*messages: ViewMessage) -> RequestView:
    return RequestView(
        api="openai",
        conversation="c",
        turn=sum(m.role == "assistant" for m in messages),
        messages=(ViewMessage(role="system", content="be precise"), *messages),
    )


def _user(text: str) -> ViewMessage:
    return ViewMessage(role="user", content=text)


def _calls(name: str, call_id: str) -> ViewMessage:
    return ViewMessage(role="assistant", tool_calls=(ViewToolCall(call_id, name, "{}"),))


def _result(call_id: str, text: str) -> ViewMessage:
    return ViewMessage(role="tool", content=text, tool_call_id=call_id)


def test_a_retry_nudge_continues_the_plan_where_it_stands() -> None:
    """After a done step, a rejected text reply and a user-channel nudge, the next step follows."""
    oracle = plan_oracle(PLAN_1, PLAN_2)
    view = _view(
        _user("Weather in Paris?"),
        _calls("get_weather", "1"),
        _result("1", "Weather in Paris: 18C"),
        ViewMessage(role="assistant", content="I will answer now."),
        _user("Please call one of the tools: `get_weather`, `respond`."),
    )
    assert PLAN_1[1] == oracle(view)


def test_a_new_user_turn_after_a_finished_turn_starts_the_next_plan() -> None:
    """Once a turn's plan is done, the next user message is the next turn."""
    oracle = plan_oracle(PLAN_1, PLAN_2)
    view = _view(
        _user("Weather in Paris?"),
        _calls("get_weather", "1"),
        _result("1", "Weather in Paris: 18C"),
        _calls("respond", "2"),
        _result("2", "Paris: 18C"),
        _user("And in Rome?"),
    )
    assert PLAN_2[0] == oracle(view)


def test_an_unplanned_successful_call_does_not_advance_the_plan() -> None:
    """A premature respond that ran as an ordinary tool leaves the plan's next step pending."""
    oracle = plan_oracle([call("fetch", q=1), call("report", findings="x")])
    view = _view(_user("Report."), _calls("respond", "1"), _result("1", "done"))
    assert call("fetch", q=1) == oracle(view)


def test_failed_results_do_not_count_as_done() -> None:
    """A tool error result leaves the step to be retried."""
    oracle = plan_oracle(PLAN_1)
    view = _view(
        _user("Weather in Paris?"),
        _calls("get_weather", "1"),
        _result("1", "[ToolResolutionError] unknown city"),
    )
    assert PLAN_1[0] == oracle(view)
