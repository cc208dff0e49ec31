"""ToolSpec schemas and argument validation, ToolDef prerequisites."""

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from forge_rt.core import Prerequisite, ToolArgumentError, ToolDef, ToolSpec
from forge_rt.errors import WorkflowDefinitionError


class WeatherParams(BaseModel):
    city: str = Field(description="City name")
    days: int = 1


def _noop(**_: Any) -> str:
    return "ok"


def test_model_and_schema_render_the_same() -> None:
    """A spec from a pydantic model and one from its JSON schema render identical schemas."""
    from_model = ToolSpec(name="w", parameters=WeatherParams)
    from_schema = ToolSpec(name="w", parameters=WeatherParams.model_json_schema())
    assert from_model.json_schema() == from_schema.json_schema()


@pytest.mark.parametrize("source", ["model", "schema"])
def test_validation_coerces_and_drops_unknown_arguments_alike(source: str) -> None:
    """Both parameter forms coerce "3" to 3 and drop (and name) a polluted schema key."""
    params = WeatherParams if source == "model" else WeatherParams.model_json_schema()
    spec = ToolSpec(name="w", parameters=params)
    assert spec.validate_args({"city": "Paris", "days": "3"})["days"] == 3
    polluted = {"city": "Paris", "title": "WeatherParams", "patient_id": "p1"}
    assert spec.unknown_args(polluted) == ("title", "patient_id")
    assert spec.validate_args(polluted)["city"] == "Paris"
    assert "title" not in spec.validate_args(polluted)


def test_unknown_argument_beside_a_wrong_one_reports_only_the_wrong_one() -> None:
    """Dropping unknown arguments leaves the real problems to report."""
    spec = ToolSpec(name="w", parameters=WeatherParams.model_json_schema())
    with pytest.raises(ToolArgumentError) as info:
        spec.validate_args({"city": "Paris", "days": "soon", "colour": "red"})
    assert [e.path for e in info.value.errors] == ["$.days"]


def test_a_model_that_forbids_extra_arguments_keeps_refusing_them() -> None:
    """A user's pydantic model with extra="forbid" forbids explicitly; forge_rt does not override."""

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        city: str

    spec = ToolSpec(name="w", parameters=Strict)
    assert spec.unknown_args({"city": "Oslo", "x": 1}) == ()
    with pytest.raises(ToolArgumentError) as info:
        spec.validate_args({"city": "Oslo", "x": 1})
    assert [(e.path, e.message) for e in info.value.errors] == [
        ("$.x", "Unexpected argument (not in the schema)")
    ]


@pytest.mark.parametrize(
    "params",
    [
        {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "additionalProperties": True,
        },
        {"type": "object", "properties": {}},
    ],
    ids=["additional-properties", "free-form"],
)
def test_a_schema_that_allows_extra_arguments_keeps_them(params: dict[str, Any]) -> None:
    """Extra keys a schema allows are arguments, not pollution: nothing is dropped."""
    spec = ToolSpec(name="w", parameters=params)
    assert spec.unknown_args({"city": "Oslo", "x": 1}) == ()
    assert spec.validate_args({"city": "Oslo", "x": 1}) == {"city": "Oslo", "x": 1}


def test_validation_error_locates_field() -> None:
    """A wrong type names the expected type, what came, and where."""
    spec = ToolSpec(name="w", parameters=WeatherParams)
    with pytest.raises(ToolArgumentError) as info:
        spec.validate_args({"city": "Paris", "days": "soon"})
    (error,) = info.value.errors
    assert error.path == "$.days"
    assert "valid integer" in error.message


def test_missing_required_argument() -> None:
    """A missing required argument is reported at its path."""
    spec = ToolSpec(name="w", parameters=WeatherParams.model_json_schema())
    with pytest.raises(ToolArgumentError) as info:
        spec.validate_args({})
    assert [(e.path, e.message) for e in info.value.errors] == [
        ("$.city", "Missing required argument")
    ]


def test_schema_constraints_and_nesting() -> None:
    """Enums, ranges, arrays and nested objects from a JSON schema are enforced."""
    schema = {
        "type": "object",
        "properties": {
            "unit": {"enum": ["c", "f"]},
            "count": {"type": "integer", "minimum": 1, "maximum": 5},
            "tags": {"type": "array", "items": {"type": "string"}},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}},
                "required": ["lat"],
                "additionalProperties": False,
            },
        },
        "required": ["unit"],
    }
    spec = ToolSpec(name="t", parameters=schema)
    ok = spec.validate_args({"unit": "c", "count": 2, "tags": ["a"], "where": {"lat": "1.5"}})
    assert ok == {"unit": "c", "count": 2, "tags": ["a"], "where": {"lat": 1.5}}
    for bad in ({"unit": "k"}, {"unit": "c", "count": 9}, {"unit": "c", "where": {"lon": 1}}):
        with pytest.raises(ToolArgumentError):
            spec.validate_args(bad)


def test_optional_arguments_stay_unset() -> None:
    """An omitted optional argument is not invented as None."""
    spec = ToolSpec(name="w", parameters=WeatherParams.model_json_schema())
    assert spec.validate_args({"city": "Oslo"}) == {"city": "Oslo"}


def test_ref_into_defs_resolves() -> None:
    """Local $ref into $defs (pydantic's nested models) validates the nested shape."""

    class Inner(BaseModel):
        n: int

    class Outer(BaseModel):
        inner: Inner

    spec = ToolSpec(name="t", parameters=Outer.model_json_schema())
    assert spec.validate_args({"inner": {"n": "4"}}) == {"inner": {"n": 4}}


def test_bad_tool_name() -> None:
    """A tool name with spaces is rejected with the rule spelled out."""
    with pytest.raises(WorkflowDefinitionError, match="is not valid"):
        ToolSpec(name="get weather")


def test_example_args_validate() -> None:
    """The example shown to the model in corrections is itself valid."""
    spec = ToolSpec(name="w", parameters=WeatherParams)
    assert spec.validate_args(spec.example_args()) == {"city": "<city>", "days": 1}


def test_prerequisites_normalise_and_check_arg() -> None:
    """String prerequisites become Prerequisite; a match_arg must be a parameter."""
    spec = ToolSpec(name="read", parameters=WeatherParams)
    tool = ToolDef(spec=spec, callable=_noop, prerequisites=["open"])
    assert tool.prerequisites == (Prerequisite(tool="open"),)
    with pytest.raises(WorkflowDefinitionError, match="'path', which is not one of"):
        ToolDef(spec=spec, callable=_noop, prerequisites=[Prerequisite(tool="o", match_arg="path")])


def test_tooldef_detects_async() -> None:
    """is_async tells coroutine functions from plain ones."""

    async def fetch() -> str:
        return "x"

    assert ToolDef(spec=ToolSpec(name="f"), callable=fetch).is_async
    assert not ToolDef(spec=ToolSpec(name="g"), callable=_noop).is_async
