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
    """A result a later call followed was a step on the way: only the chain's end counts."""
    chains = LookupChains()
    chains.new_turn("Which shelf holds the Brass Funnel?")
    chains.add_result("find_item", {"name": "Brass Funnel"}, "Brass Funnel: shelf_id=SH-31")
    chains.add_result("get_shelf", {"shelf_id": "SH-31"}, "SH-31 is in aisle North 4")
    assert chains.left_out({"message": "It is in aisle North 4 now."}) is None
    assert chains.left_out({"message": "It is on shelf SH-31 for sure."}) is not None


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
    _fan_out(chains)
    chains.add_result("shop_hours", {"day": "friday"}, "open 09:00 to 17:30")
    answer = {"message": "The kettle weighs 3.25 and the ladle 0.40."}
    assert chains.left_out(answer, steps=frozenset({"find_item"})) is None
    assert chains.left_out(answer) is not None


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


def test_off_by_default_until_judged_on_dev() -> None:
    assert not GuardrailOptions().every_end
    guard = _guard()
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
