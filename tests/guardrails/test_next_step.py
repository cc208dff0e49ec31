"""Repeats and loops point at the call that moves the task on, saying what its arguments are.

No example values: the real 0.5B copied ``<name>`` placeholders from such examples into other
tools' arguments.
"""

from __future__ import annotations

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import Execute, Guardrails, StepBlocked, ToolResult

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _guard() -> Guardrails:
    tools = [
        ToolSpec(name="get_air_quality", parameters=CITY),
        ToolSpec(name="get_local_hour", parameters=CITY),
    ]
    return Guardrails(
        tools, required_steps=["get_air_quality", "get_local_hour"], respond_tool=True
    )


def _run(guard: Guardrails, call: ToolCall, output: str) -> str:
    action = guard.check([call])
    assert isinstance(action, Execute)
    outcome = guard.record([ToolResult(call=action.calls[0], output=output)])
    return outcome.messages[0].content


def test_next_step_is_the_first_pending_step_then_respond() -> None:
    """next_step names a pending required step first (its arguments described, no placeholder
    values), then the respond tool."""
    guard = _guard()
    assert guard.next_step() == "Next, call `get_air_quality` with `city`: a string."
    assert guard.next_step(avoid="get_air_quality").startswith("Next, call `get_local_hour`")
    _run(guard, ToolCall(tool="get_air_quality", args={"city": "Turku"}), "3C")
    _run(guard, ToolCall(tool="get_local_hour", args={"city": "Turku"}), "09:35")
    assert guard.next_step().startswith("Now answer the user with the facts from the results")
    assert "call `respond` with your answer in `message`" in guard.next_step()
    assert "<" not in guard.next_step()


def test_a_repeated_successful_call_gets_a_note_with_the_next_step() -> None:
    """Running the same call again returns its result plus a note pointing at the next step."""
    guard = _guard()
    call = ToolCall(tool="get_air_quality", args={"city": "Turku"})
    assert _run(guard, call, "3C") == "3C"
    again = _run(guard, ToolCall(tool="get_air_quality", args={"city": "Turku"}), "3C")
    assert again.startswith("3C\n[Note] You already called `get_air_quality` with these arguments")
    assert "Next, call `get_local_hour`" in again


def test_loop_nudge_names_the_next_step() -> None:
    """The third identical reply is blocked with a loop error that says what to call instead."""
    guard = _guard()
    for _ in range(2):
        _run(guard, ToolCall(tool="get_air_quality", args={"city": "Turku"}), "3C")
    blocked = guard.check([ToolCall(tool="get_air_quality", args={"city": "Turku"})])
    assert isinstance(blocked, StepBlocked)
    assert blocked.reason == "loop"
    assert "Next, call `get_local_hour` with `city`: a string." in blocked.errors[0].content


def test_the_same_tool_again_names_the_missing_step_or_the_answer() -> None:
    """A tool run again right after it succeeded names the step still required; once every
    step is done, it says the task may be finished and names the answer."""
    guard = _guard()
    assert _run(guard, ToolCall(tool="get_air_quality", args={"city": "Turku"}), "3C") == "3C"
    again = _run(guard, ToolCall(tool="get_air_quality", args={"city": "Bergen"}), "9C")
    assert again == (
        "9C\n[Note] `get_air_quality` ran again; still required: `get_local_hour`. "
        "Next, call `get_local_hour` with `city`: a string."
    )
    assert _run(guard, ToolCall(tool="get_local_hour", args={"city": "Turku"}), "09:35") == "09:35"
    done = _run(guard, ToolCall(tool="get_local_hour", args={"city": "Bergen"}), "09:35")
    assert done.startswith("09:35\n[Note] `get_local_hour` ran again; every required step is done.")
    assert "call `respond` with your answer in `message`" in done


def test_after_three_batches_without_progress_only_the_pending_steps_are_callable() -> None:
    """Three batches in a row that complete no pending step leave only the pending steps
    callable; completing one restores the normal choice."""
    tools = [
        ToolSpec(name="get_air_quality", parameters=CITY),
        ToolSpec(name="get_local_hour", parameters=CITY),
        ToolSpec(name="get_headlines", parameters=CITY),
    ]
    guard = Guardrails(tools, required_steps=["get_local_hour"], respond_tool=True)

    def names() -> list[str]:
        return [t.name for t in guard.callable_now()]

    for city in ("Turku", "Bergen"):
        _run(guard, ToolCall(tool="get_headlines", args={"city": city}), "quiet")
        assert names() == ["get_air_quality", "get_local_hour", "get_headlines"]
    _run(guard, ToolCall(tool="get_air_quality", args={"city": "Turku"}), "3C")
    assert names() == ["get_local_hour"]
    _run(guard, ToolCall(tool="get_local_hour", args={"city": "Turku"}), "09:35")
    assert names() == ["get_air_quality", "get_local_hour", "get_headlines", "respond"]


def test_a_loop_with_steps_pending_leaves_only_the_pending_steps() -> None:
    """The real 0.5B, asked for KRYL's price, sent the same send_memo after the loop guard
    blocked it: the pending step is all that is left until it is done."""
    tools = [
        ToolSpec(name="get_headlines", parameters=CITY),
        ToolSpec(name="get_local_hour", parameters=CITY),
    ]
    guard = Guardrails(tools, required_steps=["get_local_hour"], respond_tool=True)
    news = ToolCall(tool="get_headlines", args={"city": "Turku"})
    for _ in range(2):
        _run(guard, news, "quiet")
    assert [t.name for t in guard.callable_now()] == ["get_headlines", "get_local_hour"]
    assert isinstance(guard.check([news]), StepBlocked)
    assert [t.name for t in guard.callable_now()] == ["get_local_hour"]
    _run(guard, ToolCall(tool="get_local_hour", args={"city": "Turku"}), "09:35")
    assert [t.name for t in guard.callable_now()] == ["get_headlines", "get_local_hour", "respond"]


TARGET = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}


def _release() -> Guardrails:
    """A chain of prerequisites: ``deploy`` ends the task and needs ``build``, which needs
    ``run_checks``; ``respond`` is offered beside, and does not end it."""
    tools = [
        ToolSpec(name="run_checks", parameters=TARGET),
        ToolSpec(name="build", parameters=TARGET),
        ToolSpec(name="deploy", parameters=TARGET),
    ]
    return Guardrails(
        tools,
        terminal_tools=["deploy"],
        prerequisites={"build": ["run_checks"], "deploy": ["build"]},
        respond_tool=True,
    )


def test_next_step_names_what_the_terminal_waits_for() -> None:
    """With no required step pending, the next step is the terminal's first unmet prerequisite,
    followed down its chain; the terminal itself once they have succeeded."""
    guard = _release()
    assert guard.next_step().startswith("Next, call `run_checks`")
    _run(guard, ToolCall(tool="run_checks", args={"target": "app"}), "42 tests passed")
    assert guard.next_step().startswith("Next, call `build`")
    assert guard.next_step(avoid="build").startswith("Now finish with `deploy`")
    _run(guard, ToolCall(tool="build", args={"target": "app"}), "app-2.9.6.tar")
    assert guard.next_step().startswith("Now finish with `deploy`")


def test_a_respond_that_does_not_end_the_task_says_so() -> None:
    """A mid-task message to the user comes back with a note that the task is still open and
    what to call next (its own words alone read as "done" to small models)."""
    guard = _release()
    out = _run(guard, ToolCall(tool="respond", args={"message": "The app is released."}), "")
    assert "[Note] This message was shown to the user, but the task is not finished" in out
    assert "it ends with `deploy`" in out
    assert "Next, call `run_checks`" in out
    assert guard.next_step().startswith("Next, call `run_checks`")


def _names(specs: tuple[ToolSpec, ...]) -> set[str]:
    return {s.name for s in specs}


def test_respond_is_not_offered_again_once_shown_in_a_task_it_does_not_end() -> None:
    """After a mid-task message the constraint leaves ``respond`` out for the rest of the turn
    (the real 0.5B sent it again and again, echoing the note); a new turn offers it again."""
    guard = _release()
    assert "respond" in _names(guard.callable_now())
    _run(guard, ToolCall(tool="respond", args={"message": "Working on it."}), "")
    assert _names(guard.callable_now()) == {"run_checks"}
    _run(guard, ToolCall(tool="run_checks", args={"target": "app"}), "42 tests passed")
    assert "respond" not in _names(guard.callable_now())
    guard.new_turn("And now?")
    assert "respond" in _names(guard.callable_now())


def test_respond_stays_offered_where_it_ends_the_task() -> None:
    """Where ``respond`` is the terminal, answering is the task: it is never taken away."""
    guard = _guard()
    _run(guard, ToolCall(tool="get_air_quality", args={"city": "Turku"}), "3C")
    _run(guard, ToolCall(tool="get_local_hour", args={"city": "Turku"}), "09:35")
    assert "respond" in _names(guard.callable_now())
