"""The corrected call read from the values a tool's error lists (the rule ``error_values``)."""

from __future__ import annotations

import json

import pytest

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.errors import ToolResolutionError
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolResult
from forge_rt.guardrails._error_values import error_value_args, listed_values

GAUGE = ToolSpec(
    name="river_gauge",
    parameters={
        "type": "object",
        "properties": {"station": {"type": "string"}},
        "required": ["station"],
    },
)
CODED = ToolSpec(
    name="get_permit",
    parameters={
        "type": "object",
        "properties": {"permit_id": {"type": "string", "pattern": "^PX-[0-9]{4}$"}},
        "required": ["permit_id"],
    },
)


@pytest.mark.parametrize(
    ("message", "values"),
    [
        ("stations: low-weir, mill-race", ["low-weir", "mill-race"]),
        ("station must be in [low-weir | mill-race]", ["low-weir", "mill-race"]),
        (
            "got 'Low Weir' (want one of (low-weir, mill-race))",
            ["Low Weir", "low-weir", "mill-race"],
        ),
        ("no such station", []),
    ],
)
def test_listed_values_are_read_from_quotes_brackets_and_colon_lists(
    message: str, values: list[str]
) -> None:
    assert listed_values(message) == values


def test_the_refused_value_spelled_another_way_is_taken() -> None:
    message = "'Mill Race' is not a station id. Known ids: low-weir, mill-race, ford-end"
    fixed = error_value_args(GAUGE, {"station": "Mill Race"}, message)
    assert fixed == {"station": "mill-race"}


def test_else_the_value_the_request_names() -> None:
    """The model sent an id of its own; the list holds the station the user named."""
    message = "E422: station not in [low-weir, mill-race, ford-end]"
    fixed = error_value_args(
        GAUGE, {"station": "#4471"}, message, request="How high is the river at Ford End?"
    )
    assert fixed == {"station": "ford-end"}


def test_else_the_one_clearly_most_like_it() -> None:
    message = "unknown permit_id 'PX-417'; on file: PX-0417, PX-9020"
    assert error_value_args(CODED, {"permit_id": "PX-417"}, message) == {"permit_id": "PX-0417"}


@pytest.mark.parametrize(
    ("sent", "message"),
    [
        ("PX-4170", "unknown permit_id 'PX-4170'; on file: PX-4171, PX-4172"),  # two as alike
        ("PX-1234", "unknown permit_id 'PX-1234'"),  # an echo of the refused value only
        ("PX-1234", "permit_id is malformed: four digits after PX"),  # a format, no value
    ],
)
def test_no_call_where_no_listed_value_is_clearly_meant(sent: str, message: str) -> None:
    assert error_value_args(CODED, {"permit_id": sent}, message) is None


def test_a_listed_value_the_schema_refuses_is_not_shown() -> None:
    message = "unknown permit_id 'PX-417'; on file: px0417"
    assert error_value_args(CODED, {"permit_id": "PX-417"}, message) is None


def _failed_result(**options: bool) -> str:
    guard = Guardrails([GAUGE], respond_tool=True, options=GuardrailOptions(**options))
    guard.new_turn("How high is the river at Ford End?")
    action = guard.check(
        LLMResponse(result=[ToolCall(tool="river_gauge", args={"station": "#4471"})])
    )
    assert isinstance(action, Execute)
    error = ToolResolutionError("station not in [low-weir, mill-race, ford-end]")
    outcome = guard.record([ToolResult(call=action.calls[0], error=error)])
    return outcome.messages[-1].content


def test_the_facade_shows_the_corrected_call_in_the_result() -> None:
    text = _failed_result(error_values=True)
    shown = json.loads(text.split("Corrected call: ", 1)[1].split("\n", 1)[0])
    assert shown == {"name": "river_gauge", "arguments": {"station": "ford-end"}}


def test_on_by_default_and_switched_by_its_name() -> None:
    assert GuardrailOptions().error_values
    assert "Corrected call" in _failed_result()
    assert "Corrected call" not in _failed_result(error_values=False)


def test_the_record_names_the_rule_that_added_the_corrected_call() -> None:
    guard = Guardrails([GAUGE], respond_tool=True)
    guard.new_turn("How high is the river at Ford End?")
    call = ToolCall(tool="river_gauge", args={"station": "#4471"})
    error = ToolResolutionError("station not in [low-weir, mill-race, ford-end]")
    # The failure was fed back (recovery), with the corrected call (error_values).
    assert guard.record([ToolResult(call=call, error=error)]).rules == ("error_values", "recovery")
    guard = Guardrails([GAUGE], respond_tool=True, options=GuardrailOptions(error_values=False))
    guard.new_turn("How high is the river at Ford End?")
    outcome = guard.record([ToolResult(call=call, error=ToolResolutionError("no such gauge"))])
    assert outcome.rules == ("recovery",)
