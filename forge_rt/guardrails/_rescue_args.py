"""Arguments as the model wrote them, turned into what the tool's schema says they are.

XML dialects deliver every value as a string and small models quote numbers, so ``"4"`` for an
integer parameter is common. :func:`coerce_args` converts only where the schema leaves exactly one
reading; anything ambiguous (a parameter that also accepts strings, a value that parses as two
types) is left as written so validation can report it to the model.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from forge_rt.core import ToolSpec
from forge_rt.core._jsonschema import deref
from forge_rt.guardrails._json_repair import JsonRepairError, loads_lenient

__all__ = ["coerce_args", "schema_of"]

_MAX_NUMBER = 400
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_NULL = frozenset({"null", "None", "NULL"})

# Rendering a pydantic model's schema costs tens of microseconds; rescue runs per reply, so the
# schema is cached per spec object (held strongly here, so an id is never reused while cached).
_SCHEMAS: OrderedDict[int, tuple[ToolSpec, dict[str, Any]]] = OrderedDict()
_SCHEMA_CACHE_SIZE = 512


def schema_of(spec: ToolSpec) -> dict[str, Any]:
    """``spec.json_schema()``, cached per spec object. Treat the result as read-only."""
    key = id(spec)
    hit = _SCHEMAS.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    schema = spec.json_schema()
    _SCHEMAS[key] = (spec, schema)
    if len(_SCHEMAS) > _SCHEMA_CACHE_SIZE:
        _SCHEMAS.popitem(last=False)
    return schema


class _Coercer:
    """Walks arguments alongside their schema, resolving local ``$ref`` against the root."""

    __slots__ = ("_root",)

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root

    def resolve(self, schema: Any) -> Mapping[str, Any]:
        """The schema that applies: ``$ref`` followed, a one-part ``allOf`` unwrapped."""
        schema = deref(schema, self._root)
        while isinstance(schema, Mapping):
            all_of = schema.get("allOf")
            if not (isinstance(all_of, list) and len(all_of) == 1):
                return schema
            schema = deref(all_of[0], self._root)
        return {}  # true or false: a schema that names no types

    def types(self, schema: Mapping[str, Any]) -> set[str] | None:
        """The JSON types a schema admits, or None when it does not say (anything goes)."""
        if "const" in schema:
            return {_json_type(schema["const"])}
        if "enum" in schema and isinstance(schema["enum"], list):
            return {_json_type(v) for v in schema["enum"]}
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                found: set[str] = set()
                for option in options:
                    kinds = self.types(self.resolve(option))
                    if kinds is None:
                        return None
                    found |= kinds
                return found
        kind = schema.get("type")
        if isinstance(kind, str):
            return {kind}
        if isinstance(kind, list):
            return {k for k in kind if isinstance(k, str)}
        if "properties" in schema:
            return {"object"}
        return None

    def value(self, value: Any, schema: Any) -> Any:
        resolved = self.resolve(schema)
        kinds = self.types(resolved)
        if isinstance(value, str):
            if kinds is None or "string" in kinds:
                return value
            value = _from_string(value, kinds)
            if not isinstance(value, dict | list):
                return value
            # A JSON-encoded array or object: its items get the same treatment.
        if isinstance(value, dict):
            return self.mapping(value, resolved)
        if isinstance(value, list):
            items = resolved.get("items")
            if isinstance(items, Mapping):
                return [self.value(v, items) for v in value]
        return value

    def mapping(self, args: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            return args
        return {k: self.value(v, props[k]) if k in props else v for k, v in args.items()}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _from_string(text: str, kinds: set[str]) -> Any:
    """The one non-string reading of ``text`` that ``kinds`` allows, else ``text`` unchanged."""
    stripped = text.strip()
    readings: list[Any] = []
    if len(stripped) > _MAX_NUMBER and not stripped.startswith(("[", "{")):
        return text  # no scalar reading of a value this long (int() refuses >4300 digits)
    if "integer" in kinds and _INTEGER.fullmatch(stripped):
        readings.append(int(stripped))
    elif "number" in kinds and _NUMBER.fullmatch(stripped):
        number = float(stripped)
        readings.append(int(stripped) if _INTEGER.fullmatch(stripped) else number)
    if "boolean" in kinds and (stripped in _TRUE or stripped in _FALSE):
        readings.append(stripped in _TRUE)
    if "null" in kinds and stripped in _NULL:
        readings.append(None)
    if ("array" in kinds and stripped.startswith("[")) or (
        "object" in kinds and stripped.startswith("{")
    ):
        try:
            decoded = loads_lenient(stripped)
        except JsonRepairError:
            decoded = None
        if (isinstance(decoded, list) and "array" in kinds) or (
            isinstance(decoded, dict) and "object" in kinds
        ):
            readings.append(decoded)
    return readings[0] if len(readings) == 1 else text


def coerce_args(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with string values converted to the type the schema gives them, where unambiguous.

    ``"4"`` becomes ``4`` for an integer parameter, ``"true"`` becomes ``True`` for a boolean,
    ``'["a", "b"]'`` becomes a list for an array, recursively through nested objects and arrays.
    Parameters that accept strings, unknown parameters and values with no single reading are
    returned untouched, so validation can report them. The input dict is not modified.
    """
    schema = schema_of(spec)
    as_written = _strings_kept(spec, schema)
    if all(type(v) is str and k in as_written for k, v in args.items()):
        return dict(args)  # every value is a string where strings are allowed: nothing to do
    return _Coercer(schema).mapping(args, schema)


_KEPT: OrderedDict[int, tuple[ToolSpec, frozenset[str]]] = OrderedDict()


def _strings_kept(spec: ToolSpec, schema: Mapping[str, Any]) -> frozenset[str]:
    """Top-level parameters whose string values coercion leaves alone (cached per spec)."""
    hit = _KEPT.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    coercer = _Coercer(schema)
    props = schema.get("properties")
    kept = frozenset(
        name
        for name, sub in (props.items() if isinstance(props, Mapping) else ())
        if (kinds := coercer.types(coercer.resolve(sub))) is None or "string" in kinds
    )
    _KEPT[id(spec)] = (spec, kept)
    if len(_KEPT) > _SCHEMA_CACHE_SIZE:
        _KEPT.popitem(last=False)
    return kept
