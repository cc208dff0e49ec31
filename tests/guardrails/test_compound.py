"""A call that runs a tool on that tool's own result is sent back once: the real 1.5B converted
250 euros (270.00), then 270 (291.60), and answered with that, 3 runs of 3."""

from __future__ import annotations

from typing import Any

import pytest
from guard_support import ran, reply, spec

from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors
from forge_rt.guardrails._compound import fed_own_result

RATE = spec("get_exchange_rate", base="string", quote="string")
CONVERT = spec("convert", amount="number", rate="number")


def _converted(options: GuardrailOptions | None = None) -> Guardrails:
    guard = Guardrails(
        [RATE, CONVERT],
        required_steps=["get_exchange_rate", "convert"],
        respond_tool=True,
        **({"options": options} if options is not None else {}),
    )
    guard.new_turn("How many US dollars is 250 euros?")
    ran(guard, "get_exchange_rate", "1 EUR = 1.08 USD", base="EUR", quote="USD")
    ran(guard, "convert", "270.00", amount=250, rate=1.08)
    return guard


def test_converting_the_conversion_is_sent_back_once_to_the_answer() -> None:
    guard = _converted()
    action = guard.check(reply("convert", amount=270, rate=1.08))
    assert isinstance(action, ToolErrors)
    (nudge,) = action.errors
    assert "`amount` is what `convert` itself just returned (270.00)" in nudge.content
    assert "call `respond`" in nudge.content
    # Once, not barred: "double it twice" runs a tool on its own result rightly.
    assert {t.name for t in guard.callable_now()} == {"get_exchange_rate", "convert", "respond"}
    assert isinstance(guard.check(reply("convert", amount=270, rate=1.08)), Execute)


def test_off_with_ground_answers() -> None:
    guard = _converted(GuardrailOptions(ground_answers=False))
    assert isinstance(guard.check(reply("convert", amount=270, rate=1.08)), Execute)


@pytest.mark.parametrize(
    ("args", "previous", "output", "field"),
    [
        ({"amount": 270, "rate": 1.08}, {"amount": 250, "rate": 1.08}, "270.00", "amount"),
        ({"text": "Hallo"}, {"text": "Hello"}, "Hallo", "text"),
        ({"amount": 270, "rate": 0.9}, {"amount": 250, "rate": 1.08}, "270.00", None),  # two
        ({"page": 2}, {"page": 1}, "page 1 of 2: a, b", None),  # a listing, not a value
        ({"amount": 300, "rate": 1.08}, {"amount": 250, "rate": 1.08}, "270.00", None),
        ({"amount": 270}, {"amount": 250, "rate": 1.08}, "270.00", None),  # other fields
    ],
    ids=["number", "text", "two-changed", "paging", "another-value", "other-fields"],
)
def test_what_counts_as_fed_its_own_result(
    args: dict[str, Any], previous: dict[str, Any], output: str, field: str | None
) -> None:
    assert fed_own_result(args, previous, output) == field
