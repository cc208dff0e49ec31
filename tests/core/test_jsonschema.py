"""The shared JSON-schema helpers: $ref resolution, example values, the tool-call key tables."""

from __future__ import annotations

from typing import Any

import pytest

from forge_rt.core._jsonschema import (
    ARGUMENT_KEYS,
    NAME_KEYS,
    RecursiveRefError,
    RefExpansion,
    SchemaRefError,
    deref,
    example_arguments,
    example_value,
    resolve_ref,
)


def _angle(name: str) -> str:
    return f"<{name}>"


def _example(schema: Any, root: dict[str, Any] | None = None) -> Any:
    return example_value(schema, root or {}, name="field", strings=_angle, fit_lengths=True)


# --- resolution --------------------------------------------------------------------------------

ROOT: dict[str, Any] = {
    "type": "object",
    "properties": {"home": {"$ref": "#/$defs/Address"}},
    "$defs": {
        "Address": {"type": "object", "properties": {"city": {"$ref": "#/$defs/City"}}},
        "City": {"type": "string", "minLength": 2},
        "Alias": {"$ref": "#/$defs/City"},
        "Outer": {"$defs": {"Inner": {"type": "integer"}}},
        "a/b~c": {"type": "boolean"},
    },
    "definitions": {"Legacy": {"type": "null"}},
}


def test_ref_into_defs_resolves_to_the_definition() -> None:
    """A ``#/$defs/Name`` ref resolves to that definition itself."""
    assert ROOT["$defs"]["Address"] == resolve_ref(ROOT, "#/$defs/Address")


def test_ref_into_legacy_definitions_resolves() -> None:
    """Draft-7 style ``#/definitions/Name`` refs resolve like ``$defs`` ones."""
    expected = {"type": "null"}
    assert expected == resolve_ref(ROOT, "#/definitions/Legacy")


def test_ref_into_nested_defs_resolves() -> None:
    """A pointer through a definition's own ``$defs`` reaches the nested definition."""
    expected = {"type": "integer"}
    assert expected == resolve_ref(ROOT, "#/$defs/Outer/$defs/Inner")


def test_ref_to_any_pointer_in_the_document_resolves() -> None:
    """A ref may point anywhere in the schema, not only into ``$defs``."""
    expected = {"$ref": "#/$defs/Address"}
    assert expected == resolve_ref(ROOT, "#/properties/home")


def test_hash_alone_is_the_root() -> None:
    """``#`` refers to the whole schema."""
    assert ROOT is resolve_ref(ROOT, "#")


def test_pointer_escapes_are_decoded() -> None:
    """``~1`` stands for ``/`` and ``~0`` for ``~`` in a pointer token (RFC 6901)."""
    expected = {"type": "boolean"}
    assert expected == resolve_ref(ROOT, "#/$defs/a~1b~0c")


def test_ref_that_points_at_nothing_names_the_ref_and_the_gap() -> None:
    """A ref to a missing definition raises SchemaRefError naming the ref and what is missing."""
    with pytest.raises(
        SchemaRefError, match=r"^\$ref '#/\$defs/Nope' points at nothing: #/\$defs has no 'Nope'$"
    ) as info:
        resolve_ref(ROOT, "#/$defs/Nope")
    expected = "#/$defs/Nope"
    assert expected == info.value.ref


def test_non_local_ref_is_refused() -> None:
    """A ref to another document is an error: there is nothing to fetch it from."""
    with pytest.raises(SchemaRefError, match=r"^\$ref 'https://x\.test/s\.json' is not local"):
        resolve_ref(ROOT, "https://x.test/s.json")


def test_ref_to_a_non_schema_is_refused() -> None:
    """A ref that lands on a list or a string is not a schema and raises."""
    with pytest.raises(SchemaRefError, match=r"points at a str, not at a schema$"):
        resolve_ref(ROOT, "#/type")


def test_unresolvable_ref_is_a_value_error() -> None:
    """SchemaRefError is a ValueError, so callers without their own error type can catch that."""
    assert issubclass(SchemaRefError, ValueError)


def test_deref_follows_a_chain_of_refs() -> None:
    """A ref to a ref is followed to the schema at the end of the chain."""
    expected = {"type": "string", "minLength": 2}
    assert expected == deref({"$ref": "#/$defs/Alias"}, ROOT)


def test_deref_keeps_sibling_keywords_over_the_target() -> None:
    """Keywords beside a ``$ref`` are kept and win over the target's."""
    schema = {"$ref": "#/$defs/City", "minLength": 5, "description": "where"}
    expected = {"type": "string", "minLength": 5, "description": "where"}
    assert expected == deref(schema, ROOT)


def test_deref_leaves_a_schema_without_ref_alone() -> None:
    """A schema with no top-level ``$ref`` comes back as it is."""
    schema = {"type": "integer"}
    assert schema is deref(schema, ROOT)


def test_deref_refuses_a_cycle_of_refs() -> None:
    """Refs that point at each other raise RecursiveRefError with the cycle spelled out."""
    root = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}
    with pytest.raises(
        RecursiveRefError,
        match=r"^recursive \$ref '#/\$defs/A' \(#/\$defs/A -> #/\$defs/B -> #/\$defs/A\)$",
    ):
        deref({"$ref": "#/$defs/A"}, root)


def test_expansion_refuses_a_definition_inside_itself() -> None:
    """Expanding a ref while it is already being expanded raises RecursiveRefError."""
    root = {"$defs": {"Node": {"properties": {"next": {"$ref": "#/$defs/Node"}}}}}
    refs = RefExpansion(root)
    with refs.expand({"$ref": "#/$defs/Node"}) as node:
        inner = node["properties"]["next"]
        with (
            pytest.raises(RecursiveRefError, match=r"^recursive \$ref '#/\$defs/Node'"),
            refs.expand(inner),
        ):
            pass


def test_expansion_allows_the_same_ref_in_sibling_branches() -> None:
    """A ref used twice side by side is not recursion: it is released when its block ends."""
    refs = RefExpansion(ROOT)
    with refs.expand({"$ref": "#/$defs/City"}):
        pass
    with refs.expand({"$ref": "#/$defs/City"}) as again:
        expected = {"type": "string", "minLength": 2}
        assert expected == again


# --- example values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param({"type": "string"}, "<field>", id="string"),
        pytest.param({"type": "integer"}, 1, id="integer"),
        pytest.param({"type": "number"}, 1.0, id="number"),
        pytest.param({"type": "boolean"}, True, id="boolean"),
        pytest.param({"type": "null"}, None, id="null"),
        pytest.param({"type": "array", "items": {"type": "integer"}}, [1], id="array"),
        pytest.param({"type": "object"}, {}, id="object-without-properties"),
        pytest.param({}, "<field>", id="untyped-is-a-string"),
        pytest.param(True, "<field>", id="true-schema"),
    ],
)
def test_example_of_each_json_type(schema: Any, expected: Any) -> None:
    """Each JSON type gets its simple example value."""
    assert expected == _example(schema)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param({"type": "integer", "minimum": 5}, 5, id="integer-minimum"),
        pytest.param({"type": "integer", "exclusiveMinimum": 5}, 6, id="integer-exclusive-min"),
        pytest.param({"type": "integer", "minimum": 2.5}, 3, id="integer-fractional-minimum"),
        pytest.param({"type": "integer", "maximum": -3}, -3, id="integer-maximum"),
        pytest.param({"type": "integer", "exclusiveMaximum": 0}, -1, id="integer-exclusive-max"),
        pytest.param({"type": "number", "minimum": 0.5}, 0.5, id="number-minimum"),
        pytest.param({"type": "number", "exclusiveMinimum": 2}, 3.0, id="number-exclusive-min"),
        pytest.param({"type": "number", "maximum": 0.25}, 0.25, id="number-maximum"),
    ],
)
def test_example_numbers_respect_their_bounds(schema: dict[str, Any], expected: Any) -> None:
    """A number is its lower bound (1 without one), kept under its upper bound."""
    actual = _example(schema)
    expected = (expected, type(expected))
    assert expected == (actual, type(actual))


def test_example_string_is_padded_to_min_length() -> None:
    """A string shorter than ``minLength`` is padded with ``x``."""
    expected = "<field>xxx"
    assert expected == _example({"type": "string", "minLength": 10})


def test_example_string_is_cut_to_max_length() -> None:
    """A string longer than ``maxLength`` is cut."""
    expected = "<fi"
    assert expected == _example({"type": "string", "maxLength": 3})


def test_example_array_has_min_items_items() -> None:
    """An array holds ``minItems`` items, each an example of ``items``."""
    expected = [True, True, True]
    assert expected == _example({"type": "array", "items": {"type": "boolean"}, "minItems": 3})


def test_example_array_respects_max_items_zero() -> None:
    """An array that may hold no items is empty."""
    expected = []
    assert expected == _example({"type": "array", "items": {"type": "string"}, "maxItems": 0})


def test_example_enum_is_its_first_value() -> None:
    """An enum's example is its first allowed value."""
    expected = "celsius"
    assert expected == _example({"type": "string", "enum": ["celsius", "fahrenheit"]})


def test_example_const_is_the_constant() -> None:
    """A const's example is the constant, even beside a different default."""
    expected = "v2"
    assert expected == _example({"const": "v2", "default": "v1"})


def test_example_prefers_declared_examples_then_default() -> None:
    """Declared ``examples`` win over ``example``, which wins over ``default``."""
    schema = {"type": "string", "examples": ["Paris"], "example": "Rome", "default": "Oslo"}
    expected = ("Paris", "Rome", "Oslo")
    assert expected == (
        _example(schema),
        _example({k: v for k, v in schema.items() if k != "examples"}),
        _example({"type": "string", "default": "Oslo"}),
    )


def test_example_empty_examples_list_is_ignored() -> None:
    """An empty ``examples`` list declares nothing, so the type decides."""
    expected = 1
    assert expected == _example({"type": "integer", "examples": []})


@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
def test_example_union_takes_the_first_non_null_option(key: str) -> None:
    """A union's example is its first option that is not null."""
    expected = 1
    assert expected == _example({key: [{"type": "null"}, {"type": "integer"}, {"type": "string"}]})


def test_example_union_of_only_null_is_null() -> None:
    """A union with nothing but null has null as its example."""
    assert None is _example({"anyOf": [{"type": "null"}]})


def test_example_union_skips_a_null_behind_a_ref() -> None:
    """An option that is null through a ``$ref`` counts as null too."""
    root = {"$defs": {"Nothing": {"type": "null"}}}
    expected = "<field>"
    assert expected == _example({"anyOf": [{"$ref": "#/$defs/Nothing"}, {"type": "string"}]}, root)


def test_example_type_list_takes_the_first_non_null_type() -> None:
    """``type: [null, integer]`` gets an integer."""
    expected = 1
    assert expected == _example({"type": ["null", "integer"]})


def test_example_nested_objects_hold_their_required_properties() -> None:
    """An object holds its required properties, strings named after their property."""
    schema = {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
            },
            "note": {"type": "string"},
        },
        "required": ["user"],
    }
    expected = {"user": {"name": "<name>"}}
    assert expected == _example(schema)


def test_example_object_without_required_list_holds_every_property() -> None:
    """An object that lists no required properties gets all of them."""
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}
    expected = {"a": 1, "b": True}
    assert expected == _example(schema)


def test_example_array_items_are_named_after_the_array() -> None:
    """Strings inside an array are named after the array's property."""
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}}
    expected = {"tags": ["<tags>"]}
    assert expected == _example(schema)


def test_example_follows_refs_and_their_siblings() -> None:
    """Refs are resolved, and a default beside a ``$ref`` is honoured."""
    schema = {
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Address"},
            "unit": {"$ref": "#/$defs/Unit", "default": "F"},
        },
        "$defs": {
            "Address": {"type": "object", "properties": {"zip": {"type": "string"}}},
            "Unit": {"enum": ["C", "F"]},
        },
    }
    expected = {"home": {"zip": "<zip>"}, "unit": "F"}
    assert expected == _example(schema, schema)


def test_example_of_a_schema_requiring_itself_raises() -> None:
    """A definition that requires itself has no finite example: RecursiveRefError, not a hang."""
    root = {
        "$defs": {
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
        }
    }
    with pytest.raises(RecursiveRefError, match=r"^recursive \$ref '#/\$defs/Node'"):
        _example({"$ref": "#/$defs/Node"}, root)


def test_example_with_an_unresolvable_ref_raises() -> None:
    """An example of a schema with a dangling ref raises instead of guessing."""
    with pytest.raises(SchemaRefError, match=r"^\$ref '#/\$defs/Gone' points at nothing"):
        _example({"$ref": "#/$defs/Gone"}, {"$defs": {}})


def test_example_is_deterministic() -> None:
    """The same schema gives the same example every time."""
    expected = [{"home": {"city": "<city>"}}] * 2
    assert expected == [_example(ROOT, ROOT), _example(ROOT, ROOT)]


def test_example_strings_come_from_the_callers_function() -> None:
    """The ``strings`` function decides every string, given the property's name."""
    schema = {"properties": {"city": {"type": "string"}, "tags": {"type": "array", "items": {}}}}
    value = example_value(schema, schema, name="args", strings=str.upper, fit_lengths=True)
    expected = {"city": "CITY", "tags": ["TAGS"]}
    assert expected == value


def test_example_arguments_of_a_parameter_schema() -> None:
    """A tool's parameter schema gives an argument object."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    expected = {"q": "<q>"}
    assert expected == example_arguments(schema, strings=_angle, fit_lengths=False)


def test_example_arguments_refuse_a_non_object_example() -> None:
    """A parameter schema whose example is not an object raises ValueError saying so."""
    with pytest.raises(ValueError, match=r"^the example of a parameter schema must be an object"):
        example_arguments({"type": "object", "default": "nope"}, strings=_angle, fit_lengths=False)


# --- key tables --------------------------------------------------------------------------------


def test_name_keys_hold_the_spellings_models_use() -> None:
    """Tool names are read under name, tool, tool_name and function, ``name`` first."""
    expected = ("name", "tool", "tool_name", "function")
    assert expected == NAME_KEYS


def test_argument_keys_hold_the_spellings_models_use() -> None:
    """Arguments are read under arguments, args, parameters, params, input, tool_input."""
    expected = ("arguments", "args", "parameters", "params", "input", "tool_input")
    assert expected == ARGUMENT_KEYS


def test_key_tables_do_not_overlap() -> None:
    """No key can be read both as a tool name and as the arguments."""
    assert set() == set(NAME_KEYS) & set(ARGUMENT_KEYS)
