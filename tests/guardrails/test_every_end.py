"""An answer must use every result no later call followed (the rule ``every_end``), once a turn."""

from __future__ import annotations

import json
from typing import Any

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors, ToolResult
from forge_rt.guardrails._chains import LookupChains


def _fan_out(chains: LookupChains) -> None:
    """Two lookups of the request's own items: two ends, neither followed."""
    chains.new_turn("What do the Copper Kettle and the Tin Ladle weigh?")
    _lookups(chains)


def _lookups(chains: LookupChains) -> None:
    chains.add_result(
        "find_item", {"name": "Copper Kettle"}, "name: Copper Kettle item id: q-551 weight: 3.25"
    )
    chains.add_result(
        "find_item", {"name": "Tin Ladle"}, "name: Tin Ladle item id: q-902 weight: 0.40"
    )


def test_an_answer_with_one_of_two_lookups_is_refused_once() -> None:
    chains = LookupChains()
    _fan_out(chains)
    answer = {"message": "The weight of the Tin Ladle is 0.40, like the Copper Kettle."}
    left = chains.left_out(answer)
    assert left is not None
    assert left.tools == ("find_item",)
    assert left.results == (
        "name: Copper Kettle item id: q-551 weight: 3.25",
        "name: Tin Ladle item id: q-902 weight: 0.40",
    )
    assert left.field == "message"
    assert chains.left_out(answer) is None  # a model that insists is taken at its word


def test_the_labels_every_result_shares_name_no_end() -> None:
    """ "weight" and "item" are in both results: an answer that says them has used neither."""
    chains = LookupChains()
    _fan_out(chains)
    assert chains.left_out({"message": "Each item has a weight on file."}) is not None


def test_an_answer_with_something_of_each_end_passes() -> None:
    chains = LookupChains()
    _fan_out(chains)
    assert chains.left_out({"message": "The kettle weighs 3.25 and the ladle 0.40."}) is None


def test_a_number_worked_out_from_the_ends_passes() -> None:
    chains = LookupChains()
    _fan_out(chains)
    assert chains.left_out({"message": "Together they weigh 3.65 in all."}) is None


def test_the_links_of_a_chain_are_not_ends() -> None:
    """A result a later call followed was a step on the way: only each chain's end counts."""
    chains = LookupChains()
    chains.new_turn("Which aisles hold the Brass Funnel and the Clay Jug?")
    chains.add_result("find_item", {"name": "Brass Funnel"}, "Brass Funnel: shelf_id=SH-31")
    chains.add_result("get_shelf", {"shelf_id": "SH-31"}, "SH-31 is in aisle North-4")
    chains.add_result("find_item", {"name": "Clay Jug"}, "Clay Jug: shelf_id=SH-07")
    chains.add_result("get_shelf", {"shelf_id": "SH-07"}, "SH-07 is in aisle South-2")
    assert chains.left_out({"message": "They are in aisles North-4 and South-2."}) is None
    left = chains.left_out({"message": "They are on shelves SH-31 and SH-07."})
    assert left is not None
    assert left.results == ("SH-31 is in aisle North-4", "SH-07 is in aisle South-2")


def test_a_record_fetched_again_in_more_detail_asks_nothing_of_the_first() -> None:
    """The first fetch has no word the second lacks: the answer need only use the second."""
    chains = LookupChains()
    chains.new_turn("When was the Iron Trivet made?")
    chains.add_result("find_item", {"name": "Iron Trivet"}, "Iron Trivet id r-77")
    chains.add_result(
        "find_item", {"name": "Iron Trivet", "detail": "full"}, "Iron Trivet id r-77 made 1931"
    )
    assert chains.left_out({"message": "The trivet was made in 1931."}) is None


def test_with_required_steps_only_their_ends_count() -> None:
    chains = LookupChains()
    chains.new_turn("What do the Copper Kettle and the Tin Ladle weigh, and are you open friday?")
    _lookups(chains)
    chains.add_result("shop_hours", {"day": "friday"}, "open 09:00 to 17:30")
    answer = {"message": "The kettle weighs 3.25 and the ladle 0.40."}
    assert chains.left_out(answer, steps=frozenset({"find_item"})) is None
    assert chains.left_out(answer) is not None


def test_a_lone_end_is_left_to_answer_grounding() -> None:
    """One lookup has no "every": "Warm." for "28 C" is grounding's to judge, not this rule's."""
    chains = LookupChains()
    chains.new_turn("How warm is it in Velden?")
    chains.add_result("read_gauge", {"city": "Velden"}, "28 C, clear sky")
    assert chains.left_out({"message": "It is warm in Velden today."}) is None


def test_a_lookup_of_a_value_from_nowhere_is_a_detour_not_an_end() -> None:
    """The task asked for two items; a third lookup, of a value neither the request nor a
    result gave, owes the answer nothing."""
    chains = LookupChains()
    _fan_out(chains)
    chains.add_result(
        "find_item", {"name": "Pewter Jug"}, "name: Pewter Jug item id: q-3 weight: 9"
    )
    assert chains.left_out({"message": "The kettle weighs 3.25 and the ladle 0.40."}) is None


def test_a_result_a_later_call_took_the_request_s_value_from_was_consulted() -> None:
    """The listing the user's own file was picked from, the stock checked before an order of
    the item the user named: consulted on the way, no end of the answer."""
    chains = LookupChains()
    chains.new_turn("Order two crates of plum jam and one of fig jam.")
    chains.add_result("stock_of", {"item": "plum jam"}, "plum jam: 40 crates in stock")
    chains.add_result("stock_of", {"item": "fig jam"}, "fig jam: 12 crates in stock")
    chains.consult("reserve_item", {"item": "plum jam", "crates": 2})
    chains.add_result("reserve_item", {"item": "plum jam", "crates": 2}, "order PJ-88 placed")
    chains.consult("reserve_item", {"item": "fig jam", "crates": 1})
    chains.add_result("reserve_item", {"item": "fig jam", "crates": 1}, "order FJ-12 placed")
    assert chains.left_out({"message": "Placed orders PJ-88 and FJ-12 for you."}) is None
    # The same call again is no consultation: the lookup is still an end.
    again = LookupChains()
    again.new_turn("What stock is there of plum jam and of fig jam?")
    again.add_result("stock_of", {"item": "plum jam"}, "plum jam: 40 crates in stock")
    again.add_result("stock_of", {"item": "fig jam"}, "fig jam: 12 crates in stock")
    again.consult("stock_of", {"item": "plum jam"})
    assert again.left_out({"message": "There are 12 crates of fig jam."}) is not None


def test_a_value_is_whole_and_a_word_may_be_inflected() -> None:
    """Two dates that share a year and a month are two values; "rains" uses "rain"."""
    chains = LookupChains()
    chains.new_turn("When did Arlo Venn and Isa Morrow start, and is it wet at Brill?")
    chains.add_result("find_staff", {"name": "Arlo Venn"}, "Arlo Venn started 2025-03-14")
    chains.add_result("find_staff", {"name": "Isa Morrow"}, "Isa Morrow started 2025-03-02")
    chains.add_result("conditions", {"site": "Brill"}, "Brill: heavy rain")
    whole = {"message": "Arlo Venn on 2025-03-14, Isa Morrow on 2025-03-02; it rains at Brill."}
    assert chains.left_out(whole) is None
    assert chains.left_out({"message": "Arlo Venn on 2025-03-14; it rains at Brill."}) is not None


def test_a_call_without_prose_is_never_refused() -> None:
    chains = LookupChains()
    _fan_out(chains)
    assert chains.left_out({"message": "Done."}) is None
    assert chains.left_out({"item_id": "q-551"}) is None


def test_a_new_turn_asks_only_for_its_own_ends() -> None:
    chains = LookupChains()
    _fan_out(chains)
    chains.new_turn("And the Tin Ladle alone?")
    chains.add_result(
        "find_item", {"name": "Tin Ladle"}, "name: Tin Ladle item id: q-902 weight: 0.40"
    )
    assert chains.left_out({"message": "The Tin Ladle weighs 0.40 kilograms."}) is None


FIND = ToolSpec(
    name="find_item",
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
)


def _guard(**options: bool) -> Guardrails:
    guard = Guardrails([FIND], respond_tool=True, options=GuardrailOptions(**options))
    guard.new_turn("What do the Copper Kettle and the Tin Ladle weigh?")
    for name, output in (
        ("Copper Kettle", "name: Copper Kettle item id: q-551 weight: 3.25"),
        ("Tin Ladle", "name: Tin Ladle item id: q-902 weight: 0.40"),
    ):
        action = guard.check(LLMResponse(result=[ToolCall(tool="find_item", args={"name": name})]))
        assert isinstance(action, Execute), action
        guard.record([ToolResult(call=action.calls[0], output=output)])
    return guard


def _answer(guard: Guardrails, **args: Any) -> object:
    return guard.check(LLMResponse(result=[ToolCall(tool="respond", args=args)]))


def test_the_facade_sends_it_back_and_holds_the_next_answer_to_all_the_ends() -> None:
    guard = _guard(every_end=True)
    refused = _answer(guard, message="The Tin Ladle weighs 0.40 kilograms.")
    assert isinstance(refused, ToolErrors)
    assert refused.rule == "every_end"
    (nudge,) = refused.errors
    assert nudge.content.startswith("[AnswerError]")
    example = json.loads(nudge.content.split("for example: ", 1)[1])
    assert "q-551" in example["arguments"]["message"]
    assert "q-902" in example["arguments"]["message"]
    # Not one result or the other: both, as one answer.
    assert guard.answer_choices == (
        "name: Copper Kettle item id: q-551 weight: 3.25\n"
        "name: Tin Ladle item id: q-902 weight: 0.40",
    )


def test_on_by_default_and_off_by_its_switch() -> None:
    assert GuardrailOptions().every_end
    guard = _guard(every_end=False)
    assert isinstance(_answer(guard, message="The Tin Ladle weighs 0.40 kilograms."), Execute)


def test_a_record_reached_again_by_its_id_is_still_the_end_of_its_item() -> None:
    """Found by name, then fetched by the id the search gave, finding nothing new: the search
    result is still what the answer must use for that item."""
    chains = LookupChains()
    chains.new_turn("When did Moss Lane and Fern Row open?")
    chains.add_result(
        "find_site", {"name": "Moss Lane"}, "name: Moss Lane, site_id: m1x2z, opened: 1998-04-02"
    )
    chains.add_result("get_site", {"site_id": "m1x2z"}, "site_id: m1x2z, opened: 1998-04-02")
    chains.add_result(
        "find_site", {"name": "Fern Row"}, "name: Fern Row, site_id: k7p3q, opened: 2004-09-30"
    )
    left = chains.left_out({"message": "Fern Row opened on 2004-09-30."})
    assert left is not None
    assert left.tools == ("find_site",)
    assert len(left.results) == 2
    chains.new_turn("When did Moss Lane and Fern Row open?")
    chains.add_result(
        "find_site", {"name": "Moss Lane"}, "name: Moss Lane, site_id: m1x2z, opened: 1998-04-02"
    )
    chains.add_result("get_site", {"site_id": "m1x2z"}, "site_id: m1x2z, opened: 1998-04-02")
    chains.add_result(
        "find_site", {"name": "Fern Row"}, "name: Fern Row, site_id: k7p3q, opened: 2004-09-30"
    )
    assert chains.left_out({"message": "On 1998-04-02 and on 2004-09-30."}) is None


def test_an_answer_taken_at_its_word_after_grounding_refused_it_is_not_refused_again() -> None:
    guard = _guard(every_end=True)
    refused = _answer(guard, message="Both are light enough to carry.")
    assert isinstance(refused, ToolErrors)
    assert refused.rule == "answer_grounding"
    assert isinstance(_answer(guard, message="Both are light enough to carry."), Execute)
