"""Turn a tool's JSON schema into a pydantic model, so every tool validates its arguments the same way.

Tools arrive either as pydantic models (runtime users) or as JSON schemas (proxy clients, users who
prefer dicts). Arguments are always validated by pydantic; this module builds the model for the
second case.

What a schema says is enforced where forge_rt can turn it into a check; everything else is
*ignored for validation*, never refused: a keyword forge_rt does not know (``optional``, ``not``,
``patternProperties``, ...), one it does not enforce (``uniqueItems``, an ``allOf`` of several
parts), and a known keyword whose value cannot be a check (a ``pattern`` that is no regex, a
``minLength`` that is no count, an ``enum`` that is no list). The backend still gets the schema as
written -- only the validator is less strict than the schema -- and :func:`ignored_keywords`
names what was ignored, so the proxy can tell its client and the runtime logs it once per tool.
Annotation keywords (``title``, ``description``, ``format``, ...) describe but do not constrain
and are not reported.

Only a schema nothing can be built from is an error (:class:`~forge_rt.errors.ToolSchemaError`):
parameters that are not an object schema, sub-schemas nested past a depth limit (see
``core/_schema_shape.py``, which also drops the structural keywords whose values break JSON
Schema's structure from the schema forge_rt uses and sends on), and a ``$ref`` that cannot be
followed (not local, pointing at nothing, or containing itself).
"""

from __future__ import annotations

import functools
import math
import re
from typing import Annotated, Any, Literal, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from actors import quiet_logger
from forge_rt.core._jsonschema import RecursiveRefError, RefExpansion, SchemaRefError
from forge_rt.core._schema_shape import check_schema_depth
from forge_rt.errors import ToolSchemaError

__all__ = ["ignored_keywords", "model_from_json_schema"]

log = quiet_logger(__name__)

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
# Keywords the builder reads (each is checked before use; an unusable value is ignored).
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
    }
)

_PRIMITIVES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
}
_TYPES = frozenset({*_PRIMITIVES, "object", "array"})
_BOUNDS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
}
_STRING_LENGTHS = {"minLength": "min_length", "maxLength": "max_length"}
_ITEM_COUNTS = {"minItems": "min_length", "maxItems": "max_length"}
# An integer's bound that is not a whole number becomes the nearest whole one on the right side
# (x >= 1.5 is x >= 2 for an integer); pydantic accepts only whole bounds for integers.
_WHOLE = {"ge": math.ceil, "le": math.floor, "gt": math.floor, "lt": math.ceil}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_regex(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        re.compile(value)
    except re.error:
        return False
    return True


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


class _Builder:
    """Walks one schema, building its validator (``models=False``: only what is ignored)."""

    def __init__(self, root: dict[str, Any], name: str, *, models: bool) -> None:
        self._name = name
        self._counter = 0
        self._refs = RefExpansion(root)
        self._models = models
        self.ignored: set[str] = set()

    def _model_name(self, hint: str) -> str:
        self._counter += 1
        safe = re.sub(r"\W", "_", hint) or "Model"
        return f"{safe}_{self._counter}" if self._counter > 1 else safe

    def _ignore(self, keyword: str) -> None:
        self.ignored.add(keyword)

    def _note_unknown(self, schema: dict[str, Any]) -> None:
        self.ignored.update(k for k in schema if k not in _ANNOTATIONS and k not in _HANDLED)

    def root(self, schema: dict[str, Any]) -> Any:
        """The validator of the whole (object) schema."""
        self._note_unknown(schema)
        return self.object_model(schema, "$", self._name)

    def annotation(self, schema: Any, where: str, hint: str, via: str) -> Any:
        """The Python type (with constraints) that validates ``schema``; ``via`` is the keyword
        that holds it (reported when ``schema`` is not a schema at all)."""
        if schema is True or schema == {}:
            return Any
        if not isinstance(schema, dict):
            self._ignore(via)  # `false`, or a value that is no schema: nothing to check
            return Any
        self._note_unknown(schema)
        if "$ref" in schema:
            try:
                with self._refs.expand(schema) as target:
                    return self.annotation(target, where, hint, via)
            except RecursiveRefError as exc:
                raise ToolSchemaError(
                    f"{self._name}: {exc} - at `{where}`; a JSON schema that contains itself has "
                    "no validator here: give the tool a pydantic model instead"
                ) from exc
            except SchemaRefError as exc:
                raise ToolSchemaError(f"{self._name}: {exc} - at `{where}`") from exc
        if "const" in schema:
            if _hashable(schema["const"]):
                return Literal[schema["const"]]
            self._ignore("const")
        if "enum" in schema:
            values = schema["enum"]
            if isinstance(values, list) and values and all(map(_hashable, values)):
                return Literal[tuple(values)]
            self._ignore("enum")
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if isinstance(options, list) and options:
                    return Union[  # noqa: UP007 -- built at run time from a list
                        tuple(
                            self.annotation(sub, f"{where}.{key}[{i}]", hint, key)
                            for i, sub in enumerate(options)
                        )
                    ]
                self._ignore(key)
        if "allOf" in schema:
            parts = schema["allOf"]
            if isinstance(parts, list) and len(parts) == 1:
                return self.annotation(parts[0], where, hint, "allOf")
            # Several parts would need their intersection; the siblings still apply.
            self._ignore("allOf")
        kind = schema.get("type")
        if kind is None:
            kind = "object" if "properties" in schema else None
        if kind is None:
            return Any
        if isinstance(kind, list):
            if kind and all(isinstance(k, str) and k in _TYPES for k in kind):
                return Union[  # noqa: UP007 -- built at run time from a list
                    tuple(self.annotation({**schema, "type": k}, where, hint, via) for k in kind)
                ]
            self._ignore("type")
            return Any
        if kind == "object":
            return self.object_model(schema, where, hint)
        if kind == "array":
            item = self.annotation(schema.get("items", {}), f"{where}[]", hint, "items")
            counts = self._checked(schema, _ITEM_COUNTS, _is_count)
            return Annotated[list[item], Field(**counts)]  # type: ignore[valid-type]
        if not isinstance(kind, str) or kind not in _PRIMITIVES:
            self._ignore("type")  # a type JSON schema does not define: nothing to check it by
            return Any
        base = _PRIMITIVES[kind]
        # Each keyword applies to instances of its own type only (minLength says nothing
        # about a number), so a string's keywords beside "type": "integer" check nothing.
        constraints: dict[str, Any] = {}
        if kind in ("integer", "number"):
            constraints = self._bounds(schema, whole=kind == "integer")
        elif kind == "string":
            constraints = self._checked(schema, _STRING_LENGTHS, _is_count)
            if "pattern" in schema:
                if _is_regex(schema["pattern"]):
                    constraints["pattern"] = schema["pattern"]
                else:
                    self._ignore("pattern")
        return Annotated[base, Field(**constraints)] if constraints else base

    def _checked(
        self, schema: dict[str, Any], names: dict[str, str], usable: Any
    ) -> dict[str, Any]:
        """The pydantic constraints for the keywords ``names`` whose value is ``usable``."""
        out: dict[str, Any] = {}
        for keyword, field in names.items():
            if keyword not in schema:
                continue
            if usable(schema[keyword]):
                out[field] = schema[keyword]
            else:
                self._ignore(keyword)
        return out

    def _bounds(self, schema: dict[str, Any], *, whole: bool) -> dict[str, Any]:
        out = self._checked(schema, _BOUNDS, _is_number)
        if out.get("multiple_of") is not None and (
            out["multiple_of"] <= 0 or (whole and out["multiple_of"] != int(out["multiple_of"]))
        ):
            del out["multiple_of"]
            self._ignore("multipleOf")
        if whole:
            out = {k: int(_WHOLE[k](v)) if k in _WHOLE else int(v) for k, v in out.items()}
        return out

    def object_model(self, schema: dict[str, Any], where: str, hint: str) -> Any:
        properties = schema.get("properties", {})
        if not isinstance(properties, dict):
            self._ignore("properties")
            properties = {}
        extra = schema.get("additionalProperties", not properties)
        if not isinstance(extra, bool | dict):
            self._ignore("additionalProperties")
            extra = True
        required = schema.get("required", [])
        if not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
            self._ignore("required")  # draft 3's `"required": true` on a property, say
            required = []
        if not set(required) <= set(properties):
            # A required name with no property schema: the validator has no field to require.
            self._ignore("required")
        if not properties and extra is not False:
            value = self.annotation(
                extra if isinstance(extra, dict) else {}, f"{where}.*", hint, "additionalProperties"
            )
            return dict[str, value]  # type: ignore[valid-type]
        fields: dict[str, Any] = {}
        for index, (prop, sub) in enumerate(properties.items()):
            annotation = self.annotation(sub, f"{where}.{prop}", prop, "properties")
            # Missing optional arguments stay missing (exclude_unset) instead of becoming None;
            # an explicit null is still validated against the declared type.
            field = Field(alias=prop) if prop in required else Field(default=None, alias=prop)
            fields[f"f{index}"] = (annotation, field)
        if not self._models:
            return Any
        config = ConfigDict(
            extra="allow" if extra is not False else "forbid",
            populate_by_name=False,
            # JSON-schema patterns are ECMA-262 regexes; Python's engine takes their lookarounds
            # and backreferences, which pydantic's default (Rust) engine refuses.
            regex_engine="python-re",
        )
        return pydantic.create_model(self._model_name(hint), __config__=config, **fields)


def _object_schema(name: str, schema: Any) -> dict[str, Any]:
    """``schema`` as the object schema tool parameters must be, else :class:`ToolSchemaError`."""
    if not isinstance(schema, dict):
        raise ToolSchemaError(f"{name}: parameters must be a JSON-schema object, got {schema!r}")
    kind = schema.get("type", "object")
    if kind != "object":
        raise ToolSchemaError(
            f"{name}: tool parameters must be a JSON schema of type 'object', got {kind!r}"
        )
    return {**schema, "type": "object"}


def ignored_keywords(schema: dict[str, Any]) -> tuple[str, ...]:
    """The keywords of ``schema`` that validation ignores, sorted (see the module docstring).

    The same walk as :func:`model_from_json_schema`, without building the models: cheap enough
    for a server to report them on every request. Raises :class:`ToolSchemaError` for the
    schemas :func:`model_from_json_schema` refuses.
    """
    builder = _Builder(schema, "schema", models=False)
    builder.root(_object_schema("schema", schema))
    return tuple(sorted(builder.ignored))


@functools.cache
def _log_ignored(name: str, keywords: tuple[str, ...]) -> None:
    """Log once per tool name and keyword set, however often the same tool is built."""
    log.warning(
        "schema.keywords_ignored",
        tool=name,
        keywords=list(keywords),
        reason="forge_rt does not enforce them: arguments are validated without them, and the "
        "backend still gets the schema as written",
    )


def model_from_json_schema(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """Build a pydantic model that validates what ``schema`` (an object schema) allows.

    Keywords forge_rt cannot enforce are ignored and logged once (``schema.keywords_ignored``).
    """
    check_schema_depth(name, schema)
    builder = _Builder(schema, name, models=True)
    model = builder.root(_object_schema(name, schema))
    if builder.ignored:
        _log_ignored(name, tuple(sorted(builder.ignored)))
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        # An object schema without properties validates as a free-form mapping.
        return pydantic.create_model(f"{name}_args", __config__=ConfigDict(extra="allow"))
    return model
