"""Bounded constraints and the token budget that follows from them; parallel calls in one reply."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from test_constrain import PING, TOOLS, WEATHER
from test_constrain_gbnf import accepts, parse_gbnf

from forge_rt.core import (
    ClientCapabilities,
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    ToolSpec,
    model_from_json_schema,
)
from forge_rt.guardrails import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_LENGTH,
    FREE_CALL_MIN_TOKENS,
    INTEGER_TOKENS,
    MAX_REPLY_TOKENS,
    PLAIN_REPLY_TOKENS,
    STRING_CHARS_PER_TOKEN,
    CallShape,
    NarrowedConstraint,
    bounded,
    call_tokens,
    choose_constraint,
    instance_tokens,
    reply_token_budget,
    rescue,
    tool_call_grammar,
    tool_call_schema,
)

TAGS = ToolSpec(
    name="tag",
    parameters={
        "type": "object",
        "properties": {"labels": {"type": "array", "items": {"type": "string"}}},
        "required": ["labels"],
    },
)


def _validator(schema: dict[str, Any]) -> type[pydantic.BaseModel]:
    return model_from_json_schema(
        "Reply", {"type": "object", "properties": {"reply": schema}, "required": ["reply"]}
    )


def _admits(schema: dict[str, Any], instance: Any) -> bool:
    try:
        _validator(schema).model_validate({"reply": instance})
    except pydantic.ValidationError:
        return False
    return True


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


# --- bounds in the constraint -----------------------------------------------------------------


def test_unbounded_strings_and_arrays_get_the_defaults() -> None:
    """A string without maxLength and an array without maxItems are bounded; enums are not."""
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
    }
    props = bounded(schema)["properties"]
    assert props["city"] == {"type": "string", "maxLength": DEFAULT_MAX_LENGTH}
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string", "maxLength": DEFAULT_MAX_LENGTH},
        "maxItems": DEFAULT_MAX_ITEMS,
    }
    assert props["unit"] == {"type": "string", "enum": ["c", "f"]}
    assert props["note"]["anyOf"][0] == {"type": "string", "maxLength": DEFAULT_MAX_LENGTH}


def test_the_schema_own_bounds_are_kept() -> None:
    """A declared maxLength or maxItems stays, however large; a minimum above the default wins."""
    assert bounded({"type": "string", "maxLength": 5000})["maxLength"] == 5000
    assert bounded({"type": "string", "minLength": 600})["maxLength"] == 600
    assert bounded({"type": "array", "minItems": 20})["maxItems"] == 20


def test_the_tool_schema_itself_is_not_changed() -> None:
    """Only the constraint is bounded: validation still accepts a longer string than 512."""
    long_city = "x" * (DEFAULT_MAX_LENGTH + 1)
    assert WEATHER.validate_args({"city": long_city}) is not None
    schema = tool_call_schema([WEATHER], shape=CallShape(parallel=False))
    assert not _admits(schema, call("get_air_quality", city=long_city))
    assert _admits(schema, call("get_air_quality", city=long_city[:-1]))


def test_the_grammar_bounds_strings_and_whitespace() -> None:
    """The GBNF admits a 512-character string, not 513, and at most 12 characters of space."""
    rules = parse_gbnf(tool_call_grammar([WEATHER]))
    text = '{"name": "get_air_quality", "arguments": {"city": "%s"}}'
    assert accepts(rules, text % ("x" * DEFAULT_MAX_LENGTH))
    assert not accepts(rules, text % ("x" * (DEFAULT_MAX_LENGTH + 1)))
    spaced = '{"name":%s"get_air_quality", "arguments": {"city": "Narvik"}}'
    assert accepts(rules, spaced % (" " * 12))
    assert not accepts(rules, spaced % (" " * 13))


def test_a_value_of_any_type_is_bounded_in_the_grammar() -> None:
    """A parameter without a schema cannot hold an endless string or list either."""
    free = ToolSpec(
        name="store",
        parameters={"type": "object", "properties": {"value": {}}, "required": ["value"]},
    )
    rules = parse_gbnf(tool_call_grammar([free], shape=CallShape(parallel=False)))
    text = '{"name": "store", "arguments": {"value": %s}}'
    assert accepts(rules, text % json.dumps("x" * DEFAULT_MAX_LENGTH))
    assert not accepts(rules, text % json.dumps("x" * (DEFAULT_MAX_LENGTH + 1)))
    assert accepts(rules, text % json.dumps(list(range(DEFAULT_MAX_ITEMS))))
    assert not accepts(rules, text % json.dumps(list(range(DEFAULT_MAX_ITEMS + 1))))


# --- parallel calls ---------------------------------------------------------------------------


def test_the_schema_admits_an_array_of_calls() -> None:
    """With parallel calls (the default) a reply may be 1 to 8 calls in an array, or one call."""
    schema = tool_call_schema(TOOLS)
    weather = call("get_air_quality", city="Turku")
    assert _admits(schema, weather)
    assert _admits(schema, [weather, call("get_air_quality", city="Lima"), call("ping")])
    assert _admits(schema, [weather] * DEFAULT_MAX_CALLS)
    assert not _admits(schema, [weather] * (DEFAULT_MAX_CALLS + 1))
    assert not _admits(schema, [])
    assert not _admits(schema, [weather, call("get_stock")])


def test_without_parallel_calls_the_schema_is_one_call() -> None:
    """parallel=False keeps the one-call language: an array is not an instance."""
    schema = tool_call_schema(TOOLS, shape=CallShape(parallel=False))
    weather = call("get_air_quality", city="Turku")
    assert _admits(schema, weather)
    assert not _admits(schema, [weather])


def test_the_grammar_admits_the_same_arrays() -> None:
    """The GBNF takes one call or an array of 1 to 8; parallel=False only the one call."""
    rules = parse_gbnf(tool_call_grammar(TOOLS))
    one = json.dumps(call("get_air_quality", city="Turku"))
    two = f"[{one}, {json.dumps(call('ping'))}]"
    assert accepts(rules, one)
    assert accepts(rules, two)
    assert accepts(rules, "[" + ",".join([one] * DEFAULT_MAX_CALLS) + "]")
    assert not accepts(rules, "[" + ",".join([one] * (DEFAULT_MAX_CALLS + 1)) + "]")
    assert not accepts(rules, "[]")
    single = parse_gbnf(tool_call_grammar(TOOLS, shape=CallShape(parallel=False)))
    assert accepts(single, one)
    assert not accepts(single, two)


def test_rescue_reads_the_array_a_constrained_model_writes() -> None:
    """A bare array of call objects is read as its calls, in order, arguments coerced."""
    text = json.dumps([call("get_air_quality", city="Turku", days=2), call("ping")])
    result = rescue(text, TOOLS)
    assert [(c.tool, c.args) for c in result.calls] == [
        ("get_air_quality", {"city": "Turku", "days": 2}),
        ("ping", {}),
    ]
    assert result.unknown_calls == []


def test_choose_constraint_passes_the_parallel_choice_on() -> None:
    """choose_constraint builds the schema or grammar with or without the array of calls."""
    schema_caps = ClientCapabilities(json_schema=True)
    grammar_caps = ClientCapabilities(grammar=True)
    single = choose_constraint("auto", schema_caps, TOOLS, shape=CallShape(parallel=False))
    assert single.constraint == JsonSchemaConstraint(
        schema=tool_call_schema(TOOLS, shape=CallShape(parallel=False))
    )
    grammar = choose_constraint("auto", grammar_caps, TOOLS, shape=CallShape(parallel=False))
    assert grammar.constraint == GrammarConstraint(
        gbnf=tool_call_grammar(TOOLS, shape=CallShape(parallel=False))
    )


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "single"])
def test_a_narrowed_constraint_keeps_the_parallel_choice(parallel: bool) -> None:
    """Narrowing to fewer tools rebuilds the constraint with the same parallel setting."""
    base = JsonSchemaConstraint(schema=tool_call_schema(TOOLS, shape=CallShape(parallel=parallel)))
    narrowed = NarrowedConstraint(base, TOOLS, shape=CallShape(parallel=parallel)).to(
        [WEATHER, PING]
    )
    assert narrowed == JsonSchemaConstraint(
        schema=tool_call_schema([WEATHER, PING], shape=CallShape(parallel=parallel))
    )


# --- the token budget -------------------------------------------------------------------------


def test_instance_tokens_of_scalars() -> None:
    """Strings cost their length at two characters a token plus quotes; numbers their digits."""
    assert instance_tokens({"type": "string", "maxLength": 10}) == 2 + 10 // STRING_CHARS_PER_TOKEN
    assert instance_tokens({"type": "integer"}) == INTEGER_TOKENS
    assert instance_tokens({"enum": ["c", "fahrenheit"]}) == 6  # '"fahrenheit"' at 2 a token
    assert instance_tokens({"type": "boolean"}) == 1
    assert instance_tokens({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}) == INTEGER_TOKENS


def test_the_longest_instance_fits_its_budget() -> None:
    """The widest call the constraint admits is no longer than its budget allows, even at two
    characters a token: the cap never cuts a valid constrained reply."""
    wide = ToolSpec(
        name="wide",
        parameters={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["c", "fahrenheit"]},
                "count": {"type": "integer"},
                "labels": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["city", "unit", "count", "labels"],
        },
    )
    schema = tool_call_schema([wide], shape=CallShape(parallel=False))
    widest = call(
        "wide",
        city="x" * DEFAULT_MAX_LENGTH,
        unit="fahrenheit",
        count=-(10**16 - 1),
        labels=["x" * DEFAULT_MAX_LENGTH] * DEFAULT_MAX_ITEMS,
    )
    assert _admits(schema, widest)
    text = json.dumps(widest, separators=(",", ":"))
    assert len(text) <= STRING_CHARS_PER_TOKEN * instance_tokens(schema)


def test_a_tight_schema_gets_a_tight_budget() -> None:
    """A tool whose arguments are an enum and an integer needs a few dozen tokens, not 1,024."""
    switch = ToolSpec(
        name="switch",
        parameters={
            "type": "object",
            "properties": {"state": {"enum": ["on", "off"]}, "room": {"type": "integer"}},
            "required": ["state", "room"],
        },
    )
    request = InferenceRequest(
        messages=(),
        tools=(switch,),
        constraint=JsonSchemaConstraint(
            schema=tool_call_schema([switch], shape=CallShape(parallel=False))
        ),
    )
    # braces 2; "name" 3 + colon, comma, gaps 6 + "switch" 4; "arguments" 6 + 6 + the
    # arguments: braces 2, "state" 4 + 6 + "off" 3, "room" 3 + 6 + an integer 17
    assert reply_token_budget(request) == 68


def test_a_parallel_constraint_is_capped_at_the_flat_maximum() -> None:
    """Eight widest calls would exceed the flat cap; the budget stops at it."""
    request = InferenceRequest(
        messages=(),
        tools=tuple(TOOLS),
        constraint=JsonSchemaConstraint(schema=tool_call_schema(TOOLS)),
    )
    assert reply_token_budget(request) == MAX_REPLY_TOKENS


def test_a_grammar_budget_follows_from_the_request_tools() -> None:
    """A grammar cannot be measured; the budget is the tool schema's, or the flat cap without tools."""
    grammar = GrammarConstraint(gbnf=tool_call_grammar([PING], shape=CallShape(parallel=False)))
    with_tools = InferenceRequest(messages=(), tools=(PING,), constraint=grammar)
    schema = tool_call_schema([PING], shape=CallShape(parallel=True))
    assert reply_token_budget(with_tools) == min(instance_tokens(schema), MAX_REPLY_TOKENS)
    assert reply_token_budget(InferenceRequest(messages=(), constraint=grammar)) == MAX_REPLY_TOKENS


def test_a_free_tool_reply_gets_one_call_and_room_to_reach_it() -> None:
    """Unconstrained, the budget is the widest single call, and never below the room real
    models take to reach their call."""
    tight = InferenceRequest(messages=(), tools=(PING,))
    assert reply_token_budget(tight) == FREE_CALL_MIN_TOKENS
    wide = InferenceRequest(messages=(), tools=(WEATHER, PING))
    single = instance_tokens(tool_call_schema([WEATHER, PING], shape=CallShape(parallel=False)))
    assert single > FREE_CALL_MIN_TOKENS
    assert reply_token_budget(wide) == single


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}},
        {"type": "object", "properties": {"a": {"$ref": None}}},
        {"type": "object", "properties": {"a": {"type": "decimal", "maxLength": "long"}}},
        {"type": "object", "properties": {"a": {"enum": "ab", "anyOf": {}}}},
    ],
    ids=["missing-ref", "ref-not-a-string", "unknown-type", "malformed"],
)
def test_any_tool_schema_has_a_price(parameters: dict[str, Any]) -> None:
    """A schema no constraint can be built from is still priced -- a value of any type where it
    cannot be read -- so a request never fails on its budget."""
    any_value = {"type": "object", "properties": {"a": {}}}
    assert call_tokens("odd", parameters) == call_tokens("odd", any_value)


def test_a_recursive_ref_is_priced_once_round() -> None:
    """A schema that contains itself is expanded once, then priced as a value of any type."""
    recursive = {"type": "object", "properties": {"a": {"$ref": "#"}}}
    once = {"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {}}}}}
    assert call_tokens("tree", recursive) == call_tokens("tree", once)


def test_a_plain_reply_gets_its_own_cap() -> None:
    """A request without tools is a plain answer, capped at PLAIN_REPLY_TOKENS."""
    assert reply_token_budget(InferenceRequest(messages=())) == PLAIN_REPLY_TOKENS
