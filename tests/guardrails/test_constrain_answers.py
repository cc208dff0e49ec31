"""A constraint whose ``respond`` message is one of given answers (``answers=``), in both the
JSON schema (checked by pydantic's validator built from it, as in test_constrain) and the grammar
(checked by the project's llama.cpp-syntax recognizer), and the narrowing that builds it only
when ``respond`` is offered."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from forge_rt.core import (
    GrammarConstraint,
    JsonSchemaConstraint,
    ToolSpec,
    model_from_json_schema,
)
from forge_rt.guardrails import (
    Gbnf,
    NarrowedConstraint,
    respond_spec,
    tool_call_grammar,
    tool_call_schema,
)
from forge_rt.guardrails._constrain import NARROWED_KEPT

LOOKUP = ToolSpec(
    name="find_accounts",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
TOOLS = [LOOKUP, respond_spec()]
ANSWERS = ("ilse.brandt@fjord.example", 'Weather in Lima: "17C", sunny')


def _valid(schema: dict[str, Any], reply: dict[str, object]) -> bool:
    validator = model_from_json_schema(
        "Reply", {"type": "object", "properties": {"call": schema}, "required": ["call"]}
    )
    try:
        validator.model_validate({"call": reply})
    except pydantic.ValidationError:
        return False
    return True


def _reply(tool: str, **args: str) -> dict[str, object]:
    return {"name": tool, "arguments": args}


@pytest.mark.parametrize(
    ("reply", "ok"),
    [
        (_reply("respond", message=ANSWERS[0]), True),
        (_reply("respond", message=ANSWERS[1]), True),  # a quote in it is escaped, still one
        (_reply("respond", message="1 match: Ilse Brandt"), False),
        (_reply("respond", message=ANSWERS[0] + "."), False),
        (_reply("find_accounts", name="Ilse Brandt"), True),  # the other tools are untouched
    ],
)
def test_the_schema_and_the_grammar_admit_only_the_answers(
    reply: dict[str, object], ok: bool
) -> None:
    schema = tool_call_schema(TOOLS, answers=ANSWERS)
    grammar = Gbnf(tool_call_grammar(TOOLS, answers=ANSWERS))
    valid = _valid(schema, reply)
    assert (valid, grammar.accepts(json.dumps(reply))) == (ok, ok)


def test_without_answers_any_message_is_admitted() -> None:
    reply = _reply("respond", message="anything at all")
    assert _valid(tool_call_schema(TOOLS), reply)
    assert Gbnf(tool_call_grammar(TOOLS)).accepts(json.dumps(reply))


def test_narrowing_narrows_for_answers_only_where_respond_is_offered() -> None:
    """With every tool allowed and nothing excluded, answers alone narrow the constraint; a
    narrowing without respond ignores them (and is the same one, cached)."""
    schema = JsonSchemaConstraint(schema=tool_call_schema(TOOLS))
    narrowing = NarrowedConstraint(schema, TOOLS)
    assert narrowing.to(TOOLS) is schema
    assert narrowing.to(TOOLS, answers=ANSWERS) == JsonSchemaConstraint(
        schema=tool_call_schema(TOOLS, answers=ANSWERS)
    )
    lookup_only = narrowing.to([LOOKUP])
    assert narrowing.to([LOOKUP], answers=ANSWERS) is lookup_only
    grammar = GrammarConstraint(gbnf=tool_call_grammar(TOOLS))
    assert NarrowedConstraint(grammar, TOOLS).to(TOOLS, answers=ANSWERS) == GrammarConstraint(
        gbnf=tool_call_grammar(TOOLS, answers=ANSWERS)
    )


def test_the_narrowings_kept_are_bounded() -> None:
    """Each turn's answers are a new narrowing; a long-lived session keeps only the recent ones."""
    schema = JsonSchemaConstraint(schema=tool_call_schema(TOOLS))
    narrowing = NarrowedConstraint(schema, TOOLS)
    first = narrowing.to(TOOLS, answers=("answer 0",))
    assert narrowing.to(TOOLS, answers=("answer 0",)) is first
    for turn in range(1, NARROWED_KEPT + 1):
        narrowing.to(TOOLS, answers=(f"answer {turn}",))
    rebuilt = narrowing.to(TOOLS, answers=("answer 0",))
    assert rebuilt == first
    assert rebuilt is not first  # built again: the oldest was let go


def test_a_held_answer_that_starts_with_markup_is_excluded_like_any_other() -> None:
    """After a tool-result-markup answer no answer may start with "<": a held choice that does
    is left out of the enum too."""
    from forge_rt.core import ToolCall
    from forge_rt.guardrails import StartsWith

    markup = ToolCall(tool="respond", args={"message": StartsWith("<")}, call_id="markup")
    answers = ("<b>bold</b>", "Weather in Lima: 17C, sunny")
    schema = tool_call_schema(TOOLS, exclude=[markup], answers=answers)
    assert _valid(schema, _reply("respond", message=answers[1]))
    assert not _valid(schema, _reply("respond", message=answers[0]))


@pytest.mark.parametrize(
    ("answer", "escaped"),
    [
        ('{"shelf": "QH-118"}', True),  # a quote
        ("first line\nsecond line", True),  # a line break
        ("C:\\archive", True),  # a backslash
        ("Quiet Harbour is on shelf QH-118.", False),
    ],
)
def test_an_answer_with_an_escaped_character_is_held_by_a_grammar_where_one_is_taken(
    answer: str, escaped: bool
) -> None:
    """llama-server's /completion ends a string held to such an enum early; a grammar holds it."""
    tools = [LOOKUP, respond_spec()]
    base = JsonSchemaConstraint(schema=tool_call_schema(tools))
    held = NarrowedConstraint(base, tools, grammar=True).to(tools, answers=[answer])
    assert isinstance(held, GrammarConstraint if escaped else JsonSchemaConstraint)
    if escaped:
        reply = json.dumps({"name": "respond", "arguments": {"message": answer}})
        assert Gbnf(held.gbnf).accepts(reply)
        cut = json.dumps({"name": "respond", "arguments": {"message": answer[:5]}})
        assert not Gbnf(held.gbnf).accepts(cut)
    without = NarrowedConstraint(base, tools).to(tools, answers=[answer])
    assert isinstance(without, JsonSchemaConstraint)  # a backend with no grammar
