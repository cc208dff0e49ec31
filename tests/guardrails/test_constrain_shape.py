"""The shape of a constrained reply: a list of calls, and a text branch beside the calls.

``listed`` makes every constrained reply a JSON list (after each call the model chooses between
another call and the end); ``prose`` lets a grammar admit plain text, so the model decides
*whether* it calls and the constraint only *how*. Both read nothing but the tools' schemas.
"""

from __future__ import annotations

import json

import pytest

from forge_rt.core import (
    ClientCapabilities,
    GrammarConstraint,
    JsonSchemaConstraint,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.guardrails import (
    CallShape,
    GuardrailOptions,
    Guardrails,
    NarrowedConstraint,
    choose_constraint,
    respond_spec,
    tool_call_grammar,
    tool_call_schema,
)
from forge_rt.guardrails._gbnf import Gbnf

LAMP = ToolSpec(
    name="lamp_switch",
    description="Turn a lamp on or off.",
    parameters={
        "type": "object",
        "properties": {
            "room": {"type": "string", "enum": ["kitchen", "porch"]},
            "on": {"type": "boolean"},
        },
        "required": ["room", "on"],
    },
)
TIMER = ToolSpec(
    name="garden_timer",
    description="Water the garden for some minutes.",
    parameters={
        "type": "object",
        "properties": {"minutes": {"type": "integer"}},
        "required": ["minutes"],
    },
)
TOOLS = [LAMP, TIMER, respond_spec()]
KITCHEN = {"name": "lamp_switch", "arguments": {"room": "kitchen", "on": True}}
PORCH = {"name": "lamp_switch", "arguments": {"room": "porch", "on": False}}
BOTH_CAPS = ClientCapabilities(json_schema=True, grammar=True)


def _text(value: object) -> str:
    return json.dumps(value)


def test_a_listed_schema_is_a_list_of_one_call_or_more() -> None:
    schema = tool_call_schema(TOOLS, shape=CallShape(listed=True))
    assert schema["type"] == "array"
    assert schema["minItems"] == 1
    names = {o["properties"]["name"]["const"] for o in schema["items"]["anyOf"]}
    assert names == {"lamp_switch", "garden_timer", "respond"}


def test_listed_means_nothing_where_one_call_is_all_a_reply_may_hold() -> None:
    assert tool_call_schema(
        TOOLS, shape=CallShape(parallel=False, listed=True)
    ) == tool_call_schema(TOOLS, shape=CallShape(parallel=False))


def test_a_listed_grammar_takes_lists_and_refuses_a_bare_call() -> None:
    grammar = Gbnf(tool_call_grammar(TOOLS, shape=CallShape(listed=True)))
    assert grammar.accepts(_text([KITCHEN]))
    assert grammar.accepts(_text([KITCHEN, PORCH]))
    assert not grammar.accepts(_text(KITCHEN))
    assert not grammar.accepts("[]")
    assert not grammar.accepts("The lamp is on.")


ONE_TOOL = CallShape(listed=True, one_tool=True)
TIMER_CALL = {"name": "garden_timer", "arguments": {"minutes": 12}}


def test_a_one_tool_grammar_takes_a_fan_out_and_refuses_a_mixed_list() -> None:
    """A list of one tool's calls (a fan-out over items) is admitted; a list that mixes tools,
    where a later call could take a value an earlier one has not returned yet, is not."""
    grammar = Gbnf(tool_call_grammar(TOOLS, shape=ONE_TOOL))
    assert grammar.accepts(_text([KITCHEN, PORCH]))
    assert grammar.accepts(_text([TIMER_CALL]))
    assert not grammar.accepts(_text([KITCHEN, TIMER_CALL]))
    assert not grammar.accepts(_text([TIMER_CALL, KITCHEN]))
    assert not grammar.accepts(_text(KITCHEN))


def test_a_one_tool_schema_is_one_list_per_tool() -> None:
    schema = tool_call_schema(TOOLS, shape=ONE_TOOL)
    lists = schema["anyOf"]
    assert all(branch["type"] == "array" and branch["minItems"] == 1 for branch in lists)
    names = [{o["properties"]["name"]["const"] for o in b["items"]["anyOf"]} for b in lists]
    assert names == [{"lamp_switch"}, {"garden_timer"}, {"respond"}]


def test_a_write_tool_s_list_holds_one_call() -> None:
    """A tool that changes records (``single``) is called once a reply: a list of its calls
    would change records the request did not name; a lookup's list stays a fan-out."""
    shape = CallShape(listed=True, one_tool=True, single=frozenset({"lamp_switch"}))
    grammar = Gbnf(tool_call_grammar(TOOLS, shape=shape))
    assert grammar.accepts(_text([KITCHEN]))
    assert not grammar.accepts(_text([KITCHEN, PORCH]))
    assert grammar.accepts(_text([TIMER_CALL, TIMER_CALL]))
    most = {
        next(iter(b["items"]["anyOf"]))["properties"]["name"]["const"]: b["maxItems"]
        for b in tool_call_schema(TOOLS, shape=shape)["anyOf"]
    }
    assert most["lamp_switch"] == 1
    assert most["garden_timer"] > 1


def test_a_workflow_s_fan_out_shape_knows_its_write_tools() -> None:
    """The runtime's tools say whether they are idempotent; its replies' shape follows."""
    workflow = Workflow(
        name="porch-evening",
        tools={
            "lamp_switch": ToolDef(spec=LAMP, callable=lambda room, on: "ok", idempotent=False),
            "garden_timer": ToolDef(spec=TIMER, callable=lambda minutes: "ok"),
        },
    )
    guard = Guardrails.from_workflow(workflow, options=GuardrailOptions(fan_out=True))
    assert guard.call_shape().single == frozenset({"lamp_switch"})
    assert Guardrails.from_workflow(workflow).call_shape().single == frozenset()


def test_fan_out_shapes_one_tool_lists_and_call_list_takes_precedence() -> None:
    assert GuardrailOptions(fan_out=True).call_shape() == CallShape(listed=True, one_tool=True)
    both = GuardrailOptions(fan_out=True, call_list=True).call_shape()
    assert both == CallShape(listed=True, one_tool=False)
    assert GuardrailOptions().call_shape() == CallShape()


def test_a_grammar_with_prose_takes_text_and_calls_bare_or_fenced() -> None:
    grammar = Gbnf(tool_call_grammar(TOOLS, shape=CallShape(listed=True, prose=True)))
    assert grammar.accepts("None of these tools tells the time, but it is usually light at noon.")
    assert grammar.accepts("Two lines\nof text, with {braces} later on.")
    assert grammar.accepts(_text([KITCHEN, PORCH]))
    assert grammar.accepts("```json\n" + _text([KITCHEN]) + "\n```")
    assert grammar.accepts("```\n" + _text([KITCHEN]) + "\n```")


@pytest.mark.parametrize(
    "reply",
    [
        _text(KITCHEN),  # a bare call where calls come as a list
        _text([{"name": "lamp_switch", "arguments": {"room": "attic", "on": True}}]),
        '{"name": "lamp_switch"',  # what starts a call is held to be one
        "`lamp_switch(room='porch')`",
        "<tool_call>" + _text(KITCHEN),
        " leading space",
        "",
    ],
)
def test_text_that_starts_like_a_call_is_held_to_a_valid_call(reply: str) -> None:
    assert not Gbnf(tool_call_grammar(TOOLS, shape=CallShape(listed=True, prose=True))).accepts(
        reply
    )


def test_prose_picks_the_grammar_where_the_backend_takes_both() -> None:
    decision = choose_constraint("auto", BOTH_CAPS, TOOLS, shape=CallShape(listed=True, prose=True))
    assert isinstance(decision.constraint, GrammarConstraint)
    assert decision.constraint.admits_text
    assert Gbnf(decision.constraint.gbnf).accepts("Not something I can switch.")


def test_without_a_grammar_the_calls_are_constrained_and_text_is_not_offered() -> None:
    caps = ClientCapabilities(json_schema=True)
    decision = choose_constraint("auto", caps, TOOLS, shape=CallShape(listed=True, prose=True))
    assert isinstance(decision.constraint, JsonSchemaConstraint)
    assert decision.constraint.schema["type"] == "array"


def test_the_plain_decision_is_unchanged_without_the_shape_options() -> None:
    decision = choose_constraint("auto", BOTH_CAPS, TOOLS)
    assert isinstance(decision.constraint, JsonSchemaConstraint)
    assert decision.constraint.schema == tool_call_schema(TOOLS)


def test_a_narrowed_grammar_keeps_the_shape() -> None:
    gbnf = tool_call_grammar(TOOLS, shape=CallShape(listed=True, prose=True))
    narrowing = NarrowedConstraint(
        GrammarConstraint(gbnf=gbnf, admits_text=True),
        TOOLS,
        shape=CallShape(listed=True, prose=True),
    )
    narrowed = narrowing.to([LAMP, respond_spec()])
    assert isinstance(narrowed, GrammarConstraint)
    assert narrowed.admits_text
    grammar = Gbnf(narrowed.gbnf)
    assert grammar.accepts(_text([PORCH]))
    assert not grammar.accepts(_text([{"name": "garden_timer", "arguments": {"minutes": 5}}]))
    assert grammar.accepts("Watering is not on offer right now.")


def test_a_narrowed_schema_stays_a_list() -> None:
    schema = tool_call_schema(TOOLS, shape=CallShape(listed=True))
    narrowing = NarrowedConstraint(
        JsonSchemaConstraint(schema=schema), TOOLS, shape=CallShape(listed=True)
    )
    narrowed = narrowing.to([TIMER])
    assert isinstance(narrowed, JsonSchemaConstraint)
    assert narrowed.schema["type"] == "array"
    [option] = narrowed.schema["items"]["anyOf"]
    assert option["properties"]["name"]["const"] == "garden_timer"
