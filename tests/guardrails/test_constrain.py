"""The tool-call schema: every instance is a known call with valid arguments; and choosing it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
import pytest
import structlog
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from forge_rt.core import (
    ClientCapabilities,
    GrammarConstraint,
    JsonSchemaConstraint,
    ToolSpec,
    model_from_json_schema,
)
from forge_rt.errors import ConstraintUnsupportedError, ToolSchemaError, WorkflowDefinitionError
from forge_rt.guardrails import (
    CallShape,
    ConstraintDecision,
    Dialect,
    choose_constraint,
    rescue,
    respond_spec,
    tool_call_grammar,
    tool_call_schema,
)


class Window(BaseModel):
    start: int = Field(ge=0, le=100)
    end: int = Field(ge=0, le=100)


class PlotArgs(BaseModel):
    title: str = Field(min_length=1, max_length=12)
    window: Window
    style: Literal["line", "bar"] = "line"
    series: list[float] = Field(default=[], max_length=3)
    note: str | None = None


PLOT = ToolSpec(name="plot", description="Plot a series.", parameters=PlotArgs)
WEATHER = ToolSpec(
    name="get_air_quality",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city"],
    },
)
PING = ToolSpec(name="ping")
TOOLS = [PLOT, WEATHER, PING, respond_spec()]


def _walk(value: Any) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    if isinstance(value, Mapping):
        found.append(value)
        for item in value.values():
            found.extend(_walk(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_walk(item))
    return found


def test_schema_is_any_of_one_closed_object_per_tool() -> None:
    """One alternative per tool: name as const, arguments required, nothing else allowed."""
    schema = tool_call_schema(TOOLS, shape=CallShape(parallel=False))
    options = schema["anyOf"]
    assert [o["properties"]["name"] for o in options] == [
        {"const": "plot"},
        {"const": "get_air_quality"},
        {"const": "ping"},
        {"const": "respond"},
    ]
    assert all(o["required"] == ["name", "arguments"] for o in options)
    assert all(o["additionalProperties"] is False for o in options)


def test_refs_are_inlined_for_llama_cpp() -> None:
    """No $ref or $defs survives: llama.cpp's schema converter does not follow them."""
    schema = tool_call_schema([PLOT])
    nodes = _walk(schema)
    assert not any("$ref" in node or "$defs" in node for node in nodes)
    window = schema["anyOf"][0]["properties"]["arguments"]["properties"]["window"]
    assert window["properties"]["start"]["maximum"] == 100


def test_argument_objects_are_closed_like_the_validator() -> None:
    """Objects that declare properties (even none) forbid extra keys; free-form ones stay open."""
    free = ToolSpec(name="free", parameters={"type": "object"})
    schema = tool_call_schema([WEATHER, PING, free], shape=CallShape(parallel=False))
    weather, ping, free_args = (o["properties"]["arguments"] for o in schema["anyOf"])
    assert weather["additionalProperties"] is False
    assert ping["additionalProperties"] is False
    assert "additionalProperties" not in free_args


class Node(BaseModel):
    value: int
    children: list[Node] = []


def test_recursive_parameters_cannot_be_constrained() -> None:
    """A recursive model has no flat schema; the error says what to do."""
    with pytest.raises(ToolSchemaError, match=r"recursive \$ref .* constrain='never'"):
        tool_call_schema([ToolSpec(name="tree", parameters=Node)])


def test_no_tools_or_duplicates_are_refused() -> None:
    """An empty tool list or a repeated name is a definition error, not an empty schema."""
    with pytest.raises(WorkflowDefinitionError, match=r"at least one tool"):
        tool_call_schema([])
    with pytest.raises(WorkflowDefinitionError, match=r"duplicates \['ping'\]"):
        tool_call_schema([PING, PING])


# --- every instance is a valid call -------------------------------------------------------------


def instances(schema: Any) -> st.SearchStrategy[Any]:
    """Values shaped by ``schema`` (mostly valid; the validator below decides)."""
    if schema is True or schema == {}:
        return st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([instances(option) for option in schema[key]])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        return st.one_of([instances({**schema, "type": k}) for k in kind])
    if kind == "string":
        # Short strings: the default bound of 512 is pinned by its own tests, not sampled up to.
        top = min(schema.get("maxLength", 15), 15)
        return st.text(min_size=min(schema.get("minLength", 0), top), max_size=top)
    if kind == "integer":
        return st.integers(schema.get("minimum", -1000) - 1, schema.get("maximum", 1000) + 1)
    if kind == "number":
        # Exponents within the two digits the GBNF grammar allows.
        return st.floats(-1e6, 1e6, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-90)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        top = min(schema.get("maxItems", 3), 3) + 1
        return st.lists(instances(schema.get("items", {})), max_size=top)
    props = schema.get("properties", {})
    if not props:
        # Integers within the 16 digits the GBNF grammar allows a number.
        return st.dictionaries(st.text(max_size=5), st.integers(-(10**15), 10**15), max_size=2)
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {k: instances(v) for k, v in props.items() if k in required},
        optional={k: instances(v) for k, v in props.items() if k not in required}
        | {"surplus": st.integers()},
    )


SCHEMA = tool_call_schema(TOOLS)
# jsonschema is not a dependency; pydantic validates the schema through the same builder that
# validates dict-schema tools, wrapped so the top-level anyOf becomes a field.
SCHEMA_VALIDATOR = model_from_json_schema(
    "ToolCallSchema",
    {"type": "object", "properties": {"call": SCHEMA}, "required": ["call"]},
)


def _valid(instance: Any) -> bool:
    try:
        SCHEMA_VALIDATOR.model_validate({"call": instance})
    except pydantic.ValidationError:
        return False
    return True


@settings(max_examples=300)
@given(instance=instances(SCHEMA))
def test_every_schema_instance_is_a_known_call_with_valid_arguments(instance: Any) -> None:
    """Whatever the schema accepts, rescue reads as known calls (one, or the array's, in order)
    that validation accepts."""
    assume(_valid(instance))
    written = instance if isinstance(instance, list) else [instance]
    result = rescue(json.dumps(instance), TOOLS, constrained=True)
    assert [c.tool for c in result.calls] == [w["name"] for w in written]
    if len(written) == 1:
        assert result.dialects == (Dialect.CONSTRAINED_JSON,)
    assert result.unknown_calls == []
    for call in result.calls:
        {s.name: s for s in TOOLS}[call.tool].validate_args(call.args)


def test_schema_rejects_what_validation_rejects() -> None:
    """Unknown tools, missing or extra arguments and wrong enum values fail the schema."""
    good = {"name": "get_air_quality", "arguments": {"city": "Turku"}}
    assert _valid(good)
    for bad in (
        {"name": "get_stock", "arguments": {}},
        {"name": "get_air_quality", "arguments": {}},
        {"name": "get_air_quality", "arguments": {"city": "Turku", "title": "x"}},
        {"name": "get_air_quality", "arguments": {"city": "Turku", "unit": "k"}},
        {"name": "get_air_quality", "arguments": {"city": "Turku"}, "extra": 1},
        {"name": "respond"},
    ):
        assert not _valid(bad), bad


@pytest.mark.parametrize("spec", TOOLS, ids=[s.name for s in TOOLS])
def test_example_arguments_are_instances(spec: ToolSpec) -> None:
    """Each tool's own example call satisfies the schema and round-trips through rescue."""
    instance = {"name": spec.name, "arguments": spec.example_args()}
    assert _valid(instance)
    (call,) = rescue(json.dumps(instance), TOOLS).calls
    assert spec.validate_args(call.args) is not None


# --- choosing ----------------------------------------------------------------------------------

BOTH = ClientCapabilities(json_schema=True, grammar=True)
SCHEMA_ONLY = ClientCapabilities(json_schema=True)
GRAMMAR_ONLY = ClientCapabilities(grammar=True)
NEITHER = ClientCapabilities()


@pytest.mark.parametrize(
    ("mode", "caps", "kind"),
    [
        ("auto", BOTH, "json_schema"),
        ("auto", SCHEMA_ONLY, "json_schema"),
        ("auto", GRAMMAR_ONLY, "grammar"),
        ("auto", NEITHER, None),
        ("always", BOTH, "json_schema"),
        ("always", SCHEMA_ONLY, "json_schema"),
        ("always", GRAMMAR_ONLY, "grammar"),
        ("never", BOTH, None),
        ("never", NEITHER, None),
    ],
    ids=lambda v: v if isinstance(v, str) or v is None else None,
)
def test_choose_constraint_matrix(
    mode: Literal["auto", "always", "never"], caps: ClientCapabilities, kind: str | None
) -> None:
    """The mode and what the backend accepts decide the constraint; the decision is logged."""
    with structlog.testing.capture_logs() as logs:
        decision = choose_constraint(mode, caps, TOOLS)
    expected: type[Any] | None = {
        "json_schema": JsonSchemaConstraint,
        "grammar": GrammarConstraint,
        None: type(None),
    }[kind]
    assert isinstance(decision.constraint, expected)  # type: ignore[arg-type]
    assert decision.mode == mode
    assert decision.reason
    (event,) = [e for e in logs if e["event"] == "guardrails.constraint"]
    assert (event["mode"], event["constraint"], event["reason"]) == (
        mode,
        kind or "none",
        decision.reason,
    )


def test_schema_decision_carries_the_tool_call_schema() -> None:
    """The JSON-schema constraint sent to the backend is exactly tool_call_schema(tools)."""
    decision = choose_constraint("auto", SCHEMA_ONLY, TOOLS)
    assert decision.constraint == JsonSchemaConstraint(schema=tool_call_schema(TOOLS))


def test_grammar_decision_carries_the_grammar() -> None:
    """Under 'always' a grammar-only backend gets tool_call_grammar(tools)."""
    decision = choose_constraint("always", GRAMMAR_ONLY, TOOLS)
    assert decision.constraint == GrammarConstraint(gbnf=tool_call_grammar(TOOLS))


def test_always_without_support_raises() -> None:
    """'always' on a backend that constrains nothing is an error naming the backend and the fix."""
    with pytest.raises(
        ConstraintUnsupportedError, match=r"backend ollama-x accepts neither"
    ) as info:
        choose_constraint("always", NEITHER, TOOLS, backend="ollama-x")
    assert (info.value.mode, info.value.backend) == ("always", "ollama-x")


def test_auto_on_grammar_only_backend_sends_the_grammar() -> None:
    """'auto' constrains a grammar-only backend with the grammar, and the reason says so."""
    decision = choose_constraint("auto", GRAMMAR_ONLY, TOOLS)
    assert decision.constraint == GrammarConstraint(gbnf=tool_call_grammar(TOOLS))
    assert decision.reason == (
        "the backend accepts a GBNF grammar: every reply is a call of one of 4 tools"
    )


def test_no_tools_means_no_constraint() -> None:
    """Without tools there is nothing to constrain to, whatever the mode."""
    decision = choose_constraint("always", BOTH, [])
    assert (decision.constraint, decision.reason) == (
        None,
        "no tools are offered, so there is no call to constrain to",
    )


def test_unknown_mode_is_refused() -> None:
    """A misspelt mode is an error, not 'auto'."""
    with pytest.raises(
        ValueError, match=r"^constrain must be 'auto', 'always' or 'never', got 'sometimes'$"
    ):
        choose_constraint("sometimes", BOTH, TOOLS)  # type: ignore[arg-type]


def test_decision_is_a_wire_struct() -> None:
    """A decision serialises (for reports and traces) with its constraint tagged by kind."""
    import msgspec

    decision = choose_constraint("auto", SCHEMA_ONLY, [PING])
    decoded = msgspec.json.decode(msgspec.json.encode(decision), type=ConstraintDecision)
    assert decoded == decision


def test_an_array_of_calls_under_the_constraint_is_constrained_json() -> None:
    """Parallel calls written as the constraint's array are read as constrained output, each
    call tagged constrained_json, not as a rescue."""
    from forge_rt.guardrails import Dialect, rescue

    text = '[{"name": "get_air_quality", "arguments": {"city": "Narvik"}}, {"name": "get_air_quality", "arguments": {"city": "Lima"}}]'
    found = rescue(text, [WEATHER], constrained=True)
    assert [c.args["city"] for c in found.calls] == ["Narvik", "Lima"]
    assert list(found.dialects) == [Dialect.CONSTRAINED_JSON, Dialect.CONSTRAINED_JSON]
