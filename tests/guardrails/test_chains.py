"""An answer taken from the middle of a chain of lookups is sent back once, with the chain's end."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forge_rt.core import LLMResponse, Message, ToolCall, ToolSpec
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors, ToolResult
from forge_rt.guardrails._chains import REQUESTS_KEPT, LookupChains


def _tool(name: str, *params: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        parameters={
            "type": "object",
            "properties": {p: {"type": "string"} for p in params},
            "required": list(params),
        },
    )


HOPS = [
    _tool("get_staff", "name"),
    _tool("get_unit", "unit_id"),
    _tool("get_unit_lead", "lead_id"),
]


def _walk_the_chain(chains: LookupChains) -> None:
    """The multi-hop walk the real 0.5B made before answering from its middle."""
    chains.new_turn("Who leads Maren Holt's unit?")
    chains.add_result("get_staff", {"name": "Maren Holt"}, "Maren Holt: unit_id=G-40")
    chains.add_result("get_unit", {"unit_id": "G-40"}, "G-40 Logistics, lead_id=P-118")
    chains.add_result("get_unit_lead", {"lead_id": "P-118"}, "P-118 is Tomas Okafor")


@pytest.mark.parametrize(
    "answer",
    [
        "G-40 Logistics, lead_id=P-118",  # the real 0.5B, twice in one run of three
        "Maren Holt's unit is G-40.",  # the real 0.5B, in another
    ],
)
def test_an_answer_from_a_link_of_the_chain_is_refused_once(answer: str) -> None:
    chains = LookupChains()
    _walk_the_chain(chains)
    ends = chains.check({"message": answer})
    assert ends is not None
    assert ends.tools == ("get_unit_lead",)
    assert ends.results == ("P-118 is Tomas Okafor",)
    assert ends.field == "message"
    assert chains.check({"message": answer}) is None  # a model that insists is taken at its word


@pytest.mark.parametrize(
    "answer",
    [
        "Tomas Okafor leads it.",
        "P-118 is Tomas Okafor",
        "Her unit is run by Tomas.",
    ],
)
def test_an_answer_with_what_the_end_found_passes(answer: str) -> None:
    chains = LookupChains()
    _walk_the_chain(chains)
    assert chains.check({"message": answer}) is None


def test_only_the_words_the_end_found_count() -> None:
    """The email result repeats the user's own name ("ilse", "brandt"): an answer that names
    her but not the address has not used it (the real 0.5B: "Ilse Brandt, user_id=u-2c8d1")."""
    chains = LookupChains()
    chains.new_turn("What is Ilse Brandt's email address?")
    chains.add_result(
        "find_accounts", {"name": "Ilse Brandt"}, "1 match: Ilse Brandt, user_id=u-2c8d1"
    )
    chains.add_result("get_account_email", {"user_id": "u-2c8d1"}, "ilse.brandt@fjord.example")
    assert chains.check({"message": "Ilse Brandt, user_id=u-2c8d1"}) is not None
    chains.new_turn("And again?")
    chains.add_result(
        "find_accounts", {"name": "Ilse Brandt"}, "1 match: Ilse Brandt, user_id=u-2c8d1"
    )
    chains.add_result("get_account_email", {"user_id": "u-2c8d1"}, "ilse.brandt@fjord.example")
    assert chains.check({"message": "It is ilse.brandt@fjord.example."}) is None


def test_a_link_stays_a_link_when_the_model_wanders_on() -> None:
    """After the end, the real 0.5B looked up the manager's name (failed: not recorded) and
    Maren Holt again (a result already seen): neither makes a new end, nor a link of the end."""
    chains = LookupChains()
    _walk_the_chain(chains)
    chains.add_result("get_staff", {"name": "Maren"}, "Maren Holt:  unit_id=G-40")
    chains.add_result("get_unit", {"unit_id": "G-40"}, "G-40 Logistics, lead_id=P-118")
    ends = chains.check({"message": "G-40 Logistics, lead_id=P-118"})
    assert ends is not None
    assert ends.results == ("P-118 is Tomas Okafor",)


def test_a_number_worked_out_from_the_ends_passes() -> None:
    """A fan-out from a listed result has two ends; their sum is found in neither."""
    chains = LookupChains()
    chains.new_turn("How much did Oda spend?")
    chains.add_result("get_orders", {"customer": "Oda"}, "orders: B-7, B-8")
    chains.add_result("get_order_sum", {"order_id": "B-7"}, "B-7 total: 40 EUR")
    chains.add_result("get_order_sum", {"order_id": "B-8"}, "B-8 total: 65 EUR")
    assert chains.check({"message": "Oda spent 105 in all."}) is None
    ends = chains.check({"message": "Oda has orders B-7 and B-8 on file."})
    assert ends is not None
    assert ends.tools == ("get_order_sum",)
    assert ends.results == ("B-7 total: 40 EUR", "B-8 total: 65 EUR")


@pytest.mark.parametrize(
    "args",
    [
        {"message": "Done."},  # a confirmation
        {"message": "Sent."},
        {"sku": "SKU-9"},  # an action's identifiers: no prose to check
        {"count": 3},
    ],
)
def test_a_call_without_prose_is_never_refused(args: dict[str, Any]) -> None:
    chains = LookupChains()
    _walk_the_chain(chains)
    assert chains.check(args) is None


def test_lookups_on_the_requests_own_values_make_no_chain() -> None:
    """Two lookups of one order the user named are siblings, not a chain: KVX-0318 is in
    both results, but it came from the request -- this turn's or an earlier one's."""
    chains = LookupChains()
    chains.new_turn("Where is my order KVX-0318?")
    chains.add_result("shipment_state", {"order_id": "KVX-0318"}, "KVX-0318: shipped")
    chains.new_turn("When will it arrive?")
    chains.add_result("arrival_date", {"order_id": "KVX-0318"}, "KVX-0318 arrives on 2026-10-07")
    chains.add_result("shipment_state", {"order_id": "KVX-0318"}, "KVX-0318: shipped")
    assert chains.check({"message": "It arrives on the seventh of October."}) is None


def test_a_value_too_short_links_nothing() -> None:
    chains = LookupChains()
    chains.new_turn("Tick off the first chore.")
    chains.add_result("list_chores", {}, "1: water plants; 2: file taxes")
    chains.add_result("finish_chore", {"chore_id": 1}, "chore 1 marked as done")
    assert chains.check({"message": "Water the plants, then file taxes."}) is None


def _guard(*tools: ToolSpec, **options: bool) -> Guardrails:
    return Guardrails(list(tools), respond_tool=True, options=GuardrailOptions(**options))


def _run(guard: Guardrails, tool: str, output: str, **args: Any) -> None:
    action = guard.check(LLMResponse(result=[ToolCall(tool=tool, args=args)]))
    assert isinstance(action, Execute), action
    guard.record([ToolResult(call=action.calls[0], output=output)])


def _hop_all_the_way(guard: Guardrails) -> None:
    guard.new_turn("Who leads Maren Holt's unit?")
    _run(guard, "get_staff", "Maren Holt: unit_id=G-40", name="Maren Holt")
    _run(guard, "get_unit", "G-40 Logistics, lead_id=P-118", unit_id="G-40")
    _run(guard, "get_unit_lead", "P-118 is Tomas Okafor", lead_id="P-118")


def _answer(guard: Guardrails, tool: str = "respond", **args: Any) -> object:
    return guard.check(LLMResponse(result=[ToolCall(tool=tool, args=args)]))


def test_the_facade_shows_the_answer_with_the_ends_result_then_takes_the_next() -> None:
    guard = _guard(*HOPS)
    _hop_all_the_way(guard)
    refused = _answer(guard, message="G-40 Logistics, lead_id=P-118")
    assert isinstance(refused, ToolErrors)
    (nudge,) = refused.errors
    assert nudge.content.startswith("[AnswerError]")
    assert "`get_unit_lead`" in nudge.content
    example = json.loads(nudge.content.split("for example: ", 1)[1])
    assert example == {"name": "respond", "arguments": {"message": "P-118 is Tomas Okafor"}}
    # Copying the example is relaying a result, not echoing the correction.
    assert isinstance(_answer(guard, message="P-118 is Tomas Okafor"), Execute)


def test_after_an_answer_from_mid_chain_the_next_is_constrained_to_the_end() -> None:
    """The refusal leaves ``answer_choices`` at what the chain's end found."""
    guard = _guard(*HOPS)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="G-40 Logistics, lead_id=P-118"), ToolErrors)
    assert guard.answer_choices == ("P-118 is Tomas Okafor",)


def test_a_user_terminal_tool_gets_its_own_call_back() -> None:
    """A report whose findings stop before the analysis: the example is the model's call with
    the end's result as the findings, every other argument kept."""
    report = ToolSpec(
        name="report",
        parameters={
            "type": "object",
            "properties": {"findings": {"type": "string"}, "title": {"type": "string"}},
            "required": ["findings"],
        },
    )
    guard = Guardrails(
        [_tool("fetch_revenue_data", "quarter"), _tool("summarize_revenue", "data"), report],
        terminal_tools=["report"],
    )
    guard.new_turn("Report the sales for Q4.")
    _run(guard, "fetch_revenue_data", "sales Q4: weeks [120, 340, 90]", quarter="Q4")
    _run(guard, "summarize_revenue", "total 550, best week 340", data="[120, 340, 90]")
    refused = _answer(guard, "report", findings="The weeks sold 120, 340 and 90.", title="Q4 sales")
    assert isinstance(refused, ToolErrors)
    assert guard.answer_choices == ()  # only respond's message is constrained to results
    example = json.loads(refused.errors[0].content.split("for example: ", 1)[1])
    assert example == {
        "name": "report",
        "arguments": {"findings": "total 550, best week 340", "title": "Q4 sales"},
    }


def test_a_history_handed_over_whole_has_its_chain_read() -> None:
    """The proxy's path: observe_history reads the turn's answered calls, and an earlier
    request's values link nothing."""
    employee = ToolCall(tool="get_staff", args={"name": "Maren Holt"}, call_id="c1")
    department = ToolCall(tool="get_unit", args={"unit_id": "G-40"}, call_id="c2")
    manager = ToolCall(tool="get_unit_lead", args={"lead_id": "P-118"}, call_id="c3")
    history = [
        Message.user("Who is P-118?"),
        Message.user("Who leads Maren Holt's unit?"),
        Message.assistant_calls([employee]),
        Message.tool_result(employee, "Maren Holt: unit_id=G-40"),
        Message.assistant_calls([department]),
        Message.tool_result(department, "G-40 Logistics, lead_id=P-118"),
        Message.assistant_calls([manager]),
        Message.tool_result(manager, "P-118 is Tomas Okafor"),
    ]
    guard = _guard(*HOPS)
    guard.observe_history(history)
    # P-118 was asked about by the user: get_unit_lead follows no result, and the chain ends at
    # get_unit, whose words the answer has.
    assert isinstance(_answer(guard, message="G-40 Logistics, lead_id=P-118"), Execute)
    guard = _guard(*HOPS)
    guard.observe_history(history[1:])
    assert isinstance(_answer(guard, message="G-40 Logistics, lead_id=P-118"), ToolErrors)


def test_the_grounding_switch_turns_it_off_and_bare_has_it_off() -> None:
    guard = _guard(*HOPS, chain_ends=False)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="G-40 Logistics, lead_id=P-118"), Execute)
    assert GuardrailOptions.off().chain_ends is False


def test_each_turn_gets_its_own_refusal() -> None:
    guard = _guard(*HOPS)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="Tomas Okafor runs it."), Execute)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="G-40 Logistics, lead_id=P-118"), ToolErrors)


def test_only_the_last_requests_are_the_users_values() -> None:
    """A session of weeks keeps REQUESTS_KEPT requests, not every one: a value the user gave
    long ago links two lookups of today's turn again."""
    chains = LookupChains()
    chains.new_turn("Where is KVX-0318?")
    for _ in range(REQUESTS_KEPT):
        chains.new_turn("And now?")
    chains.add_result("shipment_state", {"order_id": "KVX-1"}, "KVX-1: shipped, see KVX-0318")
    chains.add_result("shipment_state", {"order_id": "KVX-0318"}, "KVX-0318: arrives on Tuesday")
    assert chains.check({"message": "KVX-1 has shipped already."}) is not None


def test_a_detour_past_the_required_steps_ends_no_chain() -> None:
    """With required steps, only a chain that ends in one counts: the real 0.5B fed ZENX's
    price to paraphrase_text ("not relevant to this request") and was held to answer with that."""
    price, translate = _tool("get_fund_quote", "symbol"), _tool("paraphrase_text", "text")
    guard = Guardrails([price, translate], required_steps=["get_fund_quote"], respond_tool=True)
    guard.new_turn("What's ZENX trading at?")
    _run(guard, "get_fund_quote", "ZENX: 287.45 USD", symbol="ZENX")
    _run(guard, "paraphrase_text", "not relevant to this request", text="287.45 USD")
    assert isinstance(_answer(guard, message="ZENX is trading at 287.45 USD."), Execute)
    free = _guard(price, translate)  # no required steps: the chain's end is what counts
    free.new_turn("What's ZENX trading at?")
    _run(free, "get_fund_quote", "ZENX: 287.45 USD", symbol="ZENX")
    _run(free, "paraphrase_text", "not relevant to this request", text="287.45 USD")
    assert isinstance(_answer(free, message="ZENX is trading at 287.45 USD."), ToolErrors)
