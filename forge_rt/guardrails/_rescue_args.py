"""Arguments as the model wrote them, turned into what the tool's schema says they are.

XML dialects deliver every value as a string and small models quote numbers, so ``"4"`` for an
integer parameter is common. :func:`coerce_args` converts only where the schema leaves exactly one
reading; anything ambiguous is left as written so validation can report it to the model. When a
call is rejected anyway, :func:`repair_args` builds the call as it should have been from the
model's own arguments, for the correction to show.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec

from forge_rt.core import ToolArgumentError, ToolSpec
from forge_rt.core._jsonschema import deref
from forge_rt.guardrails._json_repair import JsonRepairError, loads_lenient

__all__ = [
    "SCHEMA_KEYWORDS",
    "ArgRepair",
    "coerce_args",
    "fold",
    "repair_args",
    "schema_of",
    "top_field",
    "valid_with",
]

_MAX_NUMBER = 400
_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_NULL = frozenset({"null", "None", "NULL"})

# Schemas cached per spec object (held strongly, so an id is not reused): rescue runs per reply.
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
    if len(stripped) > _MAX_NUMBER and not stripped.startswith(("[", "{")):
        return text  # no scalar reading of a value this long (int() refuses >4300 digits)
    readings = [
        *_number_readings(stripped, kinds),
        *_keyword_readings(stripped, kinds),
        *_container_readings(stripped, kinds),
    ]
    return readings[0] if len(readings) == 1 else text


def _number_readings(stripped: str, kinds: set[str]) -> list[Any]:
    """``stripped`` as the integer or number ``kinds`` allows (none or one reading); a whole
    number stays an ``int`` even where only "number" is allowed (``"4"`` is not ``4.0``)."""
    if "integer" in kinds and _INTEGER.fullmatch(stripped):
        return [int(stripped)]
    if "number" in kinds and _NUMBER.fullmatch(stripped):
        number = float(stripped)
        return [int(stripped) if _INTEGER.fullmatch(stripped) else number]
    return []


def _keyword_readings(stripped: str, kinds: set[str]) -> list[Any]:
    """``stripped`` as a boolean or null keyword (``"true"``, ``"None"``) that ``kinds``
    allows, in the spellings JSON and Python use."""
    readings: list[Any] = []
    if "boolean" in kinds and (stripped in _TRUE or stripped in _FALSE):
        readings.append(stripped in _TRUE)
    if "null" in kinds and stripped in _NULL:
        readings.append(None)
    return readings


def _container_readings(stripped: str, kinds: set[str]) -> list[Any]:
    """``stripped`` as a JSON-encoded array or object that ``kinds`` allows, read as near-JSON
    (single quotes, ``True``, trailing commas pass): validation still checks what comes out."""
    if not (
        ("array" in kinds and stripped.startswith("["))
        or ("object" in kinds and stripped.startswith("{"))
    ):
        return []
    try:
        decoded = loads_lenient(stripped)
    except JsonRepairError:
        return []
    if (isinstance(decoded, list) and "array" in kinds) or (
        isinstance(decoded, dict) and "object" in kinds
    ):
        return [decoded]
    return []


def coerce_args(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with string values converted to the type the schema gives them, where unambiguous.

    ``"4"`` becomes ``4`` for an integer parameter, ``'["a", "b"]'`` a list for an array,
    recursively. Parameters that accept strings, unknown parameters and values with no single
    reading are returned untouched, so validation can report them. ``args`` is not modified.
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


# --- repairs shown in corrections ---------------------------------------------------------------


class ArgRepair(msgspec.Struct, frozen=True, kw_only=True):
    """A rejected call's arguments as they should have been, built from the model's own.

    ``args`` keeps every valid value, with wrong ones corrected where the model's value says
    what it meant (``"Q3"`` for an integer quarter is 3, ``"celcius"`` is ``"celsius"``, a
    misnamed argument is renamed); ``corrected`` names the fields changed. ``missing`` names the
    fields no rule could fill: left out of ``args`` (never a placeholder), to be described to
    the model. With ``missing`` empty, ``args`` passes the schema. ``renamed`` maps a field
    filled from an unknown argument to the name the model sent it under.
    """

    args: dict[str, Any]
    corrected: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    renamed: dict[str, str] = msgspec.field(default_factory=dict)  # field -> name the model used


def repair_args(
    spec: ToolSpec,
    args: Mapping[str, Any],
    *,
    unusable: Iterable[str] = (),
    unknown: Mapping[str, Any] | None = None,
) -> ArgRepair:
    """The closest valid arguments to ``args`` (unknown names already taken out); ``unusable``
    names top-level fields whose value is no value at all (a placeholder, an echo); ``unknown``
    holds the arguments the schema does not have, which may be a required field misnamed."""
    schema = schema_of(spec)
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = [r for r in schema.get("required", []) if r in props]
    bad = set(unusable)
    repair = _Repair(
        spec,
        schema,
        candidate={k: v for k, v in args.items() if k not in bad},
        missing=[k for k in args if k in bad],
    )
    renamed = _renames(required, repair.candidate, unknown or {})
    for field, name in renamed.items():
        repair.candidate[field] = (unknown or {})[name]
        repair.corrected.append(field)
    repair.run()
    candidate = repair.candidate
    return ArgRepair(
        args=candidate,
        corrected=tuple(f for f in repair.corrected if f in candidate),
        missing=tuple(repair.missing),
        renamed={f: n for f, n in renamed.items() if f in candidate},
    )


class _Repair:
    """One :func:`repair_args` under way: the arguments so far, and the fields corrected or
    found missing (each listed once, in the order first met)."""

    __slots__ = ("candidate", "coercer", "corrected", "missing", "props", "spec")

    def __init__(
        self,
        spec: ToolSpec,
        schema: Mapping[str, Any],
        *,
        candidate: dict[str, Any],
        missing: list[str],
    ) -> None:
        self.spec = spec
        self.props: Mapping[str, Any] = schema.get("properties") or {}
        self.coercer = _Coercer(schema)
        self.candidate = candidate
        self.corrected: list[str] = []
        self.missing = missing

    def run(self) -> None:
        """Settle the fields the schema rejects, round by round, until it rejects none: a fix
        can uncover another error, so validation runs again after each round, at most one
        round per property and one more."""
        for _ in range(len(self.props) + 1):
            wrong = _wrong_fields(self.spec, self.candidate)
            if not wrong:
                break
            for field in wrong:
                self.settle(field)

    def settle(self, field: str) -> None:
        """Correct one rejected field: drop it if the schema forbids it, fix its value where
        a correction passes, and otherwise leave it out and record it as missing."""
        candidate = self.candidate
        if field not in self.props and field in candidate:
            del candidate[field]  # a key the schema forbids (a model with extra="forbid")
            return
        if field not in candidate:
            self.note_missing(field)
            return
        fixed = _fix(self.spec, candidate, field, self.props.get(field, {}), self.coercer)
        if fixed is _NOTHING:
            del candidate[field]
            self.note_missing(field)
        else:
            candidate[field] = fixed
            if field not in self.corrected:
                self.corrected.append(field)

    def note_missing(self, field: str) -> None:
        """Record ``field`` as one no rule could fill (once)."""
        if field not in self.missing:
            self.missing.append(field)


_NOTHING: Any = object()


def fold(name: str) -> str:
    """``name`` with case, spaces, underscores and marks left out: what two spellings of one
    name or value share (``Inner Basin``, ``inner-basin`` and ``inner_basin`` fold alike)."""
    return re.sub(r"[\W_]+", "", name.lower())


def _renames(
    required: list[str], candidate: Mapping[str, Any], unknown: Mapping[str, Any]
) -> dict[str, str]:
    """Missing required fields the model sent under another name: field -> the name it used.
    A name matches when it folds alike, is a close spelling, or one contains the other
    (``medication`` / ``medication_name``); when exactly one field is missing and exactly one
    argument is unknown, that argument is it."""
    absent = [r for r in required if r not in candidate]
    free = [name for name in unknown if name not in SCHEMA_KEYWORDS]
    found: dict[str, str] = {}
    for field in absent:
        match = next((name for name in free if _same_name(name, field)), None)
        if match is None:
            close = difflib.get_close_matches(field, free, n=1, cutoff=0.75)
            match = close[0] if close else None
        if match is not None:
            found[field] = match
            free.remove(match)
    rest = [r for r in absent if r not in found]
    if len(rest) == 1 and len(free) == 1:
        found[rest[0]] = free[0]
    return found


# Keys of a JSON schema a model pastes in as arguments: never a misnamed argument.
SCHEMA_KEYWORDS = frozenset(
    {
        "$defs",
        "$schema",
        "additionalProperties",
        "definitions",
        "properties",
        "required",
        "title",
        "type",
    }
)


def _same_name(name: str, field: str) -> bool:
    a, b = fold(name), fold(field)
    return a == b or (min(len(a), len(b)) >= 4 and (a in b or b in a))


def top_field(path: str) -> str:
    """``year`` of ``$.year``, ``items`` of ``$.items[0].x``; ``""`` for the object itself."""
    rest = path[2:] if path.startswith("$.") else ""
    return re.split(r"[.\[]", rest, maxsplit=1)[0]


def _wrong_fields(spec: ToolSpec, args: dict[str, Any]) -> list[str]:
    """The top-level fields the schema rejects in ``args``, in error order."""
    try:
        spec.validate_args(args)
    except ToolArgumentError as exc:
        return list(dict.fromkeys(f for e in exc.errors if (f := top_field(e.path))))
    return []


def _fix(spec: ToolSpec, args: dict[str, Any], field: str, schema: Any, coercer: _Coercer) -> Any:
    """The first correction of ``args[field]`` the schema accepts, else ``_NOTHING``."""
    for candidate in _corrections(args[field], coercer.resolve(schema), coercer):
        if field not in _wrong_fields(spec, {**args, field: candidate}):
            return candidate
    return _NOTHING


_ANY_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")
_YES = frozenset({"yes", "y", "on", "1"})
_NO = frozenset({"no", "n", "off", "0"})


def _corrections(value: Any, schema: Mapping[str, Any], coercer: _Coercer) -> Iterator[Any]:
    """Values the model may have meant by ``value``, most literal first."""
    yield coercer.value(value, schema)
    yield from _option_matches(value, schema)
    kinds = coercer.types(schema) or set()
    if isinstance(value, str):
        yield from _string_meanings(value.strip(), kinds)
    elif isinstance(value, bool | int | float) and "string" in kinds:
        yield from _scalar_as_string(value)
    if "array" in kinds and not isinstance(value, list):
        yield [value]


def _option_matches(value: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    """The ``enum`` or ``const`` option ``value`` names: the same in another case, then the
    closest spelling (``"celcius"`` for ``"celsius"``)."""
    options = schema.get("enum") or ([schema["const"]] if "const" in schema else [])
    if not options or not isinstance(value, str | int | float):
        return
    text = str(value).strip().lower()
    labels = {str(o).lower(): o for o in options}
    if text in labels:
        yield labels[text]
    close = difflib.get_close_matches(text, list(labels), n=1, cutoff=0.75)
    if close:
        yield labels[close[0]]


def _string_meanings(text: str, kinds: set[str]) -> Iterator[Any]:
    """What a string (already stripped) may have meant: the one number in it (``"Q3"`` is 3),
    a yes or no, or the string respelled for a pattern or enum."""
    numbers = _ANY_NUMBER.findall(text)
    if kinds & {"integer", "number"} and len(numbers) == 1:
        number = float(numbers[0])
        yield int(number) if number.is_integer() else number
    if "boolean" in kinds and text.lower() in _YES | _NO:
        yield text.lower() in _YES
    if "string" in kinds:
        yield text
        yield text.upper()
        yield text.lower()
        yield re.sub(r"[\s\-]+", "", text)
        if text.isdigit():
            yield from _zero_padded(text)


def _scalar_as_string(value: bool | int | float) -> Iterator[str]:
    """A boolean or number written where a string is expected: as JSON writes it, and a
    non-negative integer also zero-padded (``7`` for an id like ``"007"``)."""
    text = json.dumps(value) if isinstance(value, bool) else str(value)
    yield text
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        yield from _zero_padded(text)


def _zero_padded(digits: str) -> Iterator[str]:
    """``digits`` padded with leading zeros, one more each time, up to ten characters."""
    return (digits.zfill(width) for width in range(len(digits) + 1, 11))


def valid_with(
    spec: ToolSpec, args: Mapping[str, Any], field: str, value: Any
) -> dict[str, Any] | None:
    """``args`` with ``value`` in ``field``, validated (coerced) by ``spec``, or ``None`` where
    the schema refuses them: what every correction that puts one value in a call checks."""
    try:
        return spec.validate_args({**args, field: value})
    except ToolArgumentError:
        return None
