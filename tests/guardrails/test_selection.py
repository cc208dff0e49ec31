"""A call that picks an item of a listing the request does not name, while it names another,
is sent back once with that item's id: the real 0.5B listed the todos and completed the first."""

from __future__ import annotations

import pytest
from guard_support import reply, spec

from forge_rt.core import ToolCall
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolErrors, ToolResult
from forge_rt.guardrails._selection import ItemSelection

LIST_CHORES = spec("list_chores")
FINISH_CHORE = spec("finish_chore", chore_id="integer")
CHORES = "1: water plants; 2: file taxes; 3: walk dog"


def _listed(options: GuardrailOptions | None = None) -> Guardrails:
    guard = Guardrails(
        [LIST_CHORES, FINISH_CHORE],
        required_steps=["list_chores", "finish_chore"],
        respond_tool=True,
        **({"options": options} if options is not None else {}),
    )
    guard.new_turn("I filed my taxes, tick that off.")
    action = guard.check(reply("list_chores"))
    assert isinstance(action, Execute)
    guard.record([ToolResult(call=action.calls[0], output=CHORES)])
    return guard


def test_the_item_the_request_names_is_shown_in_place_of_the_one_picked() -> None:
    guard = _listed()
    action = guard.check(reply("finish_chore", chore_id=1))
    assert isinstance(action, ToolErrors)
    (nudge,) = action.errors
    assert "'water plants'" in nudge.content
    assert "'file taxes'" in nudge.content
    assert '{"name": "finish_chore", "arguments": {"chore_id": 2}}' in nudge.content
    assert isinstance(guard.check(reply("finish_chore", chore_id=2)), Execute)


def test_once_per_turn_and_the_named_item_passes() -> None:
    guard = _listed()
    assert isinstance(guard.check(reply("finish_chore", chore_id=2)), Execute)
    guard = _listed()
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), ToolErrors)
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), Execute)


def test_off_with_listing_pick() -> None:
    guard = _listed(GuardrailOptions(listing_pick=False))
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), Execute)


@pytest.mark.parametrize(
    ("request_text", "listing", "value"),
    [
        ("Tick off the first one.", CHORES, 1),  # the request names no item
        ("Taxes and plants are done.", CHORES, 3),  # it names two
        ("I filed my taxes, tick that off.", "1: file taxes; 2: file taxes", 1),  # ids repeat
        ("How much did Voss spend?", "orders: K-4, K-7", "K-4"),  # rows without words
        ("I filed my taxes, tick that off.", "todo 1 is open", 1),  # no listing
    ],
    ids=["names-none", "names-two", "same-id-twice", "bare-ids", "one-row"],
)
def test_what_is_left_to_the_model(request_text: str, listing: str, value: str | int) -> None:
    selection = ItemSelection()
    selection.reset(request_text)
    selection.add_result("list", listing)
    field = "todo_id" if isinstance(value, int) else "order_id"
    assert selection.check(ToolCall(tool="complete", args={field: value})) is None


def test_string_ids_keep_their_spelling() -> None:
    selection = ItemSelection()
    selection.reset("Open the budget file.")
    selection.add_result("list_files", "F-1 holiday photos\nF-2 budget 2026\nF-3 notes")
    other = selection.check(ToolCall(tool="open_doc", args={"file_id": "f-1"}))
    assert other is not None
    assert (other.value, other.named, other.picked) == ("F-2", "budget 2026", "holiday photos")
