"""A terminal call made before a listed fan-out is done is sent back once per turn, with the
call for the item left out."""

from __future__ import annotations

import json

import pytest

from forge_rt.core import Message, ToolCall, ToolSpec
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors, ToolResult
from forge_rt.guardrails._coverage import enumerations, shape


def _tool(name: str, arg: str, kind: str = "string") -> ToolSpec:
    return ToolSpec(
        name=name,
        parameters={"type": "object", "properties": {arg: {"type": kind}}, "required": [arg]},
    )


WEATHER = _tool("get_conditions", "city")
LIST_INVOICES = _tool("list_invoices", "customer")
INVOICE_TOTAL = _tool("get_invoice_total", "invoice_id")
LIST_FILES = ToolSpec(name="list_files", parameters={"type": "object", "properties": {}})
READ = _tool("read_doc", "path")


def _guard(*tools: ToolSpec, **options: object) -> Guardrails:
    return Guardrails(list(tools), respond_tool=True, options=GuardrailOptions(**options))  # type: ignore[arg-type]


def _run(guard: Guardrails, tool: str, output: str | None = None, **args: object) -> None:
    """One call of ``tool`` that runs and returns ``output`` (``None``: it fails)."""
    action = guard.check([ToolCall(tool=tool, args=dict(args))])
    assert isinstance(action, Execute), action
    [call] = action.calls
    if output is None:
        guard.record([ToolResult(call=call, error=RuntimeError("no data"))])
    else:
        guard.record([ToolResult(call=call, output=output)])


def _answer(guard: Guardrails, message: str) -> Execute | ToolErrors:
    action = guard.check([ToolCall(tool="respond", args={"message": message})])
    assert isinstance(action, Execute | ToolErrors), action
    return action


def _shown_call(action: ToolErrors) -> dict[str, object]:
    [nudge] = action.errors
    assert nudge.content.startswith("[CoverageError]")
    return json.loads(nudge.content.split("before you answer: ", 1)[1])  # type: ignore[no-any-return]


def test_an_answer_about_one_of_two_asked_cities_is_sent_back_once_with_the_other() -> None:
    """The real 0.5B, asked "Turku or Lima?", looked up Turku and answered with its weather."""
    guard = _guard(WEATHER)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    refused = _answer(guard, "Weather in Turku: 3C, snow")
    assert isinstance(refused, ToolErrors)
    assert _shown_call(refused) == {"name": "get_conditions", "arguments": {"city": "Lima"}}
    assert "Your request names 'Turku' and 'Lima'" in refused.errors[0].content
    # The turn's one refusal is spent: a model that insists is taken at its word.
    assert isinstance(_answer(guard, "Weather in Turku: 3C, snow"), Execute)


def test_an_answer_after_every_listed_item_is_looked_up_passes() -> None:
    guard = _guard(WEATHER)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    _run(guard, "get_conditions", "Weather in Lima: 27C, sunny", city="lima")  # any case
    assert isinstance(_answer(guard, "Lima, at 27C; Turku 3C."), Execute)


def test_a_comparison_answered_with_the_winner_alone_costs_one_round() -> None:
    """No structure tells "Lima, at 27C." for "which is warmer?" from a report of one of two
    items: every_end sends it back once for Turku's result, and takes it at its word after."""
    guard = _guard(WEATHER)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    _run(guard, "get_conditions", "Weather in Lima: 27C, sunny", city="lima")
    assert isinstance(_answer(guard, "Lima, at 27C."), ToolErrors)
    assert isinstance(_answer(guard, "Lima, at 27C."), Execute)


def test_a_sibling_that_was_tried_and_failed_counts_as_covered() -> None:
    guard = _guard(WEATHER)
    guard.new_turn("Is it raining in Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, rain", city="Turku")
    _run(guard, "get_conditions", None, city="Lima")
    assert isinstance(_answer(guard, "It rains in Turku; no data for Lima."), Execute)


def test_ids_a_tool_listed_are_covered_before_the_total() -> None:
    """list_invoices gave "K-4, K-7"; a total of K-4 alone is sent back with K-7's call."""
    guard = _guard(LIST_INVOICES, INVOICE_TOTAL)
    guard.new_turn("How much has customer Voss spent in total?")
    _run(guard, "list_invoices", "invoices: K-4, K-7", customer="Voss")
    _run(guard, "get_invoice_total", "K-4 total: 40 EUR", invoice_id="K-4")
    refused = _answer(guard, "40 EUR")
    assert isinstance(refused, ToolErrors)
    assert _shown_call(refused) == {"name": "get_invoice_total", "arguments": {"invoice_id": "K-7"}}
    assert "`list_invoices` returned 'K-4' and 'K-7'" in refused.errors[0].content


def test_an_item_the_user_picked_from_a_listing_is_no_fan_out() -> None:
    """Asked about a.txt, the model reads a.txt from list_files' listing: nothing to cover."""
    guard = _guard(LIST_FILES, READ)
    guard.new_turn("What is in a.txt?")
    _run(guard, "list_files", "a.txt, b.txt, notes.md")
    _run(guard, "read_doc", "hello", path="a.txt")
    assert isinstance(_answer(guard, "It says hello."), Execute)


def test_words_around_an_enumeration_are_not_its_items() -> None:
    """ "right now, Turku or Lima": the words before the list have another shape."""
    [items] = enumerations("Which is warmer right now, Turku or Lima?")
    assert [i for i in items if shape(i) == shape("Turku")] == ["Turku", "Lima"]
    assert enumerations("How much has customer Voss spent in total?") == []


def test_the_word_and_is_never_part_of_an_item() -> None:
    """Items of two words each: "Glass Bay and Stone Quay" is two items, not "Glass Bay and"."""
    assert enumerations("Tides at North Cove, Glass Bay and Stone Quay.") == [
        ["at North Cove", "Glass Bay", "Stone Quay"]
    ]
    guard = _guard(_tool("get_tides", "harbour"))
    guard.new_turn("Tides at North Cove, Glass Bay and Stone Quay.")
    _run(guard, "get_tides", "high 06:10", harbour="North Cove")
    _run(guard, "get_tides", "high 06:40", harbour="Glass Bay")
    refused = _answer(guard, "High tide is at 06:10 and 06:40.")
    assert isinstance(refused, ToolErrors)
    assert _shown_call(refused) == {"name": "get_tides", "arguments": {"harbour": "Stone Quay"}}


@pytest.mark.parametrize(
    ("value", "expected"), [("Turku", "Aa"), ("A-12", "A-9"), ("eggs", "a"), ("New York", "Aa Aa")]
)
def test_shape_says_what_kind_of_token_a_value_is(value: str, expected: str) -> None:
    assert shape(value) == expected


def test_the_first_item_of_a_list_keeps_only_its_own_words() -> None:
    """ "Buy eggs, milk and flour": the first item is eggs, not "Buy eggs"."""
    guard = _guard(_tool("add_item", "item"))
    guard.new_turn("Buy eggs, milk and flour.")
    _run(guard, "add_item", "added milk", item="milk")
    refused = _answer(guard, "Added milk.")
    assert isinstance(refused, ToolErrors)
    assert _shown_call(refused) == {"name": "add_item", "arguments": {"item": "eggs"}}


def test_a_new_turn_has_its_own_lists_and_refusal() -> None:
    guard = _guard(WEATHER)
    guard.new_turn("Which is warmer, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C", city="Turku")
    assert isinstance(_answer(guard, "Turku: 3C"), ToolErrors)
    guard.new_turn("And in Porto?")  # the last turn's list is gone with it
    _run(guard, "get_conditions", "Weather in Porto: 20C", city="Porto")
    assert isinstance(_answer(guard, "Porto: 20C"), Execute)


def test_without_the_request_only_tool_listings_are_covered() -> None:
    """A foreign loop that never says the user's message still gets its tools' lists covered."""
    guard = _guard(WEATHER, LIST_INVOICES, INVOICE_TOTAL)
    guard.new_turn()
    _run(guard, "get_conditions", "Weather in Turku: 3C", city="Turku")
    _run(guard, "list_invoices", "invoices: K-4, K-7", customer="Voss")
    _run(guard, "get_invoice_total", "K-7 total: 65 EUR", invoice_id="K-7")
    refused = _answer(guard, "65 EUR")
    assert isinstance(refused, ToolErrors)
    assert _shown_call(refused) == {"name": "get_invoice_total", "arguments": {"invoice_id": "K-4"}}


def test_list_coverage_off_takes_the_answer() -> None:
    guard = _guard(WEATHER, list_coverage=False)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    assert isinstance(_answer(guard, "Weather in Turku: 3C, snow"), Execute)
    assert GuardrailOptions.off().list_coverage is False


def test_a_history_starts_the_turn_it_is_in() -> None:
    """observe_history: the last user message is the request, its answered calls the turn's."""

    turku = ToolCall(tool="get_conditions", args={"city": "Turku"}, call_id="c1")
    history = [
        Message.user("Is Porto or Ghent sunnier?"),  # an earlier turn: not this one's request
        Message.user("Which is warmer right now, Turku or Lima?"),
        Message.assistant_calls([turku]),
        Message.tool_result(turku, "Weather in Turku: 3C, snow"),
    ]
    guard = _guard(WEATHER)
    guard.observe_history(history)
    refused = _answer(guard, "Weather in Turku: 3C, snow")
    assert isinstance(refused, ToolErrors)
    assert _shown_call(refused) == {"name": "get_conditions", "arguments": {"city": "Lima"}}


def test_a_word_inside_a_longer_item_is_not_listed() -> None:
    """ "Weather and forecast for Ghent?": Ghent is no item (the proxy's SDK history had it),
    so a forecast for Ghent covers the request and "Weather" is never taken for a city."""
    guard = _guard(_tool("get_forecast", "city"))
    guard.new_turn("Weather and forecast for Ghent?")
    _run(guard, "get_forecast", "rain", city="Ghent")
    assert isinstance(_answer(guard, "Rain."), Execute)


def test_after_a_coverage_refusal_the_constraint_offers_no_terminal_tool() -> None:
    """The real 0.5B, sent back to look up Lima, answered again with the correction's words:
    the next reply may not be an answer, until a batch has run."""
    guard = _guard(WEATHER)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    assert {t.name for t in guard.callable_now()} == {"get_conditions", "respond"}
    assert isinstance(_answer(guard, "Weather in Turku: 3C, snow"), ToolErrors)
    assert [t.name for t in guard.callable_now()] == ["get_conditions"]
    _run(guard, "get_conditions", "Weather in Lima: 27C", city="Lima")
    assert {t.name for t in guard.callable_now()} == {"get_conditions", "respond"}


def test_after_a_coverage_refusal_the_covered_calls_are_excluded() -> None:
    """The real 0.5B, sent back to look up Lima, looked Turku up again twice and answered with
    Turku: until a batch runs, the next constraint excludes the calls that covered a sibling."""
    guard = _guard(WEATHER)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    assert guard.excluded_calls == ()
    assert isinstance(_answer(guard, "Weather in Turku: 3C, snow"), ToolErrors)
    assert [(c.tool, c.args) for c in guard.excluded_calls] == [
        ("get_conditions", {"city": "Turku"})
    ]
    _run(guard, "get_conditions", "Weather in Lima: 27C", city="Lima")
    assert guard.excluded_calls == ()


def test_with_steps_off_the_terminal_is_held_back_too() -> None:
    guard = _guard(WEATHER, steps=False)
    guard.new_turn("Which is warmer right now, Turku or Lima?")
    _run(guard, "get_conditions", "Weather in Turku: 3C, snow", city="Turku")
    assert isinstance(_answer(guard, "Weather in Turku: 3C, snow"), ToolErrors)
    assert [t.name for t in guard.callable_now()] == ["get_conditions"]


def test_a_repeated_call_is_pointed_at_the_item_left_out() -> None:
    """The real 0.5B totalled K-4 again and again: the repeat's note names K-7's call."""
    guard = _guard(LIST_INVOICES, INVOICE_TOTAL)
    guard.new_turn("How much has customer Voss spent in total?")
    _run(guard, "list_invoices", "invoices: K-4, K-7", customer="Voss")
    _run(guard, "get_invoice_total", "K-4 total: 40 EUR", invoice_id="K-4")
    action = guard.check([ToolCall(tool="get_invoice_total", args={"invoice_id": "K-4"})])
    assert isinstance(action, Execute)
    [message] = guard.record(
        [ToolResult(call=action.calls[0], output="K-4 total: 40 EUR")]
    ).messages
    note = message.content.split("[Note]", 1)[1]
    assert note.endswith(
        "Next, call `get_invoice_total` for 'K-7': "
        '{"name": "get_invoice_total", "arguments": {"invoice_id": "K-7"}}'
    ), note
