"""A value from nowhere -- an id, a path, a rate no request or result holds -- is sent back once,
with where the real one comes from: the real 0.5B completed todo 1 before listing the todos,
opened a made-up path beside the one the user named, and converted at a rate it invented."""

from __future__ import annotations

from typing import Any

import pytest
from guard_support import ran, reply, spec

from forge_rt.core import LLMResponse, Message, MessageType, Role, ToolCall
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    ToolErrors,
    ToolResult,
)
from forge_rt.guardrails._guesses import MAX_GUESS_REFUSALS, ArgumentGrounding
from forge_rt.guardrails._nudges import Nudge

LIST_CHORES = spec("list_chores")
FINISH_CHORE = spec("finish_chore", chore_id="integer")
OPEN_DOC = spec("open_doc", path="string")
READ_DOC = spec("read_doc", path="string")
RATE = spec("get_fx_quote", base="string", quote="string")
CONVERT = spec("convert", amount="number", rate="number")
CHORES = "1: water plants; 2: file taxes; 3: walk dog"


def _chores() -> Guardrails:
    guard = Guardrails(
        [LIST_CHORES, FINISH_CHORE],
        required_steps=["list_chores", "finish_chore"],
        respond_tool=True,
    )
    guard.new_turn("I filed my taxes, tick that off.")
    return guard


def test_a_made_up_id_is_sent_back_to_the_step_that_finds_it() -> None:
    guard = _chores()
    action = guard.check(reply("finish_chore", chore_id=1))
    assert isinstance(action, ToolErrors)
    (nudge,) = action.errors
    assert "`chore_id`" in nudge.content
    assert "Next, call `list_chores`" in nudge.content
    ran(guard, "list_chores", CHORES)
    ran(guard, "finish_chore", "chore 2 done", chore_id=2)  # found in the list: a real value


def test_until_the_step_runs_it_is_all_the_constraint_offers() -> None:
    guard = _chores()
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), ToolErrors)
    assert [t.name for t in guard.callable_now()] == ["list_chores"]
    ran(guard, "list_chores", CHORES)
    assert [t.name for t in guard.callable_now()] == ["list_chores", "finish_chore"]


def test_a_placeholder_path_is_corrected_with_the_one_the_user_named() -> None:
    guard = Guardrails([OPEN_DOC, READ_DOC], required_steps=["read_doc"], respond_tool=True)
    guard.new_turn("When does v2 ship? See /drafts/launch.txt.")
    action = guard.check(reply("open_doc", path="/path/to/your/file"))
    assert isinstance(action, ToolErrors)
    (nudge,) = action.errors
    assert "placeholder" in nudge.content
    assert '{"name": "open_doc", "arguments": {"path": "/drafts/launch.txt"}}' in nudge.content


def test_a_guess_is_refused_once_then_taken() -> None:
    """A model that sends the same value again may have worked it out: it runs."""
    guard = _chores()
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), ToolErrors)
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), Execute)


def test_a_made_up_path_is_shown_corrected_with_the_one_the_user_named() -> None:
    guard = Guardrails([OPEN_DOC, READ_DOC], required_steps=["read_doc"], respond_tool=True)
    guard.new_turn("When does v2 ship? See /drafts/launch.txt.")
    action = guard.check(reply("open_doc", path="/home/user/documents/example.pdf"))
    assert isinstance(action, ToolErrors)
    (nudge,) = action.errors
    assert '{"name": "open_doc", "arguments": {"path": "/drafts/launch.txt"}}' in nudge.content
    assert "example.pdf" not in nudge.content  # the guess is not repeated for the model to copy
    ran(guard, "open_doc", "opened", path="/drafts/launch.txt")


def test_an_invented_rate_is_sent_to_the_lookup_that_failed() -> None:
    guard = Guardrails(
        [RATE, CONVERT], required_steps=["get_fx_quote", "convert"], respond_tool=True
    )
    guard.new_turn("How many US dollars is 250 euros?")
    action = guard.check(reply("get_fx_quote", base="euros", quote="dollars"))
    assert isinstance(action, Execute)  # words are not judged
    guard.record([ToolResult(call=action.calls[0], error=ValueError("only EUR->USD"))])
    refused = guard.check(reply("convert", amount=250, rate=1.42))
    assert isinstance(refused, ToolErrors)
    assert "Next, call `get_fx_quote`" in refused.errors[0].content
    ran(guard, "get_fx_quote", "1 EUR = 1.17 USD", base="EUR", quote="USD")
    ran(guard, "convert", "292.50", amount=250, rate=1.17)


def test_the_other_calls_of_the_reply_are_held_back() -> None:
    guard = _chores()
    reply = LLMResponse(
        result=[ToolCall(tool="list_chores"), ToolCall(tool="finish_chore", args={"chore_id": 1})]
    )
    action = guard.check(reply)
    assert isinstance(action, ToolErrors)
    assert [n.tool for n in action.errors] == ["finish_chore"]
    assert [n.tool for n in action.held_back] == ["list_chores"]


@pytest.mark.parametrize(
    "facts",
    [
        [Message.system("The user's chore is number 1.")],
        [Message.user("Earlier: what is chore 1?")],
    ],
    ids=["system-prompt", "earlier-request"],
)
def test_a_value_the_history_gave_is_no_guess(facts: list[Message]) -> None:
    """A restored or seeded history, or the proxy's request, holds facts the guardrails did
    not see being made."""
    guard = _chores()
    guard.learn_facts(facts)
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), Execute)


def test_corrections_are_not_facts() -> None:
    guard = _chores()
    nudge = Nudge(kind=MessageType.RETRY_NUDGE, role=Role.USER, content="chore 1 is the one")
    guard.learn_facts([nudge.message()])
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), ToolErrors)


def test_the_proxy_history_grounds_values_from_earlier_results() -> None:
    guard = Guardrails([LIST_CHORES, FINISH_CHORE], respond_tool=True)
    listing = ToolCall(tool="list_chores")
    guard.observe_history(
        [
            Message.user("What is on my list?"),
            Message.assistant_calls([listing]),
            Message.tool_result(listing, CHORES),
            Message.user("Tick off the taxes."),
        ]
    )
    assert isinstance(guard.check(reply("finish_chore", chore_id=2)), Execute)


def test_the_proxy_history_grounds_values_from_the_turns_own_results() -> None:
    guard = Guardrails(
        [LIST_CHORES, FINISH_CHORE],
        required_steps=["list_chores", "finish_chore"],
        respond_tool=True,
    )
    listing = ToolCall(tool="list_chores")
    guard.observe_history(
        [
            Message.user("I filed my taxes, tick that off."),
            Message.assistant_calls([listing]),
            Message.tool_result(listing, CHORES),
        ]
    )
    assert isinstance(guard.check(reply("finish_chore", chore_id=2)), Execute)


def test_nothing_is_judged_without_a_request_or_with_the_option_off() -> None:
    bare = Guardrails([LIST_CHORES, FINISH_CHORE], required_steps=["list_chores"])
    assert isinstance(bare.check(reply("finish_chore", chore_id=1)), Execute)
    off = Guardrails(
        [LIST_CHORES, FINISH_CHORE],
        required_steps=["list_chores", "finish_chore"],
        options=GuardrailOptions(guessed_values=False),
    )
    off.new_turn("I filed my taxes, tick that off.")
    assert isinstance(off.check(reply("finish_chore", chore_id=1)), Execute)


def test_no_step_and_no_candidate_means_no_refusal() -> None:
    """With nothing to point at, a correction could only say "guess again"."""
    guard = Guardrails([FINISH_CHORE], required_steps=["finish_chore"], respond_tool=True)
    guard.new_turn("I filed my taxes, tick that off.")
    assert isinstance(guard.check(reply("finish_chore", chore_id=1)), Execute)


# --- ArgumentGrounding on its own ---------------------------------------------------------------


def _check(grounding: ArgumentGrounding, source: str | None = "lookup", **args: Any) -> Any:
    props = {k: {} for k in args}
    return grounding.check(ToolCall(tool="t", args=args), props, source=source)


@pytest.mark.parametrize(
    ("args", "judged"),
    [
        ({"order_id": "KVX-3318"}, True),
        ({"path": "/tmp/x.txt"}, True),
        ({"email": "a@b.example"}, True),
        ({"task_id": 7}, True),
        ({"rate": 1.42}, True),
        ({"city": "Ghent"}, False),  # a word cannot be judged
        ({"count": 7}, False),  # a whole number in a field not named as an id
        ({"amount": 250.0}, False),
        ({"flag": True}, False),
        ({"title": "Printer 2 on fire"}, False),  # text, not one token
    ],
)
def test_which_values_are_judged(args: dict[str, Any], judged: bool) -> None:
    grounding = ArgumentGrounding()
    grounding.new_turn("do it")
    assert (_check(grounding, **args) is not None) == judged


@pytest.mark.parametrize(
    ("fact", "args"),
    [
        ("order KVX-3318 shipped", {"order_id": "kvx-3318"}),  # case folded
        ("1 EUR = 1.170 USD", {"rate": 1.17}),  # numbers compared as numbers
        ("saved as #17", {"case_number": 17}),
        ("Q4 sales", {"quarter_index": 4}),
    ],
)
def test_a_value_among_the_facts_is_no_guess(fact: str, args: dict[str, Any]) -> None:
    grounding = ArgumentGrounding()
    grounding.new_turn("do it")
    grounding.learn(fact)
    assert _check(grounding, **args) is None


def test_a_value_the_schema_lists_is_no_guess() -> None:
    grounding = ArgumentGrounding()
    grounding.new_turn("do it")
    call = ToolCall(tool="t", args={"region_id": "eu-1"})
    assert grounding.check(call, {"region_id": {"enum": ["eu-1"]}}, source="x") is None
    assert grounding.check(call, {"region_id": {"default": "eu-1"}}, source="x") is None


def test_candidates_share_the_shape_and_the_request_comes_first() -> None:
    grounding = ArgumentGrounding()
    grounding.new_turn("Status of A-7, please")
    grounding.learn("orders: B-2, C-3; placed 2027-08-19")
    guess = _check(grounding, source=None, order_id="X-9")
    assert guess is not None
    assert guess.candidates == ("A-7", "B-2", "C-3")  # not the date: another shape


def test_a_bare_number_has_no_candidates() -> None:
    """Every number has a bare number's shape: none of them says which was meant."""
    grounding = ArgumentGrounding()
    grounding.new_turn("How much did Voss spend?")
    grounding.learn("K-4 total: 40 EUR")
    assert _check(grounding, source=None, order_id="12345") is None
    guess = _check(grounding, source="list_invoices", order_id="12345")
    assert guess is not None
    assert guess.candidates == ()


def test_a_turn_refuses_at_most_a_few_guesses() -> None:
    grounding = ArgumentGrounding()
    grounding.new_turn("do it")
    refused = [_check(grounding, task_id=n) for n in range(MAX_GUESS_REFUSALS + 2)]
    assert sum(g is not None for g in refused) == MAX_GUESS_REFUSALS
    grounding.new_turn("again")
    assert _check(grounding, task_id=99) is not None


def test_the_oldest_facts_go_first() -> None:
    grounding = ArgumentGrounding(limit=40)
    grounding.new_turn("do it")
    grounding.learn("todo 11 is old news, long ago")
    grounding.learn("todo 22 is the newest fact here")
    assert _check(grounding, task_id=22) is None
    assert _check(grounding, task_id=11) is not None


def test_a_relayed_result_is_no_echo_of_a_correction_that_quoted_it() -> None:
    """The real 0.5B answered with a note's words around a result, was told that was a copied
    correction (the correction quoting it), and then had the result itself refused as a copy."""
    summarize = spec("summarize", text="string")
    guard = Guardrails([summarize], required_steps=["summarize"], respond_tool=True)
    guard.new_turn("Summarize this for me.")
    ran(guard, "summarize", "summary of 13 characters", text="some text here")
    ran(guard, "summarize", "summary of 13 characters", text="some text here")
    copied = (
        "The summary of 13 characters is done; the result is the same as before. Now answer "
        "the user with the facts from the results above"
    )
    refused = guard.check(reply("respond", message=copied))
    assert isinstance(refused, ToolErrors)
    assert "copied from a correction" in refused.errors[0].content
    assert isinstance(guard.check(reply("respond", message="summary of 13 characters")), Execute)
