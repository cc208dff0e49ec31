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
    _tool("get_employee", "name"),
    _tool("get_department", "dept_id"),
    _tool("get_manager", "manager_id"),
]


def _walk_the_chain(chains: LookupChains) -> None:
    """The multi-hop walk the real 0.5B made before answering from its middle."""
    chains.new_turn("Who manages Sarah Chen's department?")
    chains.add_result("get_employee", {"name": "Sarah Chen"}, "Sarah Chen: dept_id=D-12")
    chains.add_result("get_department", {"dept_id": "D-12"}, "D-12 Research, manager_id=E-301")
    chains.add_result("get_manager", {"manager_id": "E-301"}, "E-301 is Priya Natarajan")


@pytest.mark.parametrize(
    "answer",
    [
        "D-12 Research, manager_id=E-301",  # the real 0.5B, twice in one run of three
        "Sarah Chen's department is D-12.",  # the real 0.5B, in another
    ],
)
def test_an_answer_from_a_link_of_the_chain_is_refused_once(answer: str) -> None:
    chains = LookupChains()
    _walk_the_chain(chains)
    ends = chains.check({"message": answer})
    assert ends is not None
    assert ends.tools == ("get_manager",)
    assert ends.results == ("E-301 is Priya Natarajan",)
    assert ends.field == "message"
    assert chains.check({"message": answer}) is None  # a model that insists is taken at its word


@pytest.mark.parametrize(
    "answer",
    [
        "Priya Natarajan manages it.",
        "E-301 is Priya Natarajan",
        "Her department is run by Priya.",
    ],
)
def test_an_answer_with_what_the_end_found_passes(answer: str) -> None:
    chains = LookupChains()
    _walk_the_chain(chains)
    assert chains.check({"message": answer}) is None


def test_only_the_words_the_end_found_count() -> None:
    """The email result repeats the user's own name ("grace", "hopper"): an answer that names
    her but not the address has not used it (the real 0.5B: "Grace Hopper, user_id=u-7f3a9")."""
    chains = LookupChains()
    chains.new_turn("What is Grace Hopper's email address?")
    chains.add_result(
        "search_users", {"name": "Grace Hopper"}, "1 match: Grace Hopper, user_id=u-7f3a9"
    )
    chains.add_result("get_user_email", {"user_id": "u-7f3a9"}, "grace.hopper@navy.example")
    assert chains.check({"message": "Grace Hopper, user_id=u-7f3a9"}) is not None
    chains.new_turn("And again?")
    chains.add_result(
        "search_users", {"name": "Grace Hopper"}, "1 match: Grace Hopper, user_id=u-7f3a9"
    )
    chains.add_result("get_user_email", {"user_id": "u-7f3a9"}, "grace.hopper@navy.example")
    assert chains.check({"message": "It is grace.hopper@navy.example."}) is None


def test_a_link_stays_a_link_when_the_model_wanders_on() -> None:
    """After the end, the real 0.5B looked up the manager's name (failed: not recorded) and
    Sarah Chen again (a result already seen): neither makes a new end, nor a link of the end."""
    chains = LookupChains()
    _walk_the_chain(chains)
    chains.add_result("get_employee", {"name": "Sarah"}, "Sarah Chen:  dept_id=D-12")
    chains.add_result("get_department", {"dept_id": "D-12"}, "D-12 Research, manager_id=E-301")
    ends = chains.check({"message": "D-12 Research, manager_id=E-301"})
    assert ends is not None
    assert ends.results == ("E-301 is Priya Natarajan",)


def test_a_number_worked_out_from_the_ends_passes() -> None:
    """A fan-out from a listed result has two ends; their sum is found in neither."""
    chains = LookupChains()
    chains.new_turn("How much did Lin spend?")
    chains.add_result("get_orders", {"customer": "Lin"}, "orders: A-1, A-2")
    chains.add_result("get_order_total", {"order_id": "A-1"}, "A-1 total: 40 EUR")
    chains.add_result("get_order_total", {"order_id": "A-2"}, "A-2 total: 65 EUR")
    assert chains.check({"message": "Lin spent 105 in all."}) is None
    ends = chains.check({"message": "Lin has orders A-1 and A-2 on file."})
    assert ends is not None
    assert ends.tools == ("get_order_total",)
    assert ends.results == ("A-1 total: 40 EUR", "A-2 total: 65 EUR")


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
    """Two lookups of one order the user named are siblings, not a chain: ORD-0042 is in
    both results, but it came from the request -- this turn's or an earlier one's."""
    chains = LookupChains()
    chains.new_turn("Where is my order ORD-0042?")
    chains.add_result("order_status", {"order_id": "ORD-0042"}, "ORD-0042: shipped")
    chains.new_turn("When will it arrive?")
    chains.add_result("delivery_date", {"order_id": "ORD-0042"}, "ORD-0042 arrives on 2026-12-03")
    chains.add_result("order_status", {"order_id": "ORD-0042"}, "ORD-0042: shipped")
    assert chains.check({"message": "It arrives on the third of December."}) is None


def test_a_value_too_short_links_nothing() -> None:
    chains = LookupChains()
    chains.new_turn("Tick off the first todo.")
    chains.add_result("list_todos", {}, "1: water plants; 2: file taxes")
    chains.add_result("complete_todo", {"todo_id": 1}, "todo 1 marked as done")
    assert chains.check({"message": "Water the plants, then file taxes."}) is None


def _guard(*tools: ToolSpec, **options: bool) -> Guardrails:
    return Guardrails(list(tools), respond_tool=True, options=GuardrailOptions(**options))


def _run(guard: Guardrails, tool: str, output: str, **args: Any) -> None:
    action = guard.check(LLMResponse(result=[ToolCall(tool=tool, args=args)]))
    assert isinstance(action, Execute), action
    guard.record([ToolResult(call=action.calls[0], output=output)])


def _hop_all_the_way(guard: Guardrails) -> None:
    guard.new_turn("Who manages Sarah Chen's department?")
    _run(guard, "get_employee", "Sarah Chen: dept_id=D-12", name="Sarah Chen")
    _run(guard, "get_department", "D-12 Research, manager_id=E-301", dept_id="D-12")
    _run(guard, "get_manager", "E-301 is Priya Natarajan", manager_id="E-301")


def _answer(guard: Guardrails, tool: str = "respond", **args: Any) -> object:
    return guard.check(LLMResponse(result=[ToolCall(tool=tool, args=args)]))


def test_the_facade_shows_the_answer_with_the_ends_result_then_takes_the_next() -> None:
    guard = _guard(*HOPS)
    _hop_all_the_way(guard)
    refused = _answer(guard, message="D-12 Research, manager_id=E-301")
    assert isinstance(refused, ToolErrors)
    (nudge,) = refused.errors
    assert nudge.content.startswith("[AnswerError]")
    assert "`get_manager`" in nudge.content
    example = json.loads(nudge.content.split("for example: ", 1)[1])
    assert example == {"name": "respond", "arguments": {"message": "E-301 is Priya Natarajan"}}
    # Copying the example is relaying a result, not echoing the correction.
    assert isinstance(_answer(guard, message="E-301 is Priya Natarajan"), Execute)


def test_after_an_answer_from_mid_chain_the_next_is_constrained_to_the_end() -> None:
    """The refusal leaves ``answer_choices`` at what the chain's end found."""
    guard = _guard(*HOPS)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="D-12 Research, manager_id=E-301"), ToolErrors)
    assert guard.answer_choices == ("E-301 is Priya Natarajan",)


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
        [_tool("fetch_sales_data", "quarter"), _tool("analyze_sales", "data"), report],
        terminal_tools=["report"],
    )
    guard.new_turn("Report the sales for Q4.")
    _run(guard, "fetch_sales_data", "sales Q4: weeks [120, 340, 90]", quarter="Q4")
    _run(guard, "analyze_sales", "total 550, best week 340", data="[120, 340, 90]")
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
    employee = ToolCall(tool="get_employee", args={"name": "Sarah Chen"}, call_id="c1")
    department = ToolCall(tool="get_department", args={"dept_id": "D-12"}, call_id="c2")
    manager = ToolCall(tool="get_manager", args={"manager_id": "E-301"}, call_id="c3")
    history = [
        Message.user("Who is E-301?"),
        Message.user("Who manages Sarah Chen's department?"),
        Message.assistant_calls([employee]),
        Message.tool_result(employee, "Sarah Chen: dept_id=D-12"),
        Message.assistant_calls([department]),
        Message.tool_result(department, "D-12 Research, manager_id=E-301"),
        Message.assistant_calls([manager]),
        Message.tool_result(manager, "E-301 is Priya Natarajan"),
    ]
    guard = _guard(*HOPS)
    guard.observe_history(history)
    # E-301 was asked about by the user: get_manager follows no result, and the chain ends at
    # get_department, whose words the answer has.
    assert isinstance(_answer(guard, message="D-12 Research, manager_id=E-301"), Execute)
    guard = _guard(*HOPS)
    guard.observe_history(history[1:])
    assert isinstance(_answer(guard, message="D-12 Research, manager_id=E-301"), ToolErrors)


def test_the_grounding_switch_turns_it_off_and_bare_has_it_off() -> None:
    guard = _guard(*HOPS, chain_ends=False)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="D-12 Research, manager_id=E-301"), Execute)
    assert GuardrailOptions.off().chain_ends is False


def test_each_turn_gets_its_own_refusal() -> None:
    guard = _guard(*HOPS)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="Priya Natarajan runs it."), Execute)
    _hop_all_the_way(guard)
    assert isinstance(_answer(guard, message="D-12 Research, manager_id=E-301"), ToolErrors)


def test_only_the_last_requests_are_the_users_values() -> None:
    """A session of weeks keeps REQUESTS_KEPT requests, not every one: a value the user gave
    long ago links two lookups of today's turn again."""
    chains = LookupChains()
    chains.new_turn("Where is ORD-0042?")
    for _ in range(REQUESTS_KEPT):
        chains.new_turn("And now?")
    chains.add_result("order_status", {"order_id": "ORD-1"}, "ORD-1: shipped, see ORD-0042")
    chains.add_result("order_status", {"order_id": "ORD-0042"}, "ORD-0042: arrives on Friday")
    assert chains.check({"message": "ORD-1 has shipped already."}) is not None


def test_a_detour_past_the_required_steps_ends_no_chain() -> None:
    """With required steps, only a chain that ends in one counts: the real 0.5B fed ACME's
    price to translate_text ("not relevant to this request") and was held to answer with that."""
    price, translate = _tool("get_stock_price", "symbol"), _tool("translate_text", "text")
    guard = Guardrails([price, translate], required_steps=["get_stock_price"], respond_tool=True)
    guard.new_turn("What's ACME trading at?")
    _run(guard, "get_stock_price", "ACME: 412.30 USD", symbol="ACME")
    _run(guard, "translate_text", "not relevant to this request", text="412.30 USD")
    assert isinstance(_answer(guard, message="ACME is trading at 412.30 USD."), Execute)
    free = _guard(price, translate)  # no required steps: the chain's end is what counts
    free.new_turn("What's ACME trading at?")
    _run(free, "get_stock_price", "ACME: 412.30 USD", symbol="ACME")
    _run(free, "translate_text", "not relevant to this request", text="412.30 USD")
    assert isinstance(_answer(free, message="ACME is trading at 412.30 USD."), ToolErrors)
