"""A call that picks an item of a listing the request does not name, while it names another,
is sent back once with that item's id: the real 0.5B listed the todos and completed the first."""

from __future__ import annotations

import json

import pytest
from guard_support import ran, reply, spec

from forge_rt.core import GrammarConstraint, JsonSchemaConstraint, ToolCall
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    NarrowedConstraint,
    ToolErrors,
    ToolResult,
    tool_call_grammar,
    tool_call_schema,
)
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
    field = "task_id" if isinstance(value, int) else "order_id"
    assert selection.check(ToolCall(tool="complete", args={field: value})) is None


def test_string_ids_keep_their_spelling() -> None:
    selection = ItemSelection()
    selection.reset("Open the budget file.")
    selection.add_result("list_files", "F-1 holiday photos\nF-2 budget 2026\nF-3 notes")
    other = selection.check(ToolCall(tool="open_doc", args={"file_id": "f-1"}))
    assert other is not None
    assert (other.value, other.named, other.picked) == ("F-2", "budget 2026", "holiday photos")


# named_row: an id no fact holds, sent again after a listing whose rows the request names one of.

LIST_KENNELS = spec("list_kennels", size="string")
MOVE_KENNEL = spec("move_kennel", kennel_id="string", wing="string")
KENNELS = "kb-7710 | Sigrun Lindqvist | large\nKB-2203 | Tomasz Quayle | large\nkb-9042 | Sigrun Obi | small"


def _kennels(options: GuardrailOptions | None = None) -> Guardrails:
    guard = Guardrails(
        [LIST_KENNELS, MOVE_KENNEL],
        required_steps=["list_kennels", "move_kennel"],
        respond_tool=True,
        options=options or GuardrailOptions(named_row=True),
    )
    guard.new_turn("Move Tomasz Quayle's kennel to the east wing.")
    first = guard.check(reply("move_kennel", kennel_id="kb-0001", wing="east"))
    assert isinstance(first, ToolErrors)  # guessed_values: list the kennels first
    ran(guard, "list_kennels", KENNELS, size="large")
    return guard


def test_a_made_up_id_sent_again_after_the_listing_gets_the_named_rows_id() -> None:
    guard = _kennels()
    action = guard.check(reply("move_kennel", kennel_id="kb-0001", wing="east"))
    assert isinstance(action, ToolErrors)
    assert action.rule == "named_row"
    (nudge,) = action.errors
    assert "'Tomasz Quayle large'" in nudge.content
    assert '"kennel_id": "KB-2203", "wing": "east"' in nudge.content
    assert "kb-0001" not in nudge.content  # the made-up value is not shown again
    assert isinstance(guard.check(reply("move_kennel", kennel_id="KB-2203", wing="east")), Execute)


def test_named_row_once_a_value_and_switched_by_its_name() -> None:
    guard = _kennels()
    assert isinstance(
        guard.check(reply("move_kennel", kennel_id="kb-0001", wing="east")), ToolErrors
    )
    assert isinstance(guard.check(reply("move_kennel", kennel_id="kb-0001", wing="east")), Execute)
    guard = _kennels(GuardrailOptions(named_row=False))
    assert isinstance(guard.check(reply("move_kennel", kennel_id="kb-0001", wing="east")), Execute)
    assert GuardrailOptions().named_row


def _accepts_all(field: str, value: str | int) -> bool:
    return True


@pytest.mark.parametrize(
    ("request_text", "listing", "value", "expected"),
    [
        ("Tomasz Quayle's kennel, please.", KENNELS, "kb-0001", "KB-2203"),
        ("Sigrun's kennel, please.", KENNELS, "kb-0001", None),  # two rows name Sigrun
        ("Sigrun Obi's kennel, please.", KENNELS, "kb-0001", "kb-9042"),  # most words wins
        ("Any kennel will do.", KENNELS, "kb-0001", None),  # the request names no row
        (
            "Tomasz Quayle's kennel.",
            "KB-2203 | Tomasz Quayle | 2026-04-01\nKB-1 | Tove Moss",
            "x-1",
            None,
        ),
        ("Tomasz Quayle's kennel.", "kennel KB-2203 of Tomasz Quayle", "x-1", None),  # one row
        ("Ward 12 for Ines Moreau.", "41 | Ines Moreau\n42 | Karl Moss", 7, 41),
    ],
    ids=["named", "tie", "most-words", "names-none", "two-ids", "one-row", "integer"],
)
def test_which_row_named_row_reads(
    request_text: str, listing: str, value: str | int, expected: str | int | None
) -> None:
    selection = ItemSelection()
    selection.reset(request_text)
    selection.add_result("list", listing)
    call = ToolCall(tool="change", args={"record_id": value})
    row = selection.named_row(call, unfounded=lambda f, v: True, accepts=_accepts_all)
    assert (row.value if row is not None else None) == expected


def test_named_row_leaves_a_value_the_facts_hold_and_one_its_schema_refuses() -> None:
    selection = ItemSelection()
    selection.reset("Tomasz Quayle's kennel, please.")
    selection.add_result("list", KENNELS)
    call = ToolCall(tool="change", args={"record_id": "kb-0001"})
    assert selection.named_row(call, lambda f, v: False, _accepts_all) is None
    assert selection.named_row(call, lambda f, v: True, lambda f, v: False) is None
    assert selection.named_row(call, lambda f, v: True, _accepts_all) is not None


def test_named_row_pins_the_tools_next_call_to_the_rows_id_until_it_runs() -> None:
    guard = _kennels()
    assert guard.pinned_calls == ()
    assert isinstance(
        guard.check(reply("move_kennel", kennel_id="kb-0001", wing="east")), ToolErrors
    )
    (pin,) = guard.pinned_calls
    assert (pin.tool, pin.args) == ("move_kennel", {"kennel_id": "KB-2203"})
    base = JsonSchemaConstraint(schema=tool_call_schema(guard.tools))
    narrowing = NarrowedConstraint(base, guard.tools)
    narrowed = narrowing.to(guard.tools, pins=guard.pinned_calls)
    assert isinstance(narrowed, JsonSchemaConstraint)
    assert '"enum": ["KB-2203"]' in json.dumps(narrowed.schema)
    assert narrowing.to(guard.tools) is base  # unpinned: as it was
    grammar = NarrowedConstraint(
        GrammarConstraint(gbnf=tool_call_grammar(guard.tools)), guard.tools
    )
    held = grammar.to(guard.tools, pins=guard.pinned_calls)
    assert isinstance(held, GrammarConstraint)
    assert "KB-2203" in held.gbnf
    ran(guard, "move_kennel", "moved", kennel_id="KB-2203", wing="east")
    assert guard.pinned_calls == ()
