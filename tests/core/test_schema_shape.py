"""The schema forge_rt uses and sends on: structural keywords that break JSON Schema dropped,
everything else kept as written; depth measured iteratively, refused past the limit."""

from __future__ import annotations

from typing import Any

import pytest

from forge_rt.core import ToolSpec
from forge_rt.core._schema_shape import MAX_SCHEMA_DEPTH, check_schema_depth, sound_schema
from forge_rt.errors import ToolSchemaError


def test_broken_structural_keywords_are_dropped_and_the_rest_kept() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "dict", "description": "kept"},
            "b": "string",
            "c": {"anyOf": [{"type": "string"}, 7], "pattern": "("},
            "d": {"enum": 5, "x-vendor": {"anything": [1]}},
        },
        "required": True,
        "additionalProperties": "no",
    }
    assert sound_schema(schema) == {
        "type": "object",
        "properties": {
            "a": {"description": "kept"},
            "c": {"anyOf": [{"type": "string"}], "pattern": "("},
            "d": {"x-vendor": {"anything": [1]}},
        },
    }


def test_a_sound_schema_is_unchanged() -> None:
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
        "required": ["tags"],
        "$defs": {"n": {"type": ["integer", "null"]}},
    }
    assert sound_schema(schema) == schema


def test_the_backend_gets_the_sound_schema_and_the_client_hears_what_was_ignored() -> None:
    spec = ToolSpec(name="t", parameters={"type": "object", "properties": "nope"})
    assert spec.json_schema() == {"type": "object"}
    assert spec.ignored_keywords() == ("properties",)


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_depth_is_measured_without_recursion_and_refused_past_the_limit() -> None:
    check_schema_depth("t", _nested(MAX_SCHEMA_DEPTH))
    with pytest.raises(ToolSchemaError, match="nested deeper than 64 levels"):
        check_schema_depth("t", _nested(MAX_SCHEMA_DEPTH + 1))
    with pytest.raises(ToolSchemaError):  # far past Python's recursion limit: still a clean error
        ToolSpec(name="t", parameters=_nested(5000))
