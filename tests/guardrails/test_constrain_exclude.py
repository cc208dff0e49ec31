"""Excluding a blocked call from the tool-call constraint (JSON schema and GBNF).

Each constraint is checked by a real recognizer: the JSON schema by ``jsonschema`` where it is
installed and its string patterns by Python's ``re`` always; the grammar by
:class:`~forge_rt.guardrails.Gbnf`, the project's llama.cpp-syntax recognizer. The blocked call
must be rejected and calls that differ from it in any argument accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_rt.core import (
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    LLMResponse,
    Message,
    ToolCall,
    ToolSpec,
)
from forge_rt.guardrails import (
    EXCLUDED_PREFIX_CHARS,
    Execute,
    Gbnf,
    Guardrails,
    LoopGuard,
    NarrowedConstraint,
    StartsWith,
    ToolErrors,
    ToolResult,
    reply_token_budget,
    tool_call_grammar,
    tool_call_schema,
)

RESIDENTS = ToolSpec(
    name="count_residents",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ORDER = ToolSpec(
    name="get_order",
    parameters={
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "verbose": {"type": "boolean"},
            "unit": {"enum": ["a", "b"]},
        },
        "required": ["id"],
    },
)
PING = ToolSpec(name="ping", parameters={"type": "object", "properties": {}})
TROMSO = ToolCall(tool="count_residents", args={"city": "Tromso"})
ORDER_42 = ToolCall(tool="get_order", args={"id": 42, "unit": "a"})

Accepts = Callable[[dict[str, Any]], bool]


def _pattern_check(schema: Any, value: Any) -> bool:
    """What jsonschema checks of our schemas, for the keywords they use (a stand-in where it is
    not installed): types, const, enum, bounds, string length and pattern, anyOf, objects."""
    if "anyOf" in schema:
        return any(_pattern_check(s, value) for s in schema["anyOf"])
    if "const" in schema:
        return bool(value == schema["const"] and type(value) is type(schema["const"]))
    if "enum" in schema:
        return any(value == v and type(value) is type(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return (
            isinstance(value, str)
            and schema.get("minLength", 0) <= len(value) <= schema["maxLength"]
            and ("pattern" not in schema or re.search(schema["pattern"], value) is not None)
        )
    if kind == "integer":
        return (
            type(value) is int
            and value >= schema.get("minimum", value)
            and value <= schema.get("maximum", value)
        )
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return (
            isinstance(value, list)
            and schema.get("minItems", 0) <= len(value) <= schema["maxItems"]
            and all(_pattern_check(schema["items"], v) for v in value)
        )
    if kind == "object":
        props = schema.get("properties", {})
        return (
            isinstance(value, dict)
            and all(k in value for k in schema.get("required", []))
            and all(k in props for k in value)
            and all(_pattern_check(props[k], v) for k, v in value.items())
        )
    raise AssertionError(f"unexpected schema {schema}")


def _schema_accepts(tools: list[ToolSpec], exclude: list[ToolCall]) -> Accepts:
    schema = tool_call_schema(tools, exclude=exclude)
    try:
        import jsonschema
    except ImportError:
        validator = None
    else:
        validator = jsonschema.Draft202012Validator(schema)

    def accepts(reply: dict[str, Any]) -> bool:
        ours = _pattern_check(schema, reply)
        if validator is not None:
            assert validator.is_valid(reply) == ours, reply
        return ours

    return accepts


def _grammar_accepts(tools: list[ToolSpec], exclude: list[ToolCall]) -> Accepts:
    grammar = Gbnf(tool_call_grammar(tools, exclude=exclude))
    return lambda reply: grammar.accepts(json.dumps(reply, ensure_ascii=False))


CONSTRAINTS = pytest.mark.parametrize(
    "build", [_schema_accepts, _grammar_accepts], ids=["schema", "grammar"]
)


def _call(tool: str, **args: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": args}


@CONSTRAINTS
def test_the_blocked_string_is_rejected_and_others_accepted(build: Callable[..., Accepts]) -> None:
    """count_residents(city="Tromso") is excluded; a prefix, an extension, another city are not."""
    accepts = build([RESIDENTS], [TROMSO])
    assert not accepts(_call("count_residents", city="Tromso"))
    for city in ["Bodo", "Troms", "Tromsox", "", "T", "tromso", "Tromso, Norway"]:
        assert accepts(_call("count_residents", city=city)), city


@CONSTRAINTS
def test_the_blocked_call_is_rejected_inside_a_batch_too(build: Callable[..., Accepts]) -> None:
    """A parallel reply (an array of calls) cannot carry the blocked call either."""
    accepts = build([RESIDENTS], [TROMSO])
    bodo = _call("count_residents", city="Bodo")
    assert accepts([bodo])  # type: ignore[arg-type]
    assert not accepts([bodo, _call("count_residents", city="Tromso")])  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(city=st.text(st.characters(blacklist_characters='"\\', min_codepoint=0x20), max_size=60))
def test_the_schema_accepts_every_other_plain_string(city: str) -> None:
    """Any string without a quote, backslash or control character but the blocked one."""
    accepts = _schema_accepts([RESIDENTS], [TROMSO])
    assert accepts(_call("count_residents", city=city)) == (city != "Tromso")


@CONSTRAINTS
def test_a_call_with_several_arguments_must_differ_in_one(build: Callable[..., Accepts]) -> None:
    """get_order(id=42, unit="a") is excluded; changing, dropping or adding an argument is not."""
    accepts = build([ORDER], [ORDER_42])
    assert not accepts(_call("get_order", id=42, unit="a"))
    for args in [
        {"id": 42, "unit": "b"},
        {"id": 42},
        {"id": 41, "unit": "a"},
        {"id": 43, "unit": "a"},
        {"id": -42, "unit": "a"},
        {"id": 420, "unit": "a"},
        {"id": 4, "unit": "a"},
        {"id": 42, "verbose": True, "unit": "a"},
    ]:
        assert accepts(_call("get_order", **args)), args


@CONSTRAINTS
def test_two_blocked_calls_are_both_excluded(build: Callable[..., Accepts]) -> None:
    """Blocked in one reply, both calls are excluded; the tool stays callable otherwise."""
    perth = ToolCall(tool="count_residents", args={"city": "Perth"})
    accepts = build([RESIDENTS], [TROMSO, perth])
    assert not accepts(_call("count_residents", city="Tromso"))
    assert not accepts(_call("count_residents", city="Perth"))
    assert accepts(_call("count_residents", city="Per"))
    assert accepts(_call("count_residents", city="Bodo"))


@CONSTRAINTS
def test_a_long_blocked_value_excludes_its_prefix(build: Callable[..., Accepts]) -> None:
    """Past EXCLUDED_PREFIX_CHARS only the prefix is compared: the blocked value and strings
    sharing that prefix are out, a string differing inside it is in."""
    long = "q" * (EXCLUDED_PREFIX_CHARS + 10)
    accepts = build([RESIDENTS], [ToolCall(tool="count_residents", args={"city": long})])
    assert not accepts(_call("count_residents", city=long))
    assert not accepts(_call("count_residents", city=long[:EXCLUDED_PREFIX_CHARS] + "z"))
    assert accepts(_call("count_residents", city="z" + long[1:]))
    assert accepts(_call("count_residents", city=long[: EXCLUDED_PREFIX_CHARS - 1]))


@CONSTRAINTS
def test_other_tools_are_untouched(build: Callable[..., Accepts]) -> None:
    """Only the blocked tool's calls are narrowed."""
    accepts = build([RESIDENTS, ORDER], [TROMSO])
    assert accepts(_call("get_order", id=42, unit="a"))
    assert not accepts(_call("count_residents", city="Tromso"))


def test_a_tool_whose_call_cannot_differ_is_left_out_while_another_remains() -> None:
    """ping() has one call only: blocked, the narrowing drops it; alone, nothing is excluded."""
    base = JsonSchemaConstraint(schema=tool_call_schema([PING, RESIDENTS]))
    narrowing = NarrowedConstraint(base, [PING, RESIDENTS])
    blocked = [ToolCall(tool="ping")]
    assert narrowing.to([PING, RESIDENTS], exclude=blocked) == JsonSchemaConstraint(
        schema=tool_call_schema([RESIDENTS])
    )
    alone = JsonSchemaConstraint(schema=tool_call_schema([PING]))
    assert NarrowedConstraint(alone, [PING]).to([PING], exclude=blocked) == alone


def test_narrowing_excludes_in_the_constraint_kind_it_was_given() -> None:
    """A grammar is narrowed to a grammar, a schema to a schema; nothing blocked: unchanged."""
    grammar = GrammarConstraint(gbnf=tool_call_grammar([RESIDENTS]))
    schema = JsonSchemaConstraint(schema=tool_call_schema([RESIDENTS]))
    assert NarrowedConstraint(grammar, [RESIDENTS]).to([RESIDENTS], exclude=[TROMSO]) == (
        GrammarConstraint(gbnf=tool_call_grammar([RESIDENTS], exclude=[TROMSO]))
    )
    assert NarrowedConstraint(schema, [RESIDENTS]).to([RESIDENTS], exclude=[TROMSO]) == (
        JsonSchemaConstraint(schema=tool_call_schema([RESIDENTS], exclude=[TROMSO]))
    )
    assert NarrowedConstraint(schema, [RESIDENTS]).to([RESIDENTS]) is schema


@pytest.mark.parametrize(
    "tools", [[RESIDENTS], [ORDER], [RESIDENTS, ORDER]], ids=["string", "order", "both"]
)
def test_the_reply_budget_is_unchanged_by_an_exclusion(tools: list[ToolSpec]) -> None:
    """An excluding schema admits no longer reply than the plain one, and prices the same."""

    def budget(exclude: list[ToolCall]) -> int:
        constraint = JsonSchemaConstraint(schema=tool_call_schema(tools, exclude=exclude))
        request = InferenceRequest(
            messages=(Message.user("?"),), tools=tuple(tools), constraint=constraint
        )
        return reply_token_budget(request)

    assert budget([TROMSO, ORDER_42]) == budget([])


def test_the_loop_guard_names_the_calls_at_its_limit() -> None:
    """LoopGuard.blocked holds the call blocked in the last reply, until a reply without it."""
    guard = LoopGuard(max_repeats=3)
    bodo = ToolCall(tool="count_residents", args={"city": "Bodo"})
    assert guard.observe([TROMSO]) is None
    assert guard.observe([TROMSO]) is None
    assert guard.blocked == ()
    assert guard.observe([TROMSO]) is not None
    assert guard.blocked == (TROMSO,)
    assert guard.observe([bodo]) is None
    assert guard.blocked == ()


@CONSTRAINTS
def test_a_blocked_start_excludes_every_string_that_begins_so(
    build: Callable[..., Accepts],
) -> None:
    """StartsWith("<") (after an answer of tool-result markup): no string beginning with "<",
    however it goes on; every other safe-character string, the empty one and a "<" later in
    the text included."""
    accepts = build([RESIDENTS], [ToolCall(tool="count_residents", args={"city": StartsWith("<")})])
    for city in ["<", "<tool_response>", "<tool_response> Tromso", "<b>"]:
        assert not accepts(_call("count_residents", city=city)), city
    for city in ["Tromso", "", "a<b", " <", "Weather in Lima: 17C, sunny"]:
        assert accepts(_call("count_residents", city=city)), city


@CONSTRAINTS
def test_the_synthetic_respond_excludes_markup_once_an_answer_was_markup(
    build: Callable[..., Accepts],
) -> None:
    """Guardrails.excluded_calls: after a respond of "<tool_response>" the constraint built
    from it writes no answer starting with "<" for the rest of the turn."""
    guard = Guardrails([RESIDENTS], respond_tool=True)
    assert guard.excluded_calls == ()
    ran = guard.check(LLMResponse(result=[ToolCall(tool="count_residents", args={"city": "Lima"})]))
    assert isinstance(ran, Execute)
    guard.record([ToolResult(call=ran.calls[0], output="Lima: 2.8 million")])
    markup = LLMResponse(result=[ToolCall(tool="respond", args={"message": "<tool_response>"})])
    assert isinstance(guard.check(markup), ToolErrors)
    starts = [c for c in guard.excluded_calls if c.args == {"message": StartsWith("<")}]
    assert len(starts) == 1
    accepts = build(list(guard.tools), list(guard.excluded_calls))
    assert not accepts(_call("respond", message="<tool_response>"))
    assert accepts(_call("respond", message="Lima has 2.8 million people."))
    assert accepts(_call("count_residents", city="<Lima>"))  # other tools untouched
    guard.new_turn()
    assert guard.excluded_calls == ()


def test_a_users_own_respond_tool_is_never_narrowed_for_markup() -> None:
    own = ToolSpec(
        name="respond",
        parameters={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    )
    guard = Guardrails([RESIDENTS, own], terminal_tools=["respond"], respond_tool=True)
    guard.check(LLMResponse(result=[ToolCall(tool="respond", args={"message": "<tool_response>"})]))
    assert all(c.args.get("message") != StartsWith("<") for c in guard.excluded_calls)
