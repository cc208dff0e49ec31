"""Tool schemas: what forge_rt cannot enforce is ignored and named, never refused."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from forge_rt.core import ToolArgumentError, ToolSpec, model_from_json_schema
from forge_rt.core._schema import ignored_keywords
from forge_rt.errors import ToolSchemaError


def _schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


@pytest.mark.parametrize(
    ("schema", "ignored"),
    [
        (_schema(city={"type": "string", "optional": True}), ("optional",)),
        (_schema(x={"type": "string", "not": {"const": "a"}}), ("not",)),
        (_schema(tags={"type": "array", "uniqueItems": True}), ("uniqueItems",)),
        (
            {**_schema(a={"type": "string"}), "patternProperties": {"^x": {}}},
            ("patternProperties",),
        ),
        (_schema(a={"allOf": [{"type": "string"}, {"minLength": 2}]}), ("allOf",)),
        (_schema(a={"type": "string", "pattern": "("}), ("pattern",)),
        (_schema(a={"type": "string", "minLength": "two"}), ("minLength",)),
        (_schema(a={"type": "integer", "minimum": True}), ("minimum",)),
        (_schema(a={"type": "integer", "multipleOf": 0}), ("multipleOf",)),
        (_schema(a={"enum": "abc"}), ("enum",)),
        (_schema(a={"anyOf": []}), ("anyOf",)),
        (_schema(a={"type": "dict"}), ("type",)),
        (_schema(a={"type": "array", "items": [{"type": "string"}]}), ("items",)),
        (_schema(a="string"), ("properties",)),
        ({"type": "object", "properties": [1]}, ("properties",)),
        ({**_schema(a={"type": "string"}), "required": ["a", "b"]}, ("required",)),
        (_schema(a={"type": "object", "required": True}), ("required",)),
        ({**_schema(a={}), "additionalProperties": "no"}, ("additionalProperties",)),
    ],
    ids=[
        "unknown",
        "not",
        "uniqueItems",
        "patternProperties",
        "allOf-several",
        "bad-regex",
        "length-not-a-count",
        "bound-not-a-number",
        "multipleOf-zero",
        "enum-not-a-list",
        "empty-anyOf",
        "unknown-type",
        "tuple-items",
        "property-not-a-schema",
        "properties-not-an-object",
        "required-without-property",
        "draft3-required",
        "additionalProperties-not-a-schema",
    ],
)
def test_unenforceable_keywords_are_accepted_and_named(
    schema: dict[str, Any], ignored: tuple[str, ...]
) -> None:
    """A schema with a keyword forge_rt cannot enforce builds a validator and names it."""
    ToolSpec(name="t", parameters=schema)
    assert ignored_keywords(schema) == ignored


def test_a_schema_forge_rt_enforces_fully_names_nothing() -> None:
    """Annotations and the keywords the validator checks are not reported."""
    schema = _schema(
        city={"type": "string", "description": "City", "minLength": 1, "format": "city"},
        days={"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
        unit={"enum": ["c", "f"], "title": "Unit"},
    )
    assert ignored_keywords({**schema, "required": ["city"], "$schema": "x"}) == ()


def test_what_is_known_is_still_enforced_beside_what_is_ignored() -> None:
    """Ignoring one keyword leaves the rest of the schema in force."""
    spec = ToolSpec(
        name="t",
        parameters={
            **_schema(city={"type": "string", "optional": True, "maxLength": 5}),
            "required": ["city"],
        },
    )
    assert spec.validate_args({"city": "Paris"}) == {"city": "Paris"}
    for bad in ({}, {"city": "Marseille"}, {"city": 3}):
        with pytest.raises(ToolArgumentError):
            spec.validate_args(bad)


def test_an_integer_bound_that_is_not_whole_is_rounded_inwards() -> None:
    """``minimum: 1.5`` on an integer admits 2 and refuses 1, as JSON schema means it."""
    spec = ToolSpec(name="t", parameters=_schema(n={"type": "integer", "minimum": 1.5}))
    assert spec.validate_args({"n": 2}) == {"n": 2}
    with pytest.raises(ToolArgumentError):
        spec.validate_args({"n": 1})


def test_a_lookahead_pattern_is_enforced() -> None:
    """Regex lookarounds (ECMA-262, common in JSON schemas) are checked, not refused."""
    spec = ToolSpec(name="t", parameters=_schema(code={"type": "string", "pattern": "^(?!x)"}))
    assert spec.validate_args({"code": "abc"}) == {"code": "abc"}
    with pytest.raises(ToolArgumentError):
        spec.validate_args({"code": "xyz"})


def test_ignored_keywords_are_logged_once_per_tool() -> None:
    """Building the same tool twice logs its ignored keywords once, with the tool's name."""
    schema = _schema(city={"type": "string", "optional": True})
    with capture_logs() as logs:
        model_from_json_schema("logged_once_tool", schema)
        model_from_json_schema("logged_once_tool", schema)
    ignored = [e for e in logs if e["event"] == "schema.keywords_ignored"]
    assert [(e["tool"], e["keywords"]) for e in ignored] == [("logged_once_tool", ["optional"])]


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"type": "string"}, r"^t: tool parameters must be a JSON schema of type 'object'"),
        ([1, 2], r"^t: parameters must be a JSON-schema object"),
        (_schema(a={"$ref": "#/$defs/Missing"}), r"^t: \$ref '#/\$defs/Missing' points at nothing"),
        (
            _schema(a={"$ref": "https://x.test/s.json"}),
            r"^t: \$ref 'https://x.test/s.json' is not local",
        ),
        (
            {**_schema(a={"$ref": "#/$defs/N"}), "$defs": {"N": _schema(n={"$ref": "#/$defs/N"})}},
            r"^t: recursive \$ref",
        ),
    ],
    ids=["not-an-object", "not-a-mapping", "dangling-ref", "remote-ref", "recursive-ref"],
)
def test_unusable_schemas_stay_errors(parameters: Any, message: str) -> None:
    """A schema nothing can be built from is refused with a message saying why."""
    with pytest.raises(ToolSchemaError, match=message):
        model_from_json_schema("t", parameters)
