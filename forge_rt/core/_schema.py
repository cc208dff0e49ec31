"""Turn a tool's JSON schema into a pydantic model, so every tool validates its arguments the same way.

Tools arrive either as pydantic models (runtime users) or as JSON schemas (proxy clients, users who
prefer dicts). Arguments are always validated by pydantic; this module builds the model for the
second case. Annotation-only keywords are accepted and ignored; a validation keyword we cannot
honour raises :class:`~forge_rt.errors.ToolSchemaError` rather than being silently skipped.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from forge_rt.core._jsonschema import RecursiveRefError, RefExpansion, SchemaRefError
from forge_rt.errors import ToolSchemaError

__all__ = ["model_from_json_schema"]

# Keywords that describe but do not constrain; safe to ignore for validation.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "format",
        "$schema",
        "$id",
        "$comment",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentMediaType",
        "contentEncoding",
        "$defs",
        "definitions",
        "nullable",
        "strict",
    }
)
_HANDLED = frozenset(
    {
        "type",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
    }
)

_PRIMITIVES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}


class _Builder:
    def __init__(self, root: dict[str, Any], name: str) -> None:
        self._name = name
        self._counter = 0
        self._refs = RefExpansion(root)

    def _model_name(self, hint: str) -> str:
        self._counter += 1
        safe = re.sub(r"\W", "_", hint) or "Model"
        return f"{safe}_{self._counter}" if self._counter > 1 else safe

    def annotation(self, schema: Any, where: str, hint: str) -> Any:
        """The Python type (with constraints) that validates ``schema``."""
        if schema is True or schema == {}:
            return Any
        if not isinstance(schema, dict):
            raise ToolSchemaError(f"{self._name}: schema at {where} must be an object")
        unknown = set(schema) - _ANNOTATIONS - _HANDLED
        if unknown:
            raise ToolSchemaError(
                f"{self._name}: unsupported JSON-schema keyword(s) {sorted(unknown)} at {where}; "
                "simplify the schema or give the tool a pydantic model instead"
            )
        if "$ref" in schema:
            try:
                with self._refs.expand(schema) as target:
                    return self.annotation(target, where, hint)
            except RecursiveRefError as exc:
                raise ToolSchemaError(
                    f"{self._name}: {exc} - at `{where}`; a JSON schema that contains itself has "
                    "no validator here: give the tool a pydantic model instead"
                ) from exc
            except SchemaRefError as exc:
                raise ToolSchemaError(f"{self._name}: {exc} - at `{where}`") from exc
        if "const" in schema:
            return Literal[schema["const"]]
        if "enum" in schema:
            values = tuple(schema["enum"])
            if not values:
                raise ToolSchemaError(f"{self._name}: empty enum at {where}")
            return Literal[values]
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [
                    self.annotation(sub, f"{where}.{key}[{i}]", hint)
                    for i, sub in enumerate(schema[key])
                ]
                return Union[tuple(options)]  # noqa: UP007 -- built at run time from a list
        if "allOf" in schema:
            parts = schema["allOf"]
            if len(parts) != 1:
                raise ToolSchemaError(
                    f"{self._name}: allOf with {len(parts)} parts at {where} is not supported"
                )
            return self.annotation(parts[0], where, hint)
        kind = schema.get("type")
        if kind is None:
            kind = "object" if "properties" in schema else None
        if kind is None:
            return Any
        if isinstance(kind, list):
            options = [self.annotation({**schema, "type": k}, where, hint) for k in kind]
            return Union[tuple(options)]  # noqa: UP007 -- built at run time from a list
        if kind == "object":
            return self.object_model(schema, where, hint)
        if kind == "array":
            item = self.annotation(schema.get("items", {}), f"{where}[]", hint)
            constraints = {
                "min_length": schema.get("minItems"),
                "max_length": schema.get("maxItems"),
            }
            return Annotated[list[item], Field(**_present(constraints))]  # type: ignore[valid-type]
        if kind not in _PRIMITIVES:
            raise ToolSchemaError(f"{self._name}: unknown type {kind!r} at {where}")
        base = _PRIMITIVES[kind]
        constraints = {
            "ge": schema.get("minimum"),
            "le": schema.get("maximum"),
            "gt": schema.get("exclusiveMinimum"),
            "lt": schema.get("exclusiveMaximum"),
            "multiple_of": schema.get("multipleOf"),
            "min_length": schema.get("minLength"),
            "max_length": schema.get("maxLength"),
            "pattern": schema.get("pattern"),
        }
        present = _present(constraints)
        return Annotated[base, Field(**present)] if present else base

    def object_model(self, schema: dict[str, Any], where: str, hint: str) -> Any:
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", not properties)
        if not properties and extra is not False:
            value = self.annotation(extra if isinstance(extra, dict) else {}, f"{where}.*", hint)
            return dict[str, value]  # type: ignore[valid-type]
        required = set(schema.get("required", []))
        missing = required - set(properties)
        if missing:
            raise ToolSchemaError(
                f"{self._name}: required names {sorted(missing)} at {where} are not properties"
            )
        fields: dict[str, Any] = {}
        for index, (prop, sub) in enumerate(properties.items()):
            annotation = self.annotation(sub, f"{where}.{prop}", prop)
            # Missing optional arguments stay missing (exclude_unset) instead of becoming None;
            # an explicit null is still validated against the declared type.
            field = Field(alias=prop) if prop in required else Field(default=None, alias=prop)
            fields[f"f{index}"] = (annotation, field)
        config = ConfigDict(
            extra="allow" if extra is not False else "forbid", populate_by_name=False
        )
        return pydantic.create_model(self._model_name(hint), __config__=config, **fields)


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def model_from_json_schema(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """Build a pydantic model that validates exactly what ``schema`` (an object schema) allows."""
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"{name}: parameters must be a JSON-schema object, got {schema!r}")
    kind = schema.get("type", "object")
    if kind != "object":
        raise ToolSchemaError(
            f"{name}: tool parameters must be a JSON schema of type 'object', got {kind!r}"
        )
    builder = _Builder(schema, name)
    model = builder.object_model({**schema, "type": "object"}, "$", name)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        # An object schema without properties validates as a free-form mapping.
        return pydantic.create_model(f"{name}_args", __config__=ConfigDict(extra="allow"))
    return model
