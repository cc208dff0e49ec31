"""Argument coercion: strings become the schema's type only where that reading is the only one."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from forge_rt.core import ToolSpec
from forge_rt.guardrails import coerce_args
from forge_rt.guardrails._rescue_args import repair_args

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


REPAIRABLE = ToolSpec(
    name="book",
    parameters={
        "type": "object",
        "properties": {
            "quarter": {"type": "integer", "minimum": 1, "maximum": 4},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "code": {"type": "string", "pattern": r"^\d{4}$"},
            "zip": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "medication_name": {"type": "string"},
        },
        "required": ["quarter", "medication_name"],
    },
)


@pytest.mark.parametrize(
    ("field", "sent", "meant"),
    [
        ("quarter", "Q4", 4),
        ("quarter", "4th quarter", 4),
        ("unit", "Celsius", "celsius"),
        ("unit", "farenheit", "fahrenheit"),
        ("code", "10", "0010"),
        ("code", 42, "0042"),
        ("zip", 12345, "12345"),
        ("tags", "urgent", ["urgent"]),
    ],
    ids=[
        "number-in-text",
        "number-in-words",
        "enum-case",
        "enum-typo",
        "zero-pad",
        "int-to-pad",
        "int-to-string",
        "scalar-to-list",
    ],
)
def test_repair_reads_what_the_model_meant(field: str, sent: Any, meant: Any) -> None:
    """A wrong value that says what it meant is corrected in the call shown to the model."""
    repair = repair_args(REPAIRABLE, {"quarter": 2, "medication_name": "x", field: sent})
    assert (repair.args[field], repair.corrected, repair.missing) == (meant, (field,), ())
    assert REPAIRABLE.validate_args(repair.args) == repair.args


def test_repair_leaves_out_what_no_rule_can_fill() -> None:
    """A value with nothing to read ("last year") and a placeholder are left for the model to
    fill; the valid values stay."""
    repair = repair_args(
        REPAIRABLE,
        {"quarter": "soon", "medication_name": "<medication_name>", "zip": "0150"},
        unusable=["medication_name"],
    )
    assert repair.args == {"zip": "0150"}
    assert set(repair.missing) == {"quarter", "medication_name"}


def test_repair_renames_a_required_field_sent_under_another_name() -> None:
    """``medication`` for ``medication_name`` is renamed; a pasted schema keyword never is."""
    repair = repair_args(
        REPAIRABLE, {"quarter": 1}, unknown={"medication": "metformin", "title": "Book"}
    )
    assert (repair.args, repair.renamed) == (
        {"quarter": 1, "medication_name": "metformin"},
        {"medication_name": "medication"},
    )


def test_repair_drops_a_key_a_strict_model_forbids() -> None:
    """A model that forbids extra keys rejects them; the call shown leaves them out, unasked."""

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        city: str

    repair = repair_args(ToolSpec(name="w", parameters=Strict), {"city": "Turku", "x": 1})
    assert (repair.args, repair.missing) == ({"city": "Turku"}, ())
