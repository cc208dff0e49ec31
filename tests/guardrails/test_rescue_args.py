"""Argument coercion: strings become the schema's type only where that reading is the only one."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from forge_rt.core import ToolSpec
from forge_rt.guardrails import coerce_args

SPEC = ToolSpec(
    name="t",
    parameters={
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "meta": {
                "type": "object",
                "properties": {"level": {"type": "integer"}, "note": {"type": "string"}},
            },
            "code": {"type": "string"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "maybe": {"type": ["integer", "null"]},
            "choice": {"enum": [1, 2, 3]},
            "anything": {},
        },
    },
)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"count": "4"}, {"count": 4}),
        ({"count": " -3 "}, {"count": -3}),
        ({"count": "4.5"}, {"count": "4.5"}),
        ({"count": "four"}, {"count": "four"}),
        ({"ratio": "2.5"}, {"ratio": 2.5}),
        ({"ratio": "3"}, {"ratio": 3}),
        ({"ratio": "1e3"}, {"ratio": 1000.0}),
        ({"flag": "true"}, {"flag": True}),
        ({"flag": "False"}, {"flag": False}),
        ({"flag": "yes"}, {"flag": "yes"}),
        ({"flag": "1"}, {"flag": "1"}),
        ({"tags": '["a", "b"]'}, {"tags": ["a", "b"]}),
        ({"tags": "['a', 'b']"}, {"tags": ["a", "b"]}),
        ({"tags": "a, b"}, {"tags": "a, b"}),
        ({"ids": ["1", "2"]}, {"ids": [1, 2]}),
        ({"ids": '["1", 2]'}, {"ids": [1, 2]}),
        ({"meta": '{"level": 2}'}, {"meta": {"level": 2}}),
        ({"meta": {"level": "3", "note": "7"}}, {"meta": {"level": 3, "note": "7"}}),
        ({"code": "0010"}, {"code": "0010"}),
        ({"code": 10}, {"code": 10}),
        ({"either": "4"}, {"either": "4"}),
        ({"maybe": "4"}, {"maybe": 4}),
        ({"maybe": "null"}, {"maybe": None}),
        ({"choice": "2"}, {"choice": 2}),
        ({"anything": "5"}, {"anything": "5"}),
        ({"unknown": "5"}, {"unknown": "5"}),
    ],
    ids=[
        "integer",
        "integer-padded-negative",
        "integer-from-decimal-is-ambiguous",
        "integer-from-word",
        "number",
        "number-integral",
        "number-exponent",
        "boolean-true",
        "boolean-false-capitalised",
        "boolean-yes-is-ambiguous",
        "boolean-one-is-ambiguous",
        "array-json",
        "array-python-literal",
        "array-comma-text-is-ambiguous",
        "array-items",
        "array-items-from-json",
        "object-json",
        "object-nested-properties",
        "string-stays",
        "string-given-int-stays",
        "union-with-string-stays",
        "nullable-integer",
        "nullable-null",
        "enum-of-integers",
        "untyped-stays",
        "unknown-parameter-stays",
    ],
)
def test_coercion(args: dict[str, Any], expected: dict[str, Any]) -> None:
    """Each value becomes the schema's type only when that is its one reading."""
    assert coerce_args(SPEC, args) == expected


def test_input_is_not_modified() -> None:
    """coerce_args returns a new mapping and leaves the caller's dict alone."""
    args = {"count": "4", "meta": {"level": "1"}}
    result = coerce_args(SPEC, args)
    assert args == {"count": "4", "meta": {"level": "1"}}
    assert result == {"count": 4, "meta": {"level": 1}}


class Window(BaseModel):
    start: int
    end: int


class Plot(BaseModel):
    title: str
    window: Window
    style: Literal["line", "bar"] = "line"
    points: list[float] = []


def test_pydantic_parameters_with_refs_are_coerced() -> None:
    """Nested pydantic models ($defs/$ref in the schema) are followed, and validation then passes."""
    spec = ToolSpec(name="plot", parameters=Plot)
    args = {"title": "t", "window": {"start": "1", "end": "9"}, "points": '["1.5", 2]'}
    coerced = coerce_args(spec, args)
    assert coerced == {"title": "t", "window": {"start": 1, "end": 9}, "points": [1.5, 2]}
    assert spec.validate_args(coerced)["window"] == {"start": 1, "end": 9}


def test_schema_without_properties_passes_through() -> None:
    """A free-form tool's arguments are returned as written."""
    spec = ToolSpec(name="free", parameters={"type": "object"})
    assert coerce_args(spec, {"a": "1", "b": [1]}) == {"a": "1", "b": [1]}
