"""Tool specifications and definitions, and the validation of a call's arguments.

A :class:`ToolSpec` is what the model sees (name, description, parameter schema); a
:class:`ToolDef` adds what the runtime needs to execute it (the callable, prerequisites, a
timeout). Parameters may be a pydantic model or a JSON schema; both render to the same JSON
schema and both validate arguments through pydantic.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

import msgspec
import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from forge_rt.core._capabilities import ALL_CAPABILITIES, Capability, parse_capabilities
from forge_rt.core._jsonschema import example_arguments
from forge_rt.core._schema import ignored_keywords, model_from_json_schema
from forge_rt.core._schema_shape import sound_schema
from forge_rt.errors import ForgeError, WorkflowDefinitionError

__all__ = [
    "ArgumentError",
    "Prerequisite",
    "ToolArgumentError",
    "ToolDef",
    "ToolSpec",
]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class ArgumentError(msgspec.Struct, frozen=True):
    """One reason a call's arguments were rejected, located by a JSON path like ``$.year``."""

    path: str
    message: str

    def render(self) -> str:
        return f"{self.message} - at `{self.path}`"


class ToolArgumentError(ForgeError):
    """Arguments failed the tool's schema; ``errors`` says what and where, field by field."""

    def __init__(self, tool: str, errors: list[ArgumentError]) -> None:
        self.tool = tool
        self.errors = tuple(errors)
        lines = "; ".join(e.render() for e in errors)
        super().__init__(f"invalid arguments for {tool}: {lines}")


def _path(loc: tuple[int | str, ...]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _describe(error: Any) -> str:
    kind = error["type"]
    value = error.get("input")
    got = type(value).__name__ if value is not None else "null"
    if kind == "missing":
        return "Missing required argument"
    if kind == "extra_forbidden":
        return "Unexpected argument (not in the schema)"
    if kind == "literal_error":
        return f"{error['msg']}, got {value!r}"
    return f"{error['msg']} (got {got} {value!r})" if kind.endswith("_type") else error["msg"]


class ToolSpec(BaseModel):
    """What the model is told about a tool.

    ``parameters`` is a pydantic model class or an object JSON schema. A top-level argument the
    schema does not name is dropped, not refused: small models add a guessed argument
    (``patient_id``) or paste schema keys (``"title"``, ``"type"``) beside the right ones, and
    refusing the whole call for it threw good calls away. :meth:`unknown_args` names what is
    dropped, so the caller can tell the model. A schema or model that allows extra keys keeps
    them; a pydantic model with ``extra="forbid"`` keeps refusing them (its author forbade them).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str = ""
    parameters: type[BaseModel] | dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> ToolSpec:
        if not _NAME.match(self.name):
            raise WorkflowDefinitionError(
                f"tool name {self.name!r} is not valid: use letters, digits, _ . - "
                "(start with a letter or _), at most 64 characters"
            )
        self._validator  # noqa: B018 -- build the validator now so a bad schema fails here
        return self

    @functools.cached_property
    def _validator(self) -> type[BaseModel]:
        if isinstance(self.parameters, dict):
            return model_from_json_schema(self.name, self.parameters or {"type": "object"})
        return self.parameters

    @functools.cached_property
    def _known_args(self) -> frozenset[str] | None:
        """The top-level argument names, or ``None`` when unknown ones are not dropped: the
        schema allows extra keys, or a user's model forbids them itself."""
        model = self._validator
        extra = model.model_config.get("extra")
        if extra == "allow" or (extra == "forbid" and not isinstance(self.parameters, dict)):
            return None
        fields = model.model_fields
        return frozenset({f.alias or n for n, f in fields.items()} | set(fields))

    def json_schema(self) -> dict[str, Any]:
        """The parameters as a JSON schema (what is sent to the backend, and what nudges and
        grammars are written from). A dict schema is the one given, less any structural
        keyword whose value breaks JSON Schema's structure (``core/_schema_shape.py``)."""
        if isinstance(self.parameters, dict):
            return self._sound_schema
        return self.parameters.model_json_schema()

    @functools.cached_property
    def _sound_schema(self) -> dict[str, Any]:
        assert isinstance(self.parameters, dict)
        if not self.parameters:
            return {"type": "object", "properties": {}}
        return sound_schema(self.parameters)

    def ignored_keywords(self) -> tuple[str, ...]:
        """The keywords of the schema as given that argument validation ignores, sorted
        (see ``core/_schema.py``): what the proxy names to its client."""
        if isinstance(self.parameters, dict):
            return ignored_keywords(self.parameters or {"type": "object"})
        return ignored_keywords(self.json_schema())

    def property_names(self) -> tuple[str, ...]:
        """Top-level argument names, in schema order (positional rescue relies on it)."""
        props = self.json_schema().get("properties", {})
        return tuple(props)

    def unknown_args(self, args: dict[str, Any]) -> tuple[str, ...]:
        """The names in ``args`` that :meth:`validate_args` drops, in the order given."""
        known = self._known_args
        if known is None:
            return ()
        return tuple(k for k in args if k not in known)

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated, type-coerced arguments, or :class:`ToolArgumentError` naming each problem.

        Top-level arguments the schema does not name are dropped first (see
        :meth:`unknown_args`); nested objects are validated as their schema says.
        """
        unknown = self.unknown_args(args)
        kept = {k: v for k, v in args.items() if k not in unknown} if unknown else args
        try:
            validated = self._validator.model_validate(kept)
        except pydantic.ValidationError as exc:
            errors = [ArgumentError(_path(e["loc"]), _describe(e)) for e in exc.errors()]
            raise ToolArgumentError(self.name, errors) from exc
        if isinstance(self.parameters, dict):
            return validated.model_dump(by_alias=True, exclude_unset=True)
        return validated.model_dump()

    def example_args(self) -> dict[str, Any]:
        """A concrete argument object that fits the schema, shown to the model in corrections."""
        # Placeholders stay as written, never padded or cut to a length: the validator knows
        # ``<city>`` for the placeholder it is when a model sends it back verbatim.
        return example_arguments(self.json_schema(), strings=_placeholder, fit_lengths=False)


def _placeholder(name: str) -> str:
    """A string argument in an example call: ``<city>`` reads as "put the city here"."""
    return f"<{name}>"


class Prerequisite(BaseModel):
    """A tool that must have been called first.

    With ``match_arg`` set, the prerequisite must have been called with the same value for that
    argument as this call has (``read_page(path=p)`` needs ``mount_volume(path=p)``);
    ``prerequisite_arg`` names the argument on the prerequisite tool when it differs.
    """

    model_config = ConfigDict(frozen=True)

    tool: str
    match_arg: str | None = None
    prerequisite_arg: str | None = None

    @property
    def other_arg(self) -> str | None:
        return self.prerequisite_arg or self.match_arg

    def describe(self) -> str:
        if self.match_arg is None:
            return self.tool
        return f"{self.tool}({self.other_arg}=<same {self.match_arg}>)"


class ToolDef(BaseModel):
    """A tool the runtime can execute: its spec, a sync or async callable, its prerequisites.

    ``timeout`` (seconds) bounds one execution; ``None`` means the caller's deadlines apply.
    ``idempotent`` says whether running a call twice does no more than running it once (a
    lookup). A call cut off by a cancellation is run again on ``resume()`` when it is; when it
    is not (it sends, books, writes), the call is not repeated: the model is told it was
    interrupted (:class:`~forge_rt.errors.ToolInterruptedError`) and decides what to do.

    ``needs`` declares what the tool does beyond computing a result (:class:`Capability`
    values or their names: ``{"network", "writes_state"}``; empty: nothing). ``None``, the
    default, means undeclared, which a policy treats as every capability (see
    :attr:`effective_needs`) and every listing flags.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: ToolSpec
    callable: Callable[..., Any]
    prerequisites: tuple[Prerequisite, ...] = ()
    timeout: float | None = None
    idempotent: bool = True
    needs: frozenset[Capability] | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, dict) and "prerequisites" in data:
            data = dict(data)
            data["prerequisites"] = tuple(
                Prerequisite(tool=p) if isinstance(p, str) else p for p in data["prerequisites"]
            )
        if isinstance(data, dict) and data.get("needs") is not None:
            data = dict(data)
            needs = data["needs"]
            if isinstance(needs, str):  # one name, not the characters of one
                needs = (needs,)
            spec = data.get("spec")
            where = f"tool {spec.name}" if isinstance(spec, ToolSpec) else "ToolDef"
            data["needs"] = parse_capabilities(needs, where=where)
        return data

    @model_validator(mode="after")
    def _check(self) -> ToolDef:
        if self.timeout is not None and self.timeout <= 0:
            raise WorkflowDefinitionError(f"tool {self.name}: timeout must be > 0 seconds")
        props = set(self.spec.property_names())
        for prereq in self.prerequisites:
            if prereq.match_arg is not None and props and prereq.match_arg not in props:
                raise WorkflowDefinitionError(
                    f"tool {self.name}: prerequisite {prereq.tool!r} matches on argument "
                    f"{prereq.match_arg!r}, which is not one of its parameters {sorted(props)}"
                )
        return self

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.callable)

    @property
    def needs_declared(self) -> bool:
        """Whether the tool says what it needs (``needs`` is not ``None``)."""
        return self.needs is not None

    @property
    def effective_needs(self) -> frozenset[Capability]:
        """What a policy decides on: the declared needs, or every capability if undeclared."""
        return ALL_CAPABILITIES if self.needs is None else self.needs
