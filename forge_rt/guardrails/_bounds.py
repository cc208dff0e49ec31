"""How much one reply may hold: the bounds injected into a constraint, and the token budget
that follows from them.

A small model that is free to keep going keeps going: inside a string it never closes, in a list
it never ends, or in prose after its call. Two bounds stop that. The **constraint** is bounded:
:func:`bounded` gives every string without a ``maxLength`` the :data:`DEFAULT_MAX_LENGTH` and
every array without a ``maxItems`` the :data:`DEFAULT_MAX_ITEMS`, so a grammar built from it
(llama.cpp converts a JSON schema to one) cannot run away inside a value. The **reply** is
bounded: :func:`instance_tokens` is the most tokens an instance of a (bounded) schema can take,
which is what ``max_tokens`` must allow and no more; the guarded step applies it when the caller
set no ``max_tokens`` of its own. The defaults are sized from real small-model replies (token
counts by the project's estimator); each constant says why its value suffices.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from forge_rt.core._jsonschema import RefExpansion, SchemaRefError

__all__ = [
    "DEFAULT_MAX_CALLS",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_LENGTH",
    "FREE_CALL_MIN_TOKENS",
    "INTEGER_TOKENS",
    "MAX_REPLY_TOKENS",
    "NUMBER_TOKENS",
    "PLAIN_REPLY_TOKENS",
    "STRING_CHARS_PER_TOKEN",
    "bounded",
    "call_tokens",
    "calls_tokens",
    "instance_tokens",
]

DEFAULT_MAX_LENGTH = 512
"""Characters a string argument may hold when its schema sets no ``maxLength``: real string
arguments are far shorter (99th percentile 263), and a prose field cut at 512 is still a
complete answer's worth."""

DEFAULT_MAX_ITEMS = 16
"""Items an array may hold when its schema sets no ``maxItems``: room for the ids and tags a
model legitimately lists, while a degenerate list that cycles until the token cap is cut early."""

DEFAULT_MAX_CALLS = 8
"""Calls one constrained reply may hold when parallel calls are allowed: above the widest real
fan-out (7 calls); replies with more are loops or enumerations of one call's arguments."""

STRING_CHARS_PER_TOKEN = 2
"""Characters per token assumed for text in a budget (strings, keys, tool names): below the
2.2 (number-heavy) to 4.6 (prose) of real arguments, so a string the constraint admits fits."""

INTEGER_TOKENS = 17
"""An integer's budget: a sign and 16 digits, the most the grammars admit (llama.cpp's JSON
schema grammar and :func:`~forge_rt.guardrails.tool_call_grammar` both stop at 16 integer
digits), at one token per digit (tokenizers that split numbers into digits)."""

NUMBER_TOKENS = 38
"""A number's budget: sign, 16 integer digits, a point, 16 decimals and a two-digit exponent
(the GBNF's bounds; digits are one token each). llama.cpp's JSON-schema grammar allows a longer
exponent, which no model writes; the cap would cut it, not the reply's calls before it."""

MAX_REPLY_TOKENS = 2048
"""No derived budget exceeds this: room for a ``respond`` answer of up to
``RESPOND_MAX_CHARS`` characters; loops and rambles are ended long before by the repetition stop
and the schema bounds."""

FREE_CALL_MIN_TOKENS = 256
"""The least budget for a tool reply decoded without a constraint: a model may write prose, a
fence or a tag before its call, which no schema accounts for (real first calls end within 152
tokens, nearly always)."""

PLAIN_REPLY_TOKENS = 512
"""The budget of a reply that offers no tools (a plain chat answer): above the real replies
without a call that ended by themselves (at most 445 tokens)."""

_GAP_TOKENS = 1  # whitespace between two tokens: the grammars bound it, a run is one token
_MEMBER_TOKENS = 2 + 4 * _GAP_TOKENS  # an object member's colon and comma, the gaps around them


def _count(value: Any, default: int) -> int:
    """A schema's length keyword as a count; anything else (absent, malformed) is ``default``."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def bounded(schema: Any) -> Any:
    """A copy of ``schema`` (already ``$ref``-inlined) with the default bounds filled in:
    :data:`DEFAULT_MAX_LENGTH` for a string without ``maxLength`` (or its larger ``minLength``),
    :data:`DEFAULT_MAX_ITEMS` for an array without ``maxItems`` (likewise); ``const`` and
    ``enum`` are left alone. Validation still accepts what the tool declares; only what the
    constrained model may write is bounded."""
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "patternProperties") and isinstance(value, Mapping):
            out[key] = {name: bounded(sub) for name, sub in value.items()}
        elif key in ("items", "prefixItems", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = bounded(value)
        else:
            out[key] = value
    if "const" in out or "enum" in out:
        return out
    kinds = _kinds(out)
    if "string" in kinds and "maxLength" not in out:
        out["maxLength"] = max(DEFAULT_MAX_LENGTH, _count(out.get("minLength"), 0))
    if "array" in kinds and "maxItems" not in out:
        out["maxItems"] = max(DEFAULT_MAX_ITEMS, _count(out.get("minItems"), 0))
    return out


def _kinds(schema: Mapping[str, Any]) -> set[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _literal_cost(schema: Mapping[str, Any]) -> int | None:
    """The cost of a ``const`` or ``enum`` schema: its longest value, or any value's for an
    ``enum`` that lists none; None when the schema is neither."""
    if "const" in schema:
        return _literal_tokens(schema["const"])
    if "enum" not in schema:
        return None
    values = schema["enum"]
    if not isinstance(values, list) or not values:
        return _ANY_TOKENS
    return max(_literal_tokens(v) for v in values)


def _implied_kinds(schema: Mapping[str, Any]) -> set[str]:
    """The type a schema without ``type`` implies: an object by its ``properties``, an array
    by its ``items``; none (any value) otherwise."""
    if isinstance(schema.get("properties"), Mapping):
        return {"object"}
    if "items" in schema:
        return {"array"}
    return set()


def _text_tokens(text: str) -> int:
    return math.ceil(len(text) / STRING_CHARS_PER_TOKEN)


def _literal_tokens(value: Any) -> int:
    return _text_tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _string_tokens(max_length: int) -> int:
    return 2 + math.ceil(max_length / STRING_CHARS_PER_TOKEN)  # the quotes, then the text


_ANY_TOKENS = _string_tokens(DEFAULT_MAX_LENGTH)  # a value of any type: the widest scalar


def instance_tokens(schema: Any, *, root: Mapping[str, Any] | None = None) -> int:
    """The most tokens a JSON instance of ``schema`` can take: strings their ``maxLength``
    (else :data:`DEFAULT_MAX_LENGTH`) at :data:`STRING_CHARS_PER_TOKEN`; integers and numbers
    :data:`INTEGER_TOKENS` and :data:`NUMBER_TOKENS`; booleans and null one token; ``const`` and
    ``enum`` their longest literal; arrays ``maxItems`` (else :data:`DEFAULT_MAX_ITEMS`) items;
    objects every declared property (keys included), or :data:`DEFAULT_MAX_ITEMS` members when
    they declare none; a union its widest branch. A value of any type -- no type, a type or
    keyword the walk does not know, a ``$ref`` into ``root`` (default: ``schema``) that is
    recursive or resolves to nothing -- costs a default-length string. Punctuation is a token
    per mark and whitespace a token per gap (the grammars allow one bounded run between any two
    tokens). The walk never raises: any JSON value is a valid argument."""
    start = schema if root is None else root
    return _Tokens(start if isinstance(start, Mapping) else {}).cost(schema)


def call_tokens(name: str, arguments: Any) -> int:
    """The most tokens one call ``{"name": name, "arguments": …}`` can take, ``arguments``
    being the tool's own parameter schema (its ``$ref`` resolved against itself)."""
    return (
        2
        + _literal_tokens("name")
        + _MEMBER_TOKENS
        + _literal_tokens(name)
        + _literal_tokens("arguments")
        + _MEMBER_TOKENS
        + instance_tokens(arguments)
    )


def calls_tokens(each: Sequence[int], *, max_calls: int) -> int:
    """The most tokens a JSON array of up to ``max_calls`` calls can take, one of which costs
    at most ``max(each)``."""
    return _array_of(max(each, default=0), max_calls)


def _array_of(item: int, count: int) -> int:
    separators = (1 + 2 * _GAP_TOKENS) * max(count - 1, 0)
    return 2 + 2 * _GAP_TOKENS + item * count + separators


class _Tokens:
    """The walk of :func:`instance_tokens`, following ``$ref`` into one root schema."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._refs = RefExpansion(root)

    def cost(self, schema: Any) -> int:
        """The most tokens an instance of ``schema`` can take (see :func:`instance_tokens`)."""
        if not isinstance(schema, Mapping) or not schema:
            return _ANY_TOKENS
        if "$ref" in schema:
            return self._ref_cost(schema)
        literal = _literal_cost(schema)
        if literal is not None:
            return literal
        combined = self._combined_cost(schema)
        if combined is not None:
            return combined
        kinds = _kinds(schema) or _implied_kinds(schema)
        if not kinds:
            return _ANY_TOKENS
        return max(self._typed(schema, kind) for kind in kinds)

    def _ref_cost(self, schema: Mapping[str, Any]) -> int:
        """The cost of what a ``$ref`` points to, or of any value when it resolves to nothing
        or back into itself (its cost would be unbounded)."""
        try:
            with self._refs.expand(schema) as target:
                return self.cost(target)
        except SchemaRefError:
            return _ANY_TOKENS  # unresolvable or recursive: priced as a value of any type

    def _combined_cost(self, schema: Mapping[str, Any]) -> int | None:
        """The cost of a union (its widest branch, each with the schema's other keywords) or
        of a one-part ``allOf`` (the part merged into the schema); None for neither."""
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                rest = {k: v for k, v in schema.items() if k != key}
                return max(
                    self.cost({**rest, **b} if isinstance(b, Mapping) else b) for b in branches
                )
        parts = schema.get("allOf")
        if isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], Mapping):
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.cost({**parts[0], **rest})
        return None

    def _typed(self, schema: Mapping[str, Any], kind: str) -> int:
        if kind == "string":
            return _string_tokens(_count(schema.get("maxLength"), DEFAULT_MAX_LENGTH))
        if kind == "integer":
            return INTEGER_TOKENS
        if kind == "number":
            return NUMBER_TOKENS
        if kind in ("boolean", "null"):
            return 1
        if kind == "array":
            return self._array(schema)
        if kind == "object":
            return self._object(schema)
        return _ANY_TOKENS  # not a JSON type: validation decides what it means

    def _array(self, schema: Mapping[str, Any]) -> int:
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(items, list):  # the older tuple form
            prefix, items = items, schema.get("additionalItems", True)
        fixed = [self.cost(s) for s in prefix] if isinstance(prefix, list) else []
        most = _count(schema.get("maxItems"), DEFAULT_MAX_ITEMS)
        more = max(most - len(fixed), 0) if items is not False else 0
        count = len(fixed) + more
        body = sum(fixed) + (more * self.cost(items) if more else 0)
        return _array_of(0, count) + body

    def _object(self, schema: Mapping[str, Any]) -> int:
        props = schema.get("properties")
        if isinstance(props, Mapping) and props:
            return 2 + sum(
                _literal_tokens(name) + _MEMBER_TOKENS + self.cost(sub)
                for name, sub in props.items()
            )
        extra = schema.get("additionalProperties")
        if extra is False or (isinstance(props, Mapping) and extra is None):
            return 2  # closed, or a tool that declares no parameters: ``{}``
        member = _ANY_TOKENS + _MEMBER_TOKENS + self.cost(True if extra is None else extra)
        return 2 + DEFAULT_MAX_ITEMS * member
