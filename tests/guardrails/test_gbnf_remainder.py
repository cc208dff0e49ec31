"""GBNF as values: the reader round-trips forge_rt's grammars, and a prefix's remainder is exact.

The remainder of a grammar after a prefix must accept exactly the texts that complete the prefix
to a sentence. Checked against the independent recognizer in ``test_constrain_gbnf`` on strings
that recognizer's generator derives, split at every point.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_constrain import SCHEMA, TOOLS, WEATHER, _valid, instances
from test_constrain_gbnf import accepts, derive, parse_gbnf

from forge_rt.core import GrammarConstraint, JsonSchemaConstraint, ToolSpec
from forge_rt.errors import ConfigurationError, GrammarError
from forge_rt.guardrails import (
    Gbnf,
    continuation_constraint,
    schema_grammar,
    tool_call_grammar,
    tool_call_schema,
)

GRAMMAR = tool_call_grammar(TOOLS)
GBNF = Gbnf(GRAMMAR)
REFERENCE = parse_gbnf(GRAMMAR)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_remainder_after_any_prefix_accepts_exactly_the_rest(data: st.DataObject) -> None:
    """Split a derived sentence anywhere: the remainder takes the rest, and not the rest cut short
    or run on (checked by the reference recognizer, not by the code under test)."""
    sentence = derive(REFERENCE, data.draw)
    assert GBNF.accepts(sentence)
    cut = data.draw(st.integers(min_value=0, max_value=len(sentence)))
    prefix, rest = sentence[:cut], sentence[cut:]
    remainder = GBNF.remainder(prefix)
    assert remainder is not None
    reference = parse_gbnf(remainder)
    assert accepts(reference, rest)
    if rest:
        assert not accepts(reference, rest[:-1]) or GBNF.accepts(prefix + rest[:-1])
    assert not accepts(reference, rest + "}}") or GBNF.accepts(sentence + "}}")


@settings(max_examples=60, deadline=None)
@given(instance=instances(SCHEMA))
def test_schema_grammar_accepts_the_compact_and_spaced_json_of_schema_instances(
    instance: Any,
) -> None:
    """The grammar written from a schema takes what a backend writes under that schema, in
    either of the usual spacings (the guarantee continuing a JSON-schema call rests on)."""
    grammar = Gbnf(schema_grammar(SCHEMA))
    if not _valid(instance):
        return
    ordered = _in_schema_order(instance, SCHEMA)
    for text in (
        json.dumps(ordered, ensure_ascii=False),
        json.dumps(ordered, ensure_ascii=False, separators=(",", ":")),
    ):
        assert grammar.accepts(text), text


def _in_schema_order(value: Any, schema: Any) -> Any:
    """``value`` with every object's keys in its schema's property order (as backends write)."""
    if not isinstance(schema, dict):
        return value
    for key in ("anyOf", "oneOf"):
        if key in schema:
            for option in schema[key]:
                props = option.get("properties", {})
                if (
                    isinstance(value, dict)
                    and set(value) <= set(props)
                    and all(
                        "const" not in sub or value.get(name) == sub["const"]
                        for name, sub in props.items()
                    )
                ):
                    return _in_schema_order(value, option)
                if isinstance(value, list) and option.get("type") == "array":
                    return _in_schema_order(value, option)
            return value
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        return {k: _in_schema_order(value[k], props[k]) for k in props if k in value}
    if isinstance(value, list) and "items" in schema:
        return [_in_schema_order(item, schema["items"]) for item in value]
    return value


def test_a_prefix_the_grammar_cannot_begin_has_no_remainder() -> None:
    assert GBNF.remainder('{"name": "no_such_tool"') is None
    assert GBNF.remainder("Sure! Here") is None


def test_the_remainder_of_a_whole_sentence_accepts_only_the_empty_rest() -> None:
    call = '{"name": "ping", "arguments": {}}'
    assert GBNF.accepts(call)
    remainder = GBNF.remainder(call)
    assert remainder is not None
    rest = Gbnf(remainder)
    assert rest.accepts("")
    assert not rest.accepts("x")


def test_bounded_repetition_counts_what_the_prefix_used() -> None:
    """A string bounded to 12 characters, 10 of them written: at most 2 more may follow."""
    grammar = Gbnf('root ::= "\\"" [a-z]{1,12} "\\""\n')
    rest = grammar.remainder('"abcdefghij')
    assert rest is not None
    continued = Gbnf(rest)
    assert continued.accepts('kl"')
    assert continued.accepts('"')
    assert not continued.accepts('klm"')


@pytest.mark.parametrize(
    ("text", "needle", "line"),
    [
        ("root ::= foo\n", "undefined rule 'foo'", 0),
        ('start ::= "a"\n', "no 'root' rule", 0),
        ('root ::= "a\n', "unterminated literal", 2),
        ("root ::= [a-\n", "unterminated character class", 2),
        ('root ::= ( "a"\n', "expected ')'", 2),
        ('root ::= "a"{3,1}\n', "bad repetition", 1),
        ("root ::= <[1000]>\n", "token-level", 1),
        ('root ::= "a"\nroot ::= "b"\n', "defined twice", 2),
        ('root ::= "\\q"\n', "unknown escape", 1),
    ],
)
def test_a_grammar_it_cannot_read_is_a_typed_configuration_error(
    text: str, needle: str, line: int
) -> None:
    with pytest.raises(GrammarError, match=re.escape(needle)) as caught:
        Gbnf(text)
    assert isinstance(caught.value, ConfigurationError)
    assert caught.value.line == line


def test_the_reader_follows_multi_line_rules_comments_and_dot() -> None:
    grammar = Gbnf('# a comment\nroot ::= "a" ( "b"\n  | "c" ) .  # trailing\n  | "z"\n')
    assert grammar.accepts("abx")
    assert grammar.accepts("ac\u00e9")
    assert grammar.accepts("z")
    assert not grammar.accepts("ab")


def test_continuing_a_json_schema_call_holds_it_to_the_rest_of_the_schema() -> None:
    # The shared tools, the one with a ``city`` under a name of this test's own.
    air = ToolSpec(name="get_air_quality", parameters=WEATHER.parameters)
    schema = tool_call_schema([air if spec is WEATHER else spec for spec in TOOLS])
    partial = '{"name": "get_air_quality", "arguments": {"city": "Qui'
    continuation = continuation_constraint(JsonSchemaConstraint(schema=schema), partial)
    assert isinstance(continuation.constraint, GrammarConstraint)
    rest = Gbnf(continuation.constraint.gbnf)
    assert rest.accepts('to"}}')
    assert rest.accepts('to", "unit": "c"}}')
    assert not rest.accepts('to", "unit": "kelvin"}}')


def test_continuing_a_grammar_call_and_the_reasons_there_is_none() -> None:
    continued = continuation_constraint(GrammarConstraint(gbnf=GRAMMAR), '{"name": "pi')
    assert continued.constraint is not None
    assert Gbnf(continued.constraint.gbnf).accepts('ng", "arguments": {}}')
    stray = continuation_constraint(GrammarConstraint(gbnf=GRAMMAR), "I think")
    assert stray.constraint is None
    assert "not a beginning" in stray.reason
    broken = continuation_constraint(GrammarConstraint(gbnf="root ::= nope\n"), "")
    assert broken.constraint is None
    assert "undefined rule" in broken.reason
    with_ref = continuation_constraint(
        JsonSchemaConstraint(schema={"$defs": {"a": {}}, "$ref": "#/$defs/a"}), "{"
    )
    assert with_ref.constraint is None
    assert "$ref" in with_ref.reason
