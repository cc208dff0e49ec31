"""``cut_answers``: where text is offered, an answer stopped before its end is the answer so far.

A reply cut at the token limit, or stopped for repeating itself, that was writing an answer --
prose, or the message of the synthetic respond tool -- is taken as far as it got (a loop
written once) instead of being asked for again; a reply that began a call is still sent back.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from forge_rt.core import TOKEN_LIMIT_REASONS, LLMResponse, TextResponse, ToolSpec
from forge_rt.guardrails import (
    LINE_REPEATS,
    REPETITION_FINISH_REASON,
    GuardrailOptions,
    Guardrails,
    RetryCause,
    RetryWithNudge,
    TextAnswer,
    cut_cause,
)


class Berth(BaseModel):
    harbour: str
    vessel: str


TOOLS = [ToolSpec(name="reserve_berth", description="Reserve a berth.", parameters=Berth)]

RAMBLE = (
    "Marrow Quay has no berth tables I can read. The tides there are steep in autumn, and the "
    "harbour office keeps its own lists, which it shares with"
)
LOOP = "Ask the harbour office at Marrow Quay."


def _guard(*, cut_answers: bool = True) -> Guardrails:
    options = GuardrailOptions(prose_answers=True, cut_answers=cut_answers)
    return Guardrails(TOOLS, respond_tool=True, options=options)


def _cut(text: str, finish: str = "length") -> LLMResponse:
    return LLMResponse(result=TextResponse(content=text), raw_text=text, finish_reason=finish)


@pytest.mark.parametrize("finish", sorted(TOKEN_LIMIT_REASONS))
def test_prose_cut_at_the_token_limit_is_the_answer_so_far(finish: str) -> None:
    """Either backend shape's limit reason: OpenAI's ``length``, Anthropic's ``max_tokens``."""
    action = _guard().check(_cut(RAMBLE, finish), text_offered=True)
    assert action == TextAnswer(text=RAMBLE, rule="cut_answers")


@pytest.mark.parametrize(
    ("finish", "cause"),
    [
        ("length", RetryCause.TRUNCATED),
        ("max_tokens", RetryCause.TRUNCATED),
        (REPETITION_FINISH_REASON, RetryCause.REPEATED),
        ("stop", None),
        ("tool_calls", None),
        (None, None),
    ],
)
def test_cut_cause_names_why_a_reply_stopped_early(
    finish: str | None, cause: RetryCause | None
) -> None:
    assert cut_cause(finish) is cause


def test_prose_stopped_for_repeating_itself_is_the_answer_written_once() -> None:
    looping = "Berths are not listed here. " + " ".join([LOOP] * (LINE_REPEATS + 1))
    action = _guard().check(_cut(looping, REPETITION_FINISH_REASON), text_offered=True)
    assert action == TextAnswer(text=f"Berths are not listed here. {LOOP}", rule="cut_answers")


def test_a_respond_message_cut_inside_its_string_is_the_answer_so_far() -> None:
    reply = '```json\n[{"name": "respond", "arguments": {"message": "' + RAMBLE
    action = _guard().check(_cut(reply), text_offered=True, constrained=True)
    assert action == TextAnswer(text=RAMBLE, rule="cut_answers")


def test_a_cut_escape_does_not_break_the_message() -> None:
    reply = '{"name": "respond", "arguments": {"message": "Line one.\\nLine two \\'
    action = _guard().check(_cut(reply), text_offered=True)
    assert action == TextAnswer(text="Line one.\nLine two", rule="cut_answers")


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "reserve_berth", "arguments": {"harbour": "Marrow Quay", "vessel": "Tern',
        '{"name": "respond", "arguments": {"mess',  # cut before the message began
    ],
)
def test_a_cut_call_of_a_tool_is_still_sent_back(reply: str) -> None:
    action = _guard().check(_cut(reply), text_offered=True)
    assert isinstance(action, RetryWithNudge)


def test_without_the_rule_or_where_no_text_was_offered_a_cut_answer_is_sent_back() -> None:
    assert isinstance(
        _guard(cut_answers=False).check(_cut(RAMBLE), text_offered=True), RetryWithNudge
    )
    assert isinstance(_guard().check(_cut(RAMBLE), text_offered=False), RetryWithNudge)


def test_a_cut_copy_of_a_correction_is_no_answer() -> None:
    guard = _guard()
    first = guard.check("", text_offered=True)  # an empty reply: the nudge the model is shown
    assert isinstance(first, RetryWithNudge)
    copied = first.nudge.content[:200]
    assert isinstance(guard.check(_cut(copied), text_offered=True), RetryWithNudge)


def test_a_reply_that_ended_is_judged_as_before() -> None:
    action = _guard().check(_cut(RAMBLE, "stop"), text_offered=True)
    assert action == TextAnswer(text=RAMBLE, rule="prose_answers")
