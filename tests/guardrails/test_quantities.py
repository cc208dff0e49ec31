"""A number the request gives that no call used sends the answer back once, with the call that
uses it: the real 0.5B converted 1 euro, not the 320 it was asked about, and answered 1.37."""

from __future__ import annotations

import pytest
from guard_support import ran, reply, spec

from forge_rt.core import ToolCall
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors
from forge_rt.guardrails._quantities import RequestQuantities, request_numbers

RATE = spec("get_fx_rate", base="string", quote="string")
CONVERT = spec("convert", amount="number", rate="number")
WEATHER = spec("get_air_quality", city="string")


def _converted(amount: float, options: GuardrailOptions | None = None) -> Guardrails:
    guard = Guardrails(
        [RATE, CONVERT],
        required_steps=["get_fx_rate", "convert"],
        respond_tool=True,
        **({"options": options} if options is not None else {}),
    )
    guard.new_turn("How many US dollars is 320 euros?")
    ran(guard, "get_fx_rate", "1 EUR = 1.37 USD", base="EUR", quote="USD")
    ran(guard, "convert", f"{amount * 1.37:.2f}", amount=amount, rate=1.37)
    return guard


def test_an_answer_that_lost_the_requests_number_is_sent_back_with_the_call() -> None:
    guard = _converted(1)
    action = guard.check(reply("respond", message="1.37 USD"))
    assert isinstance(action, ToolErrors)
    (nudge,) = action.errors
    assert "320" in nudge.content
    assert '{"name": "convert", "arguments": {"amount": 320, "rate": 1.37}}' in nudge.content
    assert "respond" not in {t.name for t in guard.callable_now()}  # the next reply is the call
    ran(guard, "convert", "438.40", amount=320, rate=1.37)
    assert isinstance(guard.check(reply("respond", message="438.40 USD")), Execute)


def test_once_per_turn() -> None:
    guard = _converted(1)
    assert isinstance(guard.check(reply("respond", message="1.37 USD")), ToolErrors)
    assert isinstance(guard.check(reply("respond", message="1.37 USD")), Execute)


@pytest.mark.parametrize(
    "answer",
    ["1.37 USD for the 320 euros", "438.40"],
    ids=["answer-states-it", "a-call-used-it"],
)
def test_a_number_that_was_used_or_stated_passes(answer: str) -> None:
    guard = _converted(320 if answer == "438.40" else 1)
    assert isinstance(guard.check(reply("respond", message=answer)), Execute)


def test_nothing_is_refused_without_a_call_that_takes_a_number() -> None:
    """'in 2 hours' asked of a tool that takes no number is no lost input."""
    guard = Guardrails([WEATHER], required_steps=["get_air_quality"], respond_tool=True)
    guard.new_turn("Will the air be clear in Quito in 2 hours?")
    ran(guard, "get_air_quality", "Quito: light haze", city="Quito")
    assert isinstance(guard.check(reply("respond", message="Light haze.")), Execute)


def test_off_with_lost_numbers() -> None:
    guard = _converted(1, GuardrailOptions(lost_numbers=False))
    assert isinstance(guard.check(reply("respond", message="1.37 USD")), Execute)


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("How many US dollars is 320 euros?", (320.0,)),
        ("And add 0.5 to it.", (0.5,)),
        ("Report the sales for Q4 2031.", (2031.0,)),  # the 4 of Q4 is part of a word
        ("Status of KVX-17 and #17 at 19:00, v2", ()),
        ("Add 8 to that, then 8 again.", (8.0,)),
        ("Pay $320", (320.0,)),
    ],
)
def test_request_numbers_are_the_ones_standing_alone(text: str, numbers: tuple[float, ...]) -> None:
    assert request_numbers(text) == numbers


def test_the_number_goes_where_the_requests_own_number_is_not() -> None:
    """``convert(amount=320, rate=1)`` lost nothing; with a whole number lost, a whole-number
    field is filled before a fractional one."""
    quantities = RequestQuantities()
    quantities.reset("Convert 320 at the rate you find")
    rate_first = spec("convert", rate="number", amount="number")
    quantities.add_call(
        rate_first, ToolCall(tool="convert", args={"rate": 1.37, "amount": 1}), ok=True
    )
    lost = quantities.check({"message": "1.37"})
    assert lost is not None
    assert lost.call.args == {"rate": 1.37, "amount": 320}
