"""The JSON-schema knowledge every layer shares: local ``$ref`` resolution, example values, and
the keys a model writes a tool call under.

Tool schemas reach forge_rt from pydantic (``$defs`` plus ``$ref``) and from hand-written dicts,
and several parts read them: argument validation, constrained decoding, rescue coercion, the
corrections shown to the model, the simulated backend. They must agree on what a ``$ref`` means
and on what a call looks like, so that knowledge lives here once.

A ``$ref`` is followed only within its own document: ``#`` or a JSON pointer such as
``#/$defs/Address`` (``~1`` and ``~0`` escape ``/`` and ``~``). Anything else -- a URL, a ref that
points at nothing, a ref reached again while it is being expanded -- raises
:class:`SchemaRefError` (:class:`RecursiveRefError` for the last); callers translate it into
their own error with the context they have (the tool's name, where in the schema).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = [
    "ARGUMENT_KEYS",
    "NAME_KEYS",
    "RecursiveRefError",
    "RefExpansion",
    "SchemaRefError",
    "deref",
    "example_arguments",
    "example_value",
    "resolve_ref",
]

# The keys a model writes a tool's name under, most common first (the first present wins):
# ``name`` (OpenAI, Hermes, Qwen), ``tool`` (ReAct-style agents' ``{"tool": ..., "tool_input":
# ...}``), ``tool_name``, and ``function`` (Llama and XML-ish ``<call function="...">``).
NAME_KEYS: tuple[str, ...] = ("name", "tool", "tool_name", "function")

# The keys a model writes a call's arguments under, most common first (the first present wins):
# ``arguments`` (OpenAI, Hermes), ``args``, ``parameters`` (Llama 3.x JSON calls), ``params``,
# ``input`` (Anthropic ``tool_use``) and ``tool_input`` (ReAct-style agents).
ARGUMENT_KEYS: tuple[str, ...] = (
    "arguments",
    "args",
    "parameters",
    "params",
    "input",
    "tool_input",
)


class SchemaRefError(ValueError):
    """A ``$ref`` that cannot be followed; ``ref`` is the reference as written."""

    def __init__(self, ref: str, message: str) -> None:
        super().__init__(message)
        self.ref = ref


class RecursiveRefError(SchemaRefError):
    """A ``$ref`` met again while it is being expanded: the schema contains itself."""


# --- resolution --------------------------------------------------------------------------------


def resolve_ref(root: Mapping[str, Any], ref: str) -> Any:
    """The schema ``ref`` points at inside ``root``: ``#`` is ``root`` itself, ``#/a/b`` a pointer.

    Raises :class:`SchemaRefError` for a ref that is not local (only refs into this document can
    be followed: there is nothing to fetch others from) or that points at no schema.
    """
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise SchemaRefError(
            ref,
            f"$ref {ref!r} is not local: only refs into the same schema ('#/$defs/Name') are "
            "followed; move the definition into the schema's $defs",
        )
    node: Any = root
    walked = "#"
    for token in ref[2:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaRefError(ref, f"$ref {ref!r} points at nothing: {walked} has no {key!r}")
        walked += f"/{token}"
    if not isinstance(node, Mapping | bool):
        raise SchemaRefError(
            ref, f"$ref {ref!r} points at a {type(node).__name__}, not at a schema"
        )
    return node


def _follow(schema: Any, root: Mapping[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """``schema`` with its ``$ref`` chain followed, and the refs of that chain in order."""
    chain: list[str] = []
    while isinstance(schema, Mapping) and "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str):
            raise SchemaRefError(repr(ref), f"$ref must be a string, got {ref!r}")
        if ref in chain:
            raise _recursion(chain, ref)
        chain.append(ref)
        target = resolve_ref(root, ref)
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        # Keywords beside a $ref (pydantic puts a field's default and description there) apply
        # as well as the target's; they describe this use of the definition, so they win.
        schema = {**target, **siblings} if siblings and isinstance(target, Mapping) else target
    return schema, tuple(chain)


def _recursion(refs: list[str], ref: str) -> RecursiveRefError:
    """The error for ``ref`` met again while ``refs``, which hold it, are being followed."""
    path = " -> ".join([*refs[refs.index(ref) :], ref])
    return RecursiveRefError(ref, f"recursive $ref {ref!r} ({path})")


def deref(schema: Any, root: Mapping[str, Any]) -> Any:
    """``schema`` itself, or what its ``$ref`` (chain) points at, with sibling keywords kept.

    Only the top of ``schema`` is resolved; refs nested in its properties are left for the walk
    that reaches them. Raises :class:`SchemaRefError`, or :class:`RecursiveRefError` for a
    chain of refs that comes back to itself.
    """
    return _follow(schema, root)[0]


class RefExpansion:
    """The refs a recursive walk over one schema is inside of, so a self-containing schema is
    refused instead of being walked forever (or overflowing the stack)."""

    __slots__ = ("_active", "root")

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self._active: list[str] = []

    @contextmanager
    def expand(self, schema: Any) -> Iterator[Any]:
        """:func:`deref` of ``schema``; inside the block its refs count as being expanded.

        Raises :class:`RecursiveRefError` when one of them already is (a definition that
        contains itself), :class:`SchemaRefError` when one cannot be resolved.
        """
        target, chain = _follow(schema, self.root)
        for ref in chain:
            if ref in self._active:
                raise _recursion(self._active, ref)
        self._active.extend(chain)
        try:
            yield target
        finally:
            del self._active[len(self._active) - len(chain) :]


# --- example values ----------------------------------------------------------------------------


class _Examples:
    """Builds one example value, expanding refs against one root."""

    __slots__ = ("_fit_lengths", "_refs", "_strings")

    def __init__(
        self, root: Mapping[str, Any], strings: Callable[[str], str], *, fit_lengths: bool
    ) -> None:
        self._refs = RefExpansion(root)
        self._strings = strings
        self._fit_lengths = fit_lengths

    def value(self, schema: Any, name: str) -> Any:
        with self._refs.expand(schema) as resolved:
            return self._resolved(resolved, name)

    def _resolved(self, schema: Any, name: str) -> Any:
        if schema is True:
            schema = {}  # anything goes: the simplest value will do
        elif not isinstance(schema, Mapping):
            raise ValueError(f"no value fits the schema of {name!r}: {schema!r}")
        if "const" in schema:
            return schema["const"]
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return examples[0]
        for key in ("example", "default"):
            if key in schema:
                return schema[key]
        if schema.get("enum"):
            return schema["enum"][0]
        for key in ("anyOf", "oneOf", "allOf"):
            options = schema.get(key)
            if options:
                # A value is more telling than null; allOf is approximated by its first part.
                real = [o for o in options if not self._is_null(o)]
                return self.value((real or options)[0], name)
        kind = schema.get("type", "object" if "properties" in schema else "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            props: Mapping[str, Any] = schema.get("properties", {})
            required = set(schema.get("required", props))
            return {k: self.value(v, k) for k, v in props.items() if k in required}
        if kind == "array":
            count = max(1, int(schema.get("minItems", 1)))
            if "maxItems" in schema:
                count = min(count, int(schema["maxItems"]))
            return [self.value(schema.get("items", {}), name) for _ in range(count)]
        if kind in ("integer", "number"):
            return _number(schema, integer=kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        text = self._strings(name)
        if not self._fit_lengths:
            return text
        text = text.ljust(int(schema.get("minLength", 0)), "x")
        return text[: int(schema["maxLength"])] if "maxLength" in schema else text

    def _is_null(self, schema: Any) -> bool:
        resolved = deref(schema, self._refs.root)
        return isinstance(resolved, Mapping) and resolved.get("type") == "null"


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    """The lowest value the lower bound allows (1 without one), brought under any upper bound.

    Exclusive bounds are stepped inside by 1; an integer is rounded towards the inside.
    """
    value = schema["minimum"] if "minimum" in schema else schema.get("exclusiveMinimum", 0) + 1
    if integer:
        value = math.ceil(value)
    for key, step in (("maximum", 0), ("exclusiveMaximum", 1)):
        if key in schema and value > schema[key] - step:
            value = math.floor(schema[key] - step) if integer else schema[key] - step
    return int(value) if integer else float(value)


def example_value(
    schema: Any,
    root: Mapping[str, Any],
    *,
    name: str,
    strings: Callable[[str], str],
    fit_lengths: bool,
) -> Any:
    """A concrete value that fits ``schema`` (refs resolved against ``root``), the same each time.

    In order: ``const``; the first of ``examples``; ``example``; ``default``; the first ``enum``
    value; the first non-null option of ``anyOf``/``oneOf``/``allOf``; else one value of the
    (first non-null) type. Objects hold their required properties (all of them when the schema
    lists none), arrays ``minItems`` items (at least one, at most ``maxItems``), numbers 1 moved
    inside their bounds, booleans ``true``. A string is ``strings(name)``, ``name`` being the
    property it is the value of; with ``fit_lengths`` it is padded with ``x`` to ``minLength``
    and cut to ``maxLength``. Without, a placeholder such as ``<city>`` stays recognisable (the
    validator rejects one copied verbatim), at the price of an example that may be too short or
    too long. ``pattern``, ``format``, ``multipleOf`` and ``uniqueItems`` are not honoured.

    Raises :class:`RecursiveRefError` for a schema that requires itself (no finite value fits)
    and :class:`SchemaRefError` for a ref that cannot be resolved.
    """
    return _Examples(root, strings, fit_lengths=fit_lengths).value(schema, name)


def example_arguments(
    parameters: Mapping[str, Any], *, strings: Callable[[str], str], fit_lengths: bool
) -> dict[str, Any]:
    """The :func:`example_value` of a tool's parameter schema (its own root): an argument object.

    Raises ``ValueError`` when the schema's example is not an object (a parameter schema that
    declares, say, a string ``default``), since no call can carry it.
    """
    value = example_value(
        parameters, parameters, name="arguments", strings=strings, fit_lengths=fit_lengths
    )
    if not isinstance(value, dict):
        raise ValueError(
            f"the example of a parameter schema must be an object of arguments, got {value!r}; "
            "check the schema's top-level examples/default/const"
        )
    return value
