"""The GBNF tool-call grammar, checked with a small GBNF recognizer and generator written here.

The recognizer accepts exactly the strings a GBNF grammar (llama.cpp syntax) derives; the
generator derives random strings from it. Schema-valid calls must be accepted, and every string
the grammar derives must be one known call with valid arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from test_constrain import SCHEMA, TOOLS, _valid, instances

from forge_rt.core import ToolSpec
from forge_rt.guardrails import (
    CallShape,
    Dialect,
    rescue,
    respond_spec,
    tool_call_grammar,
    tool_call_schema,
)

# --- a GBNF reader --------------------------------------------------------------------------

Node = tuple[Any, ...]  # ("lit", s) ("cls", negated, ranges) ("ref", name) ("seq", [..]) ...

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "]": "]", "[": "[", "-": "-"}


class _Reader:
    def __init__(self, body: str) -> None:
        self.s = body
        self.i = 0

    def space(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1

    def escape(self) -> str:
        c = self.s[self.i + 1]
        if c == "x":
            value, self.i = chr(int(self.s[self.i + 2 : self.i + 4], 16)), self.i + 4
            return value
        if c == "u":
            value, self.i = chr(int(self.s[self.i + 2 : self.i + 6], 16)), self.i + 6
            return value
        self.i += 2
        return _ESCAPES[c]

    def class_char(self) -> str:
        if self.s[self.i] == "\\":
            return self.escape()
        self.i += 1
        return self.s[self.i - 1]

    def alternatives(self) -> Node:
        options = [self.sequence()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            options.append(self.sequence())
        return ("alt", options) if len(options) > 1 else options[0]

    def sequence(self) -> Node:
        items: list[Node] = []
        while True:
            self.space()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                return ("seq", items)
            items.append(self.postfix(self.atom()))

    def atom(self) -> Node:
        c = self.s[self.i]
        if c == '"':
            self.i += 1
            out = []
            while self.s[self.i] != '"':
                if self.s[self.i] == "\\":
                    out.append(self.escape())
                else:
                    out.append(self.s[self.i])
                    self.i += 1
            self.i += 1
            return ("lit", "".join(out))
        if c == "[":
            self.i += 1
            negated = self.s[self.i] == "^"
            self.i += negated
            ranges = []
            while self.s[self.i] != "]":
                low = self.class_char()
                high = low
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    high = self.class_char()
                ranges.append((low, high))
            self.i += 1
            return ("cls", negated, ranges)
        if c == "(":
            self.i += 1
            inner = self.alternatives()
            assert self.s[self.i] == ")"
            self.i += 1
            return inner
        m = re.compile(r"[A-Za-z0-9-]+").match(self.s, self.i)
        assert m is not None, f"unexpected {self.s[self.i :]!r}"
        self.i = m.end()
        return ("ref", m.group())

    def postfix(self, node: Node) -> Node:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in "?*+":
                self.i += 1
                low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[c]
                node = ("rep", node, low, high)
            elif c == "{":
                end = self.s.index("}", self.i)
                spec = self.s[self.i + 1 : end]
                self.i = end + 1
                if "," in spec:
                    a, b = spec.split(",")
                    node = ("rep", node, int(a), int(b) if b else None)
                else:
                    node = ("rep", node, int(spec), int(spec))
            else:
                return node
        return node


def parse_gbnf(text: str) -> dict[str, Node]:
    rules = {}
    for line in text.strip().splitlines():
        name, body = line.split(" ::= ", 1)
        reader = _Reader(body)
        rules[name] = reader.alternatives()
        assert reader.i == len(body), f"rule {name} not fully read: {body[reader.i :]!r}"
    return rules


def _refs(node: Node) -> set[str]:
    kind = node[0]
    if kind == "ref":
        return {node[1]}
    if kind in ("seq", "alt"):
        return set().union(*(_refs(n) for n in node[1])) if node[1] else set()
    if kind == "rep":
        return _refs(node[1])
    return set()


def _in_class(node: Node, char: str) -> bool:
    _, negated, ranges = node
    inside = any(low <= char <= high for low, high in ranges)
    return inside != negated


def accepts(rules: dict[str, Node], text: str) -> bool:
    """Whether ``root`` derives exactly ``text``."""
    memo: dict[tuple[int, int], frozenset[int]] = {}

    def ends(node: Node, pos: int) -> frozenset[int]:
        key = (id(node), pos)
        if key in memo:
            return memo[key]
        memo[key] = frozenset()  # left recursion guard (the grammar has none)
        kind = node[0]
        if kind == "lit":
            result = (
                frozenset({pos + len(node[1])}) if text.startswith(node[1], pos) else frozenset()
            )
        elif kind == "cls":
            ok = pos < len(text) and _in_class(node, text[pos])
            result = frozenset({pos + 1}) if ok else frozenset()
        elif kind == "ref":
            result = ends(rules[node[1]], pos)
        elif kind == "seq":
            current = frozenset({pos})
            for item in node[1]:
                current = frozenset(e for p in current for e in ends(item, p))
            result = current
        elif kind == "alt":
            result = frozenset(e for option in node[1] for e in ends(option, pos))
        else:
            _, inner, low, high = node
            found: set[int] = set()
            current = frozenset({pos})
            count = 0
            while current and (high is None or count < high):
                if count >= low:
                    found |= current
                current = frozenset(e for p in current for e in ends(inner, p)) - (
                    found if count >= low else frozenset()
                )
                count += 1
            if current and count >= low:
                found |= current
            result = frozenset(found)
        memo[key] = result
        return result

    return len(text) in ends(rules["root"], 0)


_ALPHABET = 'az AZ09 ",:{}[]\\/é中\t\n\x7f\x01'


def derive(rules: dict[str, Node], draw: Callable[[st.SearchStrategy[Any]], Any]) -> str:
    """A random string the grammar derives (deep recursion cut short by taking the last option)."""

    def go(node: Node, depth: int) -> str:
        kind = node[0]
        if kind == "lit":
            return str(node[1])
        if kind == "cls":
            _, negated, ranges = node
            if negated:
                options = [c for c in _ALPHABET if _in_class(node, c)]
            else:
                options = [
                    chr(code)
                    for low, high in ranges
                    for code in range(ord(low), min(ord(high), ord(low) + 40) + 1)
                ]
            return str(draw(st.sampled_from(options)))
        if kind == "ref":
            return go(rules[node[1]], depth + 1)
        if kind == "seq":
            return "".join(go(item, depth) for item in node[1])
        if kind == "alt":
            options = node[1]
            choice = options[-1] if depth > 12 else draw(st.sampled_from(options))
            return go(choice, depth)
        _, inner, low, high = node
        top = low if depth > 12 else min(high if high is not None else low + 3, low + 3)
        count = draw(st.integers(low, top))
        return "".join(go(inner, depth) for _ in range(count))

    return go(rules["root"], 0)


# --- tests ----------------------------------------------------------------------------------

RULES = parse_gbnf(tool_call_grammar(TOOLS))


def test_every_referenced_rule_is_defined() -> None:
    """The grammar is closed: root exists and every rule it names is defined."""
    assert "root" in RULES
    referenced = set().union(*(_refs(node) for node in RULES.values()))
    assert referenced <= set(RULES)


@settings(max_examples=200)
@given(instance=instances(SCHEMA), ascii_only=st.booleans(), indent=st.sampled_from([None, 2]))
def test_schema_valid_calls_are_in_the_grammar(
    instance: Any, ascii_only: bool, indent: int | None
) -> None:
    """Every call the JSON schema accepts, in schema key order however spaced, the grammar accepts.

    A grammar fixes the order of keys (the model writes them in that order); the schema does not.
    """
    assume(_valid(instance))
    calls = [_call_in_schema_order(c) for c in instance] if isinstance(instance, list) else None
    ordered = calls if calls is not None else _call_in_schema_order(instance)
    assert accepts(RULES, json.dumps(ordered, ensure_ascii=ascii_only, indent=indent))


def _call_in_schema_order(call: dict[str, Any]) -> dict[str, Any]:
    option = next(
        o
        for o in SCHEMA["anyOf"]
        if o.get("type") == "object" and o["properties"]["name"]["const"] == call["name"]
    )
    return {
        "name": call["name"],
        "arguments": _in_schema_order(call["arguments"], option["properties"]["arguments"]),
    }


def _in_schema_order(value: Any, schema: Any) -> Any:
    """``value`` with object keys in the order the schema lists its properties."""
    if isinstance(value, list):
        return [_in_schema_order(v, schema.get("items", {})) for v in value]
    if not isinstance(value, dict):
        return value
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            if option.get("type") == "object":
                return _in_schema_order(value, option)
    props = schema.get("properties", {})
    ordered = {k: _in_schema_order(value[k], props[k]) for k in props if k in value}
    return ordered | {k: v for k, v in value.items() if k not in props}


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_stock", "arguments": {}}',
        '{"name": "get_air_quality", "arguments": {}}',
        '{"name": "get_air_quality", "arguments": {"city": "Turku", "title": "x"}}',
        '{"name": "get_air_quality", "arguments": {"city": "Turku", "unit": "k"}}',
        '{"name": "get_air_quality", "arguments": {"city": 3}}',
        '{"name": "get_air_quality", "arguments": {"city": "Turku"}, "extra": 1}',
        '{"name": "plot", "arguments": {"title": "", "window": {"start": 1, "end": 2}}}',
        '{"name": "respond", "arguments": {"message": "a\nb"}}',
        'Sure: {"name": "ping", "arguments": {}}',
    ],
    ids=[
        "unknown-tool",
        "missing-required",
        "extra-argument",
        "enum-violation",
        "wrong-type",
        "extra-top-level-key",
        "string-too-short",
        "raw-newline-in-string",
        "prose-before",
    ],
)
def test_grammar_rejects_invalid_calls(text: str) -> None:
    """What validation would reject, the grammar cannot produce."""
    assert not accepts(RULES, text)


class Span(BaseModel):
    start: int
    end: int


class Chart(BaseModel):
    title: str = Field(min_length=1, max_length=8)
    span: Span
    kind: Literal["line", "bar"] = "line"
    values: list[float] = Field(default=[], max_length=3)
    note: str | None = None
    labels: dict[str, str] = {}


UNBOUNDED = [
    ToolSpec(name="chart", parameters=Chart),
    ToolSpec(
        name="lookup",
        parameters={
            "type": "object",
            "properties": {
                "q": {"type": "string"},
                "mode": {"enum": ["fast", "exact"]},
                "limit": {"type": "integer"},
                "flags": {"type": "array", "items": {"type": "boolean"}, "minItems": 1},
            },
            "required": ["q", "flags"],
        },
    ),
    ToolSpec(name="ping"),
    respond_spec(),
]
UNBOUNDED_RULES = parse_gbnf(tool_call_grammar(UNBOUNDED))


@settings(max_examples=100)
@given(data=st.data())
def test_every_grammar_string_is_a_known_call_with_valid_arguments(data: st.DataObject) -> None:
    """Whatever the grammar derives (tools without numeric bounds), rescue reads as known calls
    that validation accepts: one call, or an array of them."""
    text = derive(UNBOUNDED_RULES, data.draw)
    note(f"derived: {text!r}")
    assert accepts(UNBOUNDED_RULES, text)
    result = rescue(text, UNBOUNDED, constrained=True)
    written = json.loads(text)
    written = written if isinstance(written, list) else [written]
    assert [c.tool for c in result.calls] == [w["name"] for w in written]
    if len(written) == 1:
        assert result.dialects == (Dialect.CONSTRAINED_JSON,)
    for call in result.calls:
        {s.name: s for s in UNBOUNDED}[call.tool].validate_args(call.args)


def test_grammar_and_schema_describe_the_same_tools() -> None:
    """One call alternative per tool, in the same order as the schema's anyOf."""
    names = [option[1][0][1] for option in UNBOUNDED_RULES["call"][1]]  # alt of seq of one ref
    schema = tool_call_schema(UNBOUNDED, shape=CallShape(parallel=False))
    assert names == [f"call-{o['properties']['name']['const']}" for o in schema["anyOf"]]


def test_optional_properties_may_be_skipped_in_any_combination() -> None:
    """Required-only, all-optional and partial argument sets are all in the grammar."""
    base = '{"name": "chart", "arguments": {"title": "t", "span": {"start": 1, "end": 2}'
    for tail in ("}}", ', "note": null}}', ', "kind": "bar", "labels": {"a": "b"}}}'):
        assert accepts(UNBOUNDED_RULES, base + tail), tail


def test_recognizer_rejects_a_near_miss() -> None:
    """The recognizer itself rejects a truncated call, so acceptance above means something."""
    ok = '{"name": "ping", "arguments": {}}'
    assert accepts(UNBOUNDED_RULES, ok)
    assert not accepts(UNBOUNDED_RULES, ok[:-1])
