"""The synthetic respond tool: offered with tools, opt-out per workflow, turned back into text."""

from __future__ import annotations

from typing import Any

import pytest

from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ToolArgumentError,
    ToolCall,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.guardrails import (
    Dialect,
    render_call,
    rescue,
    respond_spec,
    split_respond,
    with_respond,
    workflow_tool_specs,
)

LOOKUP = ToolSpec(
    name="lookup",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


def _noop(**_: Any) -> str:
    return "ok"


def test_respond_spec_shape() -> None:
    """respond takes exactly one required string, message, and says it answers the user."""
    spec = respond_spec()
    assert spec.name == RESPOND_TOOL_NAME == "respond"
    schema = spec.json_schema()
    assert schema["required"] == ["message"]
    assert schema["properties"]["message"]["type"] == "string"
    assert "answer the user" in spec.description.lower()
    assert spec.validate_args({"message": "hi"}) == {"message": "hi"}


@pytest.mark.parametrize(
    "args",
    [{}, {"message": 3}, {"answer": "hi"}],
    ids=["missing", "not-a-string", "wrong-key"],
)
def test_respond_rejects_bad_arguments(args: dict[str, Any]) -> None:
    """Anything but a lone string message fails validation, so the model gets corrected."""
    with pytest.raises(ToolArgumentError):
        respond_spec().validate_args(args)


def test_with_respond_adds_it_after_the_tools() -> None:
    """With tools present, respond is offered last."""
    assert [s.name for s in with_respond([LOOKUP])] == ["lookup", "respond"]


def test_no_tools_means_no_respond() -> None:
    """A request without tools is plain chat: nothing is added."""
    assert with_respond([]) == ()


def test_opt_out_leaves_tools_alone() -> None:
    """enabled=False returns the tools unchanged."""
    assert with_respond([LOOKUP], enabled=False) == (LOOKUP,)


def test_respond_drops_an_extra_key() -> None:
    """A key respond does not have is dropped, and the message still goes through."""
    assert respond_spec().unknown_args({"message": "hi", "extra": 1}) == ("extra",)
    assert respond_spec().validate_args({"message": "hi", "extra": 1}) == {"message": "hi"}


def test_a_tool_named_respond_is_the_callers_own() -> None:
    """A caller's own respond tool is kept as it is; the synthetic one is not added beside it."""
    own = ToolSpec(name="respond", parameters={"type": "object", "properties": {}})
    assert with_respond([LOOKUP, own]) == (LOOKUP, own)


def test_workflow_with_its_own_respond_offers_only_that_one() -> None:
    """workflow_tool_specs offers a workflow's own respond tool once, never the synthetic one."""
    own = ToolSpec(name="respond", parameters={"type": "object", "properties": {}})
    workflow = Workflow(
        name="w", tools=[ToolDef(spec=LOOKUP, callable=_noop), ToolDef(spec=own, callable=_noop)]
    )
    assert workflow_tool_specs(workflow) == (LOOKUP, own)


@pytest.mark.parametrize(
    ("enabled", "expected"), [(True, ["lookup", "respond"]), (False, ["lookup"])]
)
def test_workflow_opt_out(enabled: bool, expected: list[str]) -> None:
    """A workflow's respond_tool flag decides whether the model is offered respond."""
    workflow = Workflow(
        name="w",
        tools=[ToolDef(spec=LOOKUP, callable=_noop)],
        respond_tool=enabled,
        terminal_tool=None if enabled else "lookup",
    )
    assert [s.name for s in workflow_tool_specs(workflow)] == expected


def test_split_respond_returns_text_and_other_calls() -> None:
    """The respond call becomes the user's text; other calls are kept in order."""
    calls = [
        ToolCall(tool="lookup", args={"q": "a"}),
        ToolCall(tool="respond", args={"message": "Here it is."}),
        ToolCall(tool="lookup", args={"q": "b"}),
    ]
    text, others = split_respond(calls)
    assert text == "Here it is."
    assert [c.args["q"] for c in others] == ["a", "b"]


def test_split_respond_without_respond() -> None:
    """No respond call: no text, every call kept."""
    calls = [ToolCall(tool="lookup", args={"q": "a"})]
    assert split_respond(calls) == (None, calls)


def test_two_respond_calls_are_joined() -> None:
    """Several respond calls in one reply read as paragraphs of one answer."""
    calls = [
        ToolCall(tool="respond", args={"message": "One."}),
        ToolCall(tool="respond", args={"message": "Two."}),
    ]
    assert split_respond(calls) == ("One.\n\nTwo.", [])


def test_unvalidated_respond_call_is_refused() -> None:
    """A respond call without a string message is a caller bug: validate first."""
    with pytest.raises(ValueError, match=r"has no string 'message'"):
        split_respond([ToolCall(tool="respond", args={"answer": "x"})])


@pytest.mark.parametrize("dialect", [Dialect.FENCED_JSON, Dialect.HERMES_XML, Dialect.PYTHON_CALL])
def test_rescued_respond_reads_as_plain_text(dialect: Dialect) -> None:
    """A respond call written as text comes back as the caller's plain text."""
    text = render_call(ToolCall(tool="respond", args={"message": "It is 21°C."}), dialect)
    found = rescue(text, with_respond([LOOKUP]))
    assert split_respond(found.calls) == ("It is 21°C.", [])
