"""An answer that uses nothing the tools returned is sent back once per turn, with the results."""

from __future__ import annotations

import json

import pytest

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.errors import ToolResolutionError
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors, ToolResult
from forge_rt.guardrails._grounding import AnswerGrounding

WEATHER = ToolSpec(
    name="get_conditions",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.mark.parametrize(
    "answer",
    [
        "It is 19 degrees and sunny in Porto.",  # relayed in its own words
        "19C",
        "Sunny.",
        "porto: sunny",
        "Done.",  # a confirmation is an answer after an action
        "OK",
        "Cannot.",
    ],
)
def test_an_answer_that_relays_a_result_passes(answer: str) -> None:
    grounding = AnswerGrounding()
    grounding.add_result("get_conditions", "Weather in Porto: 19C, sunny")
    assert grounding.check(answer) is None


@pytest.mark.parametrize(
    "answer",
    [
        "You complete your request.",  # the real 0.5B, after "Weather in Porto: 19C, sunny"
        "Hello world!",  # the real 0.5B, asked which of two cities is warmer
        "Please provide a meaningful message.",
        "Wear a sweater.",  # advice that restates nothing: sent back once, for the results
    ],
)
def test_an_answer_from_nowhere_is_refused_once_with_the_results(answer: str) -> None:
    grounding = AnswerGrounding()
    grounding.add_result("get_conditions", "Weather in Porto: 19C, sunny")
    nudge = grounding.check(answer)
    assert nudge is not None
    assert nudge.startswith("[AnswerError]")
    assert "Weather in Porto: 19C, sunny" in nudge
    assert grounding.check(answer) is None  # the turn's one refusal is spent
    grounding.reset()
    assert grounding.check(answer) is None  # a new turn with no results has nothing to check


def test_results_without_words_give_nothing_to_check_against() -> None:
    grounding = AnswerGrounding()
    grounding.add_result("set", "ok")
    grounding.add_result("go", "{}")
    assert grounding.check("The heating is off.") is None


def test_an_answer_about_a_call_that_failed_passes() -> None:
    """The tool's name and its own error are evidence too: explaining a failure is an answer."""
    grounding = AnswerGrounding()
    grounding.add_result("lookup", "lamp: in stock")
    grounding.add_result("order", "payment service timed out", failed=True)
    assert grounding.check("I could not confirm the order; please check.") is None
    assert grounding.check("The payment timed out.") is None
    assert grounding.check("Hello world!") is not None


def _answer(message: str) -> LLMResponse:
    return LLMResponse(result=[ToolCall(tool="respond", args={"message": message})])


def _guard(**options: bool) -> Guardrails:
    return Guardrails(
        [WEATHER],
        required_steps=["get_conditions"],
        respond_tool=True,
        options=GuardrailOptions(**options),
    )


def _ran_weather(guard: Guardrails) -> None:
    action = guard.check(
        LLMResponse(result=[ToolCall(tool="get_conditions", args={"city": "Porto"})])
    )
    assert isinstance(action, Execute)
    guard.record([ToolResult(call=action.calls[0], output="Weather in Porto: 19C, sunny")])


def test_the_facade_sends_an_ungrounded_respond_back_then_takes_the_next() -> None:
    guard = _guard()
    _ran_weather(guard)
    refused = guard.check(_answer("You complete your request."))
    assert isinstance(refused, ToolErrors)
    (nudge,) = refused.errors
    assert nudge.content.startswith("[AnswerError]")
    example = json.loads(nudge.content.split("for example: ", 1)[1])
    assert example == {"name": "respond", "arguments": {"message": "Weather in Porto: 19C, sunny"}}
    # The answer that relays the results is not an echo of the correction that quoted them.
    assert isinstance(guard.check(_answer("Weather in Porto: 19C, sunny")), Execute)


def test_a_model_that_insists_is_taken_at_its_word() -> None:
    guard = _guard()
    _ran_weather(guard)
    assert isinstance(guard.check(_answer("Wear a coat.")), ToolErrors)
    assert isinstance(guard.check(_answer("Wear a coat.")), Execute)


def test_each_turn_gets_its_own_check() -> None:
    guard = _guard()
    _ran_weather(guard)
    assert isinstance(guard.check(_answer("19C and sunny.")), Execute)
    guard.new_turn()
    _ran_weather(guard)
    assert isinstance(guard.check(_answer("Wear a coat.")), ToolErrors)


def test_the_switch_turns_it_off_and_bare_has_it_off() -> None:
    guard = _guard(answer_grounding=False)
    _ran_weather(guard)
    assert isinstance(guard.check(_answer("Wear a coat.")), Execute)
    assert GuardrailOptions.off().answer_grounding is False


@pytest.mark.parametrize("gap", ["\n", " ", ""])
def test_an_answer_that_copies_a_result_with_its_note_keeps_the_result(gap: str) -> None:
    """The real 0.5B relayed a result with the [Note] forge_rt had appended to it, on a new
    line or on the same one; the note is cut off and the result is the answer (before, the
    whole value was refused as an echo)."""
    guard = _guard()
    _ran_weather(guard)
    copied = (
        f"Weather in Porto: 19C, sunny{gap}[Note] You already called `get_conditions` with these "
        "arguments; the result is the same as before."
    )
    action = guard.check(_answer(copied))
    assert isinstance(action, Execute)
    assert action.calls[0].args == {"message": "Weather in Porto: 19C, sunny"}


@pytest.mark.parametrize(
    ("result", "answer"),
    [("-3 C", "Cold."), ("28 C", "Warm, at 28 degrees.")],
)
def test_results_of_numbers_alone_refuse_nothing(result: str, answer: str) -> None:
    """A result with no words cannot tell an answer from nowhere: "-3 C" is relayed as "Cold."."""
    grounding = AnswerGrounding()
    grounding.add_result("get_conditions", result)
    assert grounding.check(answer) is None


def test_an_answer_that_names_what_was_looked_up_passes() -> None:
    """ "Porto is warm." after get_conditions(city="Porto") returned only "sunny, 28 C"."""
    grounding = AnswerGrounding()
    grounding.add_result("get_conditions", "sunny, 28 C")
    grounding.add_subject(["Porto"])
    assert grounding.check("Porto is warm.") is None
    assert grounding.check("You complete your request.") is not None


def test_an_answer_of_tool_result_markup_is_shown_the_results_to_relay() -> None:
    """The real 0.5B answered "<tool_response>", was told to send a real value, and looked the
    weather up again, four times, until the loop guard ended the run: the correction shows the
    answer that relays the results, and never the markup it would copy."""
    guard = _guard()
    _ran_weather(guard)
    refused = guard.check(_answer("<tool_response>"))
    assert isinstance(refused, ToolErrors)
    (nudge,) = refused.errors
    assert nudge.content.startswith("[ArgumentError] `respond` was not run")
    assert "<tool_" not in nudge.content
    example = json.loads(nudge.content.split("for example: ", 1)[1])
    assert example == {"name": "respond", "arguments": {"message": "Weather in Porto: 19C, sunny"}}
    assert nudge.call_id == refused.calls[0].call_id
    assert isinstance(guard.check(_answer("Weather in Porto: 19C, sunny")), Execute)


def test_markup_before_any_result_gets_the_plain_correction() -> None:
    guard = _guard()
    refused = guard.check(_answer("<tool_response>"))
    assert isinstance(refused, ToolErrors)
    assert "got echoed <tool_response> markup" in refused.errors[0].content


STOCK = "KORV: 318.75 USD"
ASKED = "What's KORV trading at?"


@pytest.mark.parametrize(
    "answer",
    [
        "KORV is at 318.75 USD.",
        "318.75",
        "KORV trading: 318.75",
        "KORV is trading.",  # only the request's words, and nothing made up beside them
    ],
)
def test_an_answer_that_uses_the_result_beyond_the_request_passes(answer: str) -> None:
    grounding = AnswerGrounding()
    grounding.reset(ASKED)
    grounding.add_result("get_share_quote", STOCK)
    assert grounding.check(answer) is None


def test_an_answer_linked_only_by_the_requests_words_is_refused() -> None:
    """The real 0.5B answered "What's KORV trading at?" with a paragraph of its own about
    KORV trading; the words it shares with the result are the request's."""
    grounding = AnswerGrounding()
    grounding.reset(ASKED)
    grounding.add_result("get_share_quote", STOCK)
    answer = "KORV trading is a global market where investors buy and sell cryptocurrency."
    nudge = grounding.check(answer)
    assert nudge is not None
    assert STOCK in nudge
    plain = AnswerGrounding()  # without the request, "KORV" is a link to the result
    plain.add_result("get_share_quote", STOCK)
    assert plain.check(answer) is None


def test_a_long_argument_the_model_wrote_is_no_evidence() -> None:
    """A short argument names what was looked up; a paragraph the model sent to a tool is its
    own text, and an answer copying it is not grounded by it."""
    grounding = AnswerGrounding()
    grounding.reset(ASKED)
    paragraph = "Global markets where investors buy and sell cryptocurrency every day."
    grounding.add_subject([paragraph, "en"])
    grounding.add_result("rephrase_text", "not relevant to this request")
    grounding.add_result("get_share_quote", STOCK)
    assert grounding.check(paragraph) is not None
    short = AnswerGrounding()
    short.add_subject(["Maren Holt"])
    short.add_result("get_division", "R-58 Logistics")
    assert short.check("Maren Holt works there.") is None


def test_the_correction_shows_distinct_results() -> None:
    """A result repeated by a model that kept calling the same tool is shown once, so the
    correction still reaches back to the result that answers."""
    grounding = AnswerGrounding()
    grounding.add_result("get_share_quote", STOCK)
    for _ in range(3):
        grounding.add_result("rephrase_text", "not relevant to this request")
    assert grounding.recent_results == (STOCK, "not relevant to this request")
    nudge = grounding.check("Everything is in order.")
    assert nudge is not None
    assert f"{STOCK} | not relevant to this request" in nudge


def test_after_a_refused_answer_the_next_is_constrained_to_the_results() -> None:
    """The refusal sets ``answer_choices`` to the turn's results for the rest of the turn; a
    new turn clears them; with ``answer_from_results`` off there are none."""
    guard = _guard()
    _ran_weather(guard)
    assert guard.answer_choices == ()
    assert isinstance(guard.check(_answer("You complete your request.")), ToolErrors)
    assert guard.answer_choices == ("Weather in Porto: 19C, sunny",)
    assert isinstance(guard.check(_answer("Weather in Porto: 19C, sunny")), Execute)
    guard.new_turn("And tomorrow?")
    assert guard.answer_choices == ()
    off = _guard(answer_from_results=False)
    _ran_weather(off)
    assert isinstance(off.check(_answer("You complete your request.")), ToolErrors)
    assert off.answer_choices == ()


def test_a_tool_error_is_never_an_answer_to_show_or_constrain_to() -> None:
    """A failed call's error counts as what the turn is about, but it is never the example
    answer nor one the answer is held to; with no call succeeded there is no example to
    show, and the answer is not sent back."""
    grounding = AnswerGrounding()
    grounding.add_result("get_share_quote", "unknown symbol 'AAPL'; try KORV", failed=True)
    assert grounding.recent_successes == ()
    grounding.add_result("get_share_quote", STOCK)
    assert grounding.recent_results == ("unknown symbol 'AAPL'; try KORV", STOCK)
    assert grounding.recent_successes == (STOCK,)
    guard = Guardrails([WEATHER], respond_tool=True)  # no required step: answering may follow
    action = guard.check(LLMResponse(result=[ToolCall(tool="get_conditions", args={"city": "X"})]))
    assert isinstance(action, Execute)
    error = ToolResolutionError("unknown city 'X'; known cities: Porto")
    guard.record([ToolResult(call=action.calls[0], error=error)])
    assert isinstance(guard.check(_answer("You complete your request.")), Execute)
    assert guard.answer_choices == ()
    failed_then_ok = AnswerGrounding()
    failed_then_ok.add_result("get_share_quote", "unknown symbol 'AAPL'; try KORV", failed=True)
    failed_then_ok.add_result("get_share_quote", STOCK)
    shown = failed_then_ok.check("You complete your request.")
    assert shown is not None
    assert STOCK in shown
    assert "unknown symbol" not in shown


def test_a_hold_to_the_results_follows_the_results_that_come_after_it() -> None:
    """Held after one lookup, the answer may be a later lookup's result once it is in, or both,
    one per line (the real 0.5B, held after Turku, then sent on to Lima, could only answer with
    Turku's weather)."""
    cities = Guardrails([WEATHER], respond_tool=True)
    cities.new_turn("Where is it warmer today?")

    def weather(city: str, output: str) -> None:
        action = cities.check(_answer_call("get_conditions", city=city))
        assert isinstance(action, Execute)
        cities.record([ToolResult(call=action.calls[0], output=output)])

    weather("Turku", "Weather in Turku: 3C, snow")
    assert isinstance(cities.check(_answer("Hello world!")), ToolErrors)
    assert cities.answer_choices == ("Weather in Turku: 3C, snow",)
    weather("Lima", "Weather in Lima: 27C, clear")
    assert cities.answer_choices == (
        "Weather in Turku: 3C, snow",
        "Weather in Lima: 27C, clear",
        "Weather in Turku: 3C, snow\nWeather in Lima: 27C, clear",
    )


def _answer_call(tool: str, **args: str) -> LLMResponse:
    return LLMResponse(result=[ToolCall(tool=tool, args=args)])
