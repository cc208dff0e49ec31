"""A tool's JSON schema with its structure made sound, before anything walks it.

Everything that reads a schema -- example calls in nudges, the grammar writer, the backend's own
schema-to-grammar converter -- walks it by its structural keywords: ``properties`` is an object
of schemas, ``required`` a list of names, ``items`` a schema, ``anyOf`` a list of schemas. Real
clients send schemas that break that structure (draft-3 ``"required": true`` on a property, a
``"type": "dict"`` a model invented, ``"properties": "nope"``), and forge_rt's rule is to accept
what it cannot enforce, never refuse it (see ``core/_schema.py``). So a structural keyword whose
value is not what JSON Schema says it is is *dropped* from the schema forge_rt uses and sends on:
it could not constrain anything, and left in, it is an ``AttributeError`` somewhere deep (or a
backend's 500). The validator builder reports each such keyword as ignored, as before.

The one refusal is depth: a schema nested more than ``max_depth`` sub-schemas deep is a
:class:`~forge_rt.errors.ToolSchemaError`, found by an iterative walk before any recursive code
(pydantic, the grammar writer) sees it.
"""

from __future__ import annotations

from typing import Any

from forge_rt.errors import ToolSchemaError

__all__ = ["MAX_SCHEMA_DEPTH", "check_schema_depth", "sound_schema"]

MAX_SCHEMA_DEPTH = 64  # sub-schemas inside sub-schemas; real tool schemas stay under ~10

_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMAS = (
    "items",
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "contains",
    "not",
    "if",
    "then",
    "else",
)


def check_schema_depth(name: str, schema: Any, *, max_depth: int = MAX_SCHEMA_DEPTH) -> None:
    """Raise :class:`ToolSchemaError` when ``schema`` (tool ``name``'s parameters) nests more
    than ``max_depth`` sub-schemas deep. Iterative: any depth is measured safely."""
    stack: list[tuple[Any, str, int]] = [(schema, "$", 0)]
    while stack:
        node, path, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        if depth > max_depth:
            raise ToolSchemaError(
                f"{name}: schemas are nested deeper than {max_depth} levels - at `{path}`"
            )
        for keyword in _SCHEMA_MAPS:
            value = node.get(keyword)
            if isinstance(value, dict):
                stack.extend((v, f"{path}.{keyword}.{k}", depth + 1) for k, v in value.items())
        for keyword in (*_SCHEMA_LISTS, "items"):
            value = node.get(keyword)
            if isinstance(value, list):
                stack.extend((v, f"{path}.{keyword}[{i}]", depth + 1) for i, v in enumerate(value))
        stack.extend((node[k], f"{path}.{k}", depth + 1) for k in _SCHEMAS if k in node)


def sound_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the structural keywords whose values break JSON Schema's structure.

    Call :func:`check_schema_depth` first: this walk recurses, once per nested sub-schema.
    Everything else -- unknown keywords, value keywords, annotations -- is kept as written.
    """
    out: dict[str, Any] = {}
    for keyword, value in schema.items():
        kept = _sound_value(keyword, value)
        if kept is not _DROP:
            out[keyword] = kept
    return out


_DROP = object()


def _sound_value(keyword: str, value: Any) -> Any:
    if keyword == "type":
        kinds = value if isinstance(value, list) else [value]
        ok = kinds and all(isinstance(k, str) and k in _TYPES for k in kinds)
        return value if ok else _DROP
    if keyword == "required":
        ok = isinstance(value, list) and all(isinstance(r, str) for r in value)
        return value if ok else _DROP
    if keyword == "enum":
        return value if isinstance(value, list) and value else _DROP
    if keyword in _SCHEMA_MAPS:
        if not isinstance(value, dict):
            return _DROP
        return {k: _sub(v) for k, v in value.items() if _is_schema(v)}
    if keyword in _SCHEMA_LISTS:
        parts = [_sub(v) for v in value if _is_schema(v)] if isinstance(value, list) else []
        return parts or _DROP
    if keyword in _SCHEMAS:
        return _sub(value) if _is_schema(value) else _DROP
    return value


def _is_schema(value: Any) -> bool:
    return isinstance(value, dict | bool)


def _sub(value: dict[str, Any] | bool) -> dict[str, Any] | bool:
    return sound_schema(value) if isinstance(value, dict) else value
