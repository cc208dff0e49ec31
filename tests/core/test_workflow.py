"""Workflow construction checks, prompt rendering and the step tracker."""

from typing import Any

import pytest

from forge_rt.core import Prerequisite, StepTracker, ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import PromptTemplateError, WorkflowDefinitionError

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def _tool(name: str, prerequisites: list[Any] | None = None) -> ToolDef:
    return ToolDef(
        spec=ToolSpec(name=name, parameters=SCHEMA),
        callable=lambda path: path,
        prerequisites=prerequisites or [],
    )


def _workflow(**overrides: Any) -> Workflow:
    fields: dict[str, Any] = {
        "name": "files",
        "tools": [_tool("open"), _tool("read", ["open"]), _tool("report")],
        "required_steps": ["read"],
        "terminal_tool": "report",
    }
    fields.update(overrides)
    return Workflow(**fields)


def test_tools_list_becomes_mapping() -> None:
    """A list of tools is keyed by name; terminal tools are normalised to a set."""
    wf = _workflow()
    assert list(wf.tools) == ["open", "read", "report"]
    assert wf.terminal_tools == frozenset({"report"})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"required_steps": ["nope"]}, "required step 'nope' is not one of its tools"),
        ({"terminal_tool": "nope"}, "terminal tool 'nope' is not one of its tools"),
        ({"tools": [_tool("read", ["ghost"]), _tool("report")]}, "prerequisite 'ghost'"),
        ({"terminal_tool": "read"}, "'read' is both terminal and a required step"),
        ({"tools": [_tool("a"), _tool("a")]}, "tool 'a' is defined twice"),
        ({"terminal_tool": None, "respond_tool": False}, "a terminal_tool is required"),
    ],
    ids=["step", "terminal", "prereq", "terminal-is-step", "duplicate", "no-terminal"],
)
def test_construction_rejects_inconsistency(overrides: dict[str, Any], message: str) -> None:
    """Unknown or contradictory names fail when the workflow is built, with a clear message."""
    with pytest.raises(WorkflowDefinitionError, match=message):
        _workflow(**overrides)


def test_a_tool_named_respond_is_the_workflows_own() -> None:
    """A workflow tool named ``respond`` replaces the synthetic one and is the default terminal."""
    wf = _workflow(
        tools=[_tool("respond"), _tool("read"), _tool("report")],
        terminal_tool=None,
        required_steps=[],
    )
    assert (wf.synthetic_respond, wf.terminal_tools) == (False, frozenset({"respond"}))
    assert _workflow(terminal_tool=None, required_steps=[]).synthetic_respond


def test_respond_is_default_terminal() -> None:
    """Without a terminal tool, the synthetic respond tool ends the run."""
    wf = _workflow(terminal_tool=None, required_steps=[])
    assert wf.terminal_tools == frozenset({"respond"})


def test_prompt_variables_render_and_missing_ones_raise() -> None:
    """Template variables are filled; a missing one raises naming it."""
    wf = _workflow(system_prompt_template="You help {user} with {topic}. Literal {{x}}.")
    assert wf.template_variables() == ("user", "topic")
    assert wf.render_system_prompt({"user": "Ann", "topic": "files"}) == (
        "You help Ann with files. Literal {x}."
    )
    with pytest.raises(PromptTemplateError) as info:
        wf.render_system_prompt({"user": "Ann"})
    assert info.value.missing == ("topic",)


def test_malformed_template_fails_at_construction() -> None:
    """An unbalanced brace in the template is a definition error."""
    with pytest.raises(WorkflowDefinitionError, match="malformed"):
        _workflow(system_prompt_template="oops {")


def test_step_tracker_orders_and_matches_arguments() -> None:
    """The tracker keeps first-success order and checks argument-matched prerequisites."""
    tracker = StepTracker()
    tracker.record(ToolCall(tool="open", args={"path": "/a"}))
    tracker.record(ToolCall(tool="read", args={"path": "/a"}))
    tracker.record(ToolCall(tool="open", args={"path": "/b"}))
    assert tracker.completed_steps == ("open", "read")
    assert tracker.pending(["read", "report"]) == ["report"]
    assert tracker.count("open") == 2
    same_path = Prerequisite(tool="open", match_arg="path")
    assert tracker.satisfies(same_path, {"path": "/b"})
    assert not tracker.satisfies(same_path, {"path": "/c"})
    assert not tracker.satisfies(same_path, {})
    assert tracker.satisfies(Prerequisite(tool="open"), {})


def test_a_misspelt_field_is_refused_not_ignored() -> None:
    """``terminal_tools=`` (the field is ``terminal_tool``) fails loudly instead of being dropped."""
    import pydantic

    with pytest.raises(
        pydantic.ValidationError, match=r"terminal_tools\n  Extra inputs are not permitted"
    ):
        Workflow(name="w", tools=[], terminal_tools=["x"])
