"""Guardrails driving a hand-written loop over scripted replies, end to end, without a server."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from pydantic import BaseModel

from forge_rt.core import (
    LLMResponse,
    Message,
    MessageType,
    Prerequisite,
    Role,
    TextResponse,
    ToolCall,
    ToolSpec,
)
from forge_rt.errors import ForgeError, ToolLoopError, ToolResolutionError
from forge_rt.guardrails import Execute, Fatal, GuardrailOptions, Guardrails, TextAnswer, ToolResult


class City(BaseModel):
    city: str


class Convert(BaseModel):
    city: str
    celsius: float


class Summary(BaseModel):
    summary: str


WEATHER = ToolSpec(name="get_conditions", parameters=City)
CONVERT = ToolSpec(name="to_fahrenheit", parameters=Convert)
REPORT = ToolSpec(name="report", parameters=Summary)


class Outcome(msgspec.Struct):
    history: list[Message]
    trace: list[str]
    answer: str | None = None
    error: ForgeError | None = None


def run_loop(
    guard: Guardrails,
    replies: Iterable[LLMResponse],
    tools: dict[str, Callable[..., str]],
) -> Outcome:
    """The loop a user would write around check()/record(), fed scripted replies."""
    out = Outcome(
        history=[Message.user("Weather report for Turku in Fahrenheit, please.")], trace=[]
    )
    for reply in replies:
        action = guard.check(reply)
        out.trace.append(type(action).__name__)
        out.history.extend(action.messages())
        if isinstance(action, Fatal):
            out.error = action.error
            return out
        if isinstance(action, TextAnswer):
            out.answer = action.text
            return out
        if not isinstance(action, Execute):
            continue
        results = []
        for call in action.calls:
            try:
                results.append(ToolResult(call=call, output=tools[call.tool](**call.args)))
            except (OSError, ToolResolutionError) as exc:  # the tools below raise only these
                results.append(ToolResult(call=call, error=exc))
        recorded = guard.record(results)
        out.history.extend(recorded.messages)
        if recorded.fatal is not None:
            out.error = recorded.fatal
            return out
        if recorded.done:
            out.answer = recorded.terminal_output
            return out
    raise AssertionError(f"script ran out before the run ended: {out.trace}")


def calls(*specs: tuple[str, dict[str, Any]]) -> LLMResponse:
    return LLMResponse(result=[ToolCall(tool=name, args=args) for name, args in specs])


def text(content: str) -> LLMResponse:
    return LLMResponse(result=TextResponse(content=content), raw_text=content)


def make_tools() -> dict[str, Callable[..., str]]:
    flaky = iter([OSError("weather service timed out")])

    def get_conditions(city: str) -> str:
        failure = next(flaky, None)
        if failure is not None:
            raise failure
        return f"{city}: 4.0 C, light rain"

    seen_units: list[float] = []

    def to_fahrenheit(city: str, celsius: float) -> str:
        if not seen_units:
            seen_units.append(celsius)
            raise ToolResolutionError("celsius looks like a reading from another city; re-check")
        return f"{city}: {celsius * 9 / 5 + 32:.1f} F"

    def report(summary: str) -> str:
        return f"filed: {summary}"

    return {"get_conditions": get_conditions, "to_fahrenheit": to_fahrenheit, "report": report}


def make_guard(**options: Any) -> Guardrails:
    return Guardrails(
        [WEATHER, CONVERT, REPORT],
        required_steps=["get_conditions", "to_fahrenheit"],
        terminal_tools=["report"],
        prerequisites={"to_fahrenheit": [Prerequisite(tool="get_conditions", match_arg="city")]},
        options=GuardrailOptions(rescue=False, **options),
    )


def test_scripted_run_recovers_from_every_kind_of_mistake() -> None:
    """Text, premature terminal, unknown tool, unmet prerequisite, a 20x repeated call, a tool
    failure and a resolution error are each corrected, and the run still completes."""
    guard = make_guard()
    turku = {"city": "Turku"}
    script = [
        text("Sure, I will check the weather for you."),
        calls(("report", {"summary": "Turku is 40 F"})),
        calls(("get_conditons", turku)),
        calls(("to_fahrenheit", {"city": "Turku", "celsius": 4})),
        calls(*[("get_conditions", turku)] * 20),
        calls(("get_conditions", turku)),
        calls(("to_fahrenheit", {"city": "Turku", "celsius": "4"})),
        calls(("to_fahrenheit", {"city": "Turku", "celsius": 4.0})),
        calls(("report", {"summary": "Turku: 39.2 F, light rain"})),
    ]
    out = run_loop(guard, script, make_tools())
    assert out.trace == [
        "RetryWithNudge",
        "StepBlocked",
        "ToolErrors",
        "StepBlocked",
        "Execute",
        "Execute",
        "Execute",
        "Execute",
        "Execute",
    ]
    assert (out.answer, out.error) == ("filed: Turku: 39.2 F, light rain", None)
    assert guard.tracker.completed_steps == ("get_conditions", "to_fahrenheit", "report")
    kept = [(m.role, m.type) for m in out.history if not m.transient]
    assert kept == [
        (Role.USER, MessageType.USER_INPUT),
        *[(Role.ASSISTANT, MessageType.TOOL_CALL), (Role.TOOL, MessageType.TOOL_RESULT)] * 5,
    ]
    corrections = [m.type for m in out.history if m.transient and m.role is not Role.ASSISTANT]
    assert corrections == [
        MessageType.RETRY_NUDGE,
        MessageType.STEP_NUDGE,
        MessageType.RETRY_NUDGE,
        MessageType.PREREQUISITE_NUDGE,
    ]
    results = [m.content for m in out.history if m.type is MessageType.TOOL_RESULT]
    assert results[0].startswith("[ToolError] `get_conditions` failed: OSError")
    assert results[2].startswith("[ToolResolutionError] `to_fahrenheit`")


def test_every_tool_message_answers_a_call_of_the_turn_before_it() -> None:
    """The rendered history is well-formed: each tool message pairs with its assistant turn."""
    out = run_loop(
        make_guard(),
        [
            calls(("get_conditons", {"city": "Turku"}), ("report", {"summary": "x"})),
            calls(("get_conditions", {"city": "Turku"})),
            calls(("get_conditions", {"city": "Turku"})),
            calls(("to_fahrenheit", {"city": "Turku", "celsius": 4})),
            calls(("to_fahrenheit", {"city": "Turku", "celsius": 4})),
            calls(("report", {"summary": "done"})),
        ],
        make_tools(),
    )
    assert out.answer == "filed: done"
    open_ids: set[str] = set()
    for msg in out.history:
        if msg.tool_calls is not None:
            assert not open_ids, "a new assistant turn before every call was answered"
            open_ids = {c.call_id for c in msg.tool_calls}
        elif msg.role is Role.TOOL:
            assert msg.tool_call_id in open_ids
            open_ids.discard(msg.tool_call_id or "")
    assert not open_ids


def test_scripted_loop_is_stopped_by_the_loop_guard() -> None:
    """A model re-sending one call gets a loop nudge, then the run ends with ToolLoopError."""
    script = [calls(("get_conditions", {"city": "Turku"}))] * 6
    tools = make_tools()
    tools["get_conditions"] = lambda city: f"{city}: 4.0 C"
    out = run_loop(make_guard(), script, tools)
    assert out.trace == ["Execute", "Execute", "StepBlocked", "Fatal"]
    assert isinstance(out.error, ToolLoopError)
    assert out.history[-1].content.startswith("[LoopError] You called `get_conditions`")


def test_a_loop_of_a_failing_call_is_told_the_tools_own_reason() -> None:
    """The real models re-sent ``get_census(city="Geelong")`` after "only capitals
    (Karelia's is Vantor)": the loop nudge for a call that failed each time quotes that
    error, and does not point at the terminal tool while the failing step is still to do."""

    def get_conditions(city: str) -> str:
        raise ToolResolutionError(f"no data for {city!r}; this dataset only has capitals")

    tools = make_tools()
    tools["get_conditions"] = get_conditions
    script = [calls(("get_conditions", {"city": "Geelong"}))] * 4
    out = run_loop(make_guard(), script, tools)
    assert out.trace == ["Execute", "Execute", "StepBlocked", "Fatal"]
    nudge = next(m.content for m in out.history if m.content.startswith("[LoopError]"))
    assert "it failed every time: ToolResolutionError: no data for 'Geelong'" in nudge
    assert "this dataset only has capitals" in nudge
    assert "report" not in nudge


def test_a_loop_of_a_call_that_succeeded_is_not_told_it_failed() -> None:
    """A call that failed once and then ran is a plain repeat: no stale error is quoted."""
    outcomes = iter([OSError("timed out"), None, None, None])

    def get_conditions(city: str) -> str:
        failure = next(outcomes)
        if failure is not None:
            raise failure
        return f"{city}: 4.0 C"

    tools = make_tools()
    tools["get_conditions"] = get_conditions
    script = [calls(("get_conditions", {"city": "Turku"}))] * 5
    out = run_loop(make_guard(), script, tools)
    nudge = next(m.content for m in out.history if m.content.startswith("[LoopError]"))
    assert "failed" not in nudge
    assert "repeating it will not give a different result" in nudge


def test_ablation_without_retry_nudges_answers_in_text() -> None:
    """With retry nudges off, the first bare-text reply is the run's answer."""
    out = run_loop(make_guard(retry_nudges=False), [text("It is 39 F.")], make_tools())
    assert (out.trace, out.answer) == (["TextAnswer"], "It is 39 F.")
