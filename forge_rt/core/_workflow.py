"""A workflow: the tools, the steps that must happen, the tool(s) that end it, the system prompt."""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from forge_rt.core._tools import ToolDef
from forge_rt.errors import PromptTemplateError, WorkflowDefinitionError

__all__ = ["RESPOND_TOOL_NAME", "ConstrainMode", "Workflow"]

RESPOND_TOOL_NAME = "respond"
ConstrainMode = Literal["auto", "always", "never"]


class Workflow(BaseModel):
    """A tool-calling task definition, checked for consistency when built.

    ``terminal_tool`` names the tool (or tools) whose success ends the run. With ``None`` the
    ``respond`` tool is terminal: the run ends when the model answers the user. With
    ``respond_tool`` the model is offered a synthetic ``respond`` tool -- unless the workflow has
    a tool of that name itself, which is then the one offered and run (see
    :attr:`synthetic_respond`). Every name in ``required_steps``, ``terminal_tool`` and the
    tools' prerequisites must be a tool of this workflow, or construction raises
    :class:`WorkflowDefinitionError`.
    """

    # A misspelt field (``terminal_tools=``) is an error, not silently ignored.
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    name: str
    description: str = ""
    tools: dict[str, ToolDef]
    required_steps: tuple[str, ...] = ()
    terminal_tool: str | tuple[str, ...] | None = None
    system_prompt_template: str = "You are a helpful assistant. Use the tools to complete the task."
    respond_tool: bool = True
    constrain: ConstrainMode = "auto"
    prompt_variables: Mapping[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        tools = data.get("tools")
        if isinstance(tools, list | tuple):
            by_name: dict[str, ToolDef] = {}
            for tool in tools:
                if tool.name in by_name:
                    raise WorkflowDefinitionError(f"tool {tool.name!r} is defined twice")
                by_name[tool.name] = tool
            data["tools"] = by_name
        if isinstance(data.get("terminal_tool"), list):
            data["terminal_tool"] = tuple(data["terminal_tool"])
        if isinstance(data.get("required_steps"), list):
            data["required_steps"] = tuple(data["required_steps"])
        return data

    @model_validator(mode="after")
    def _check(self) -> Workflow:
        names = set(self.tools)
        for key, tool in self.tools.items():
            if key != tool.name:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: tools key {key!r} does not match tool name "
                    f"{tool.name!r}"
                )
        callable_names = names | ({RESPOND_TOOL_NAME} if self.respond_tool else set())
        for step in self.required_steps:
            if step not in names:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: required step {step!r} is not one of its tools "
                    f"{sorted(names)}"
                )
        if self.terminal_tool is None and not self.respond_tool:
            raise WorkflowDefinitionError(
                f"workflow {self.name!r}: without the respond tool a terminal_tool is required"
            )
        for terminal in self.terminal_tools:
            if terminal not in callable_names:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: terminal tool {terminal!r} is not one of its tools "
                    f"{sorted(callable_names)}"
                )
            if terminal in self.required_steps:
                raise WorkflowDefinitionError(
                    f"workflow {self.name!r}: {terminal!r} is both terminal and a required step"
                )
        for tool in self.tools.values():
            for prereq in tool.prerequisites:
                if prereq.tool not in names:
                    raise WorkflowDefinitionError(
                        f"workflow {self.name!r}: tool {tool.name!r} has prerequisite "
                        f"{prereq.tool!r}, which is not one of its tools {sorted(names)}"
                    )
                if prereq.tool == tool.name:
                    raise WorkflowDefinitionError(
                        f"workflow {self.name!r}: tool {tool.name!r} lists itself as a prerequisite"
                    )
        self.template_variables()  # a malformed template fails here, not mid-run
        return self

    @property
    def synthetic_respond(self) -> bool:
        """Whether the model is offered the synthetic ``respond`` tool: ``respond_tool`` is on
        and no tool of the workflow is named ``respond`` (a tool of its own wins)."""
        return self.respond_tool and RESPOND_TOOL_NAME not in self.tools

    @property
    def terminal_tools(self) -> frozenset[str]:
        """The tools whose success ends the run."""
        if self.terminal_tool is None:
            return frozenset({RESPOND_TOOL_NAME})
        if isinstance(self.terminal_tool, str):
            return frozenset({self.terminal_tool})
        return frozenset(self.terminal_tool)

    def template_variables(self) -> tuple[str, ...]:
        """The ``{names}`` the system prompt template expects."""
        try:
            parsed = list(string.Formatter().parse(self.system_prompt_template))
        except ValueError as exc:
            raise WorkflowDefinitionError(
                f"workflow {self.name!r}: system prompt template is malformed ({exc}); "
                "write literal braces as {{ and }}"
            ) from exc
        return tuple(dict.fromkeys(field for _, field, _, _ in parsed if field))

    def render_system_prompt(self, variables: Mapping[str, str] | None = None) -> str:
        """The system prompt with variables filled from ``prompt_variables`` and ``variables``."""
        values = {**self.prompt_variables, **(variables or {})}
        missing = [v for v in self.template_variables() if v not in values]
        if missing:
            raise PromptTemplateError(
                f"workflow {self.name!r}: system prompt needs variable(s) {missing}; pass them "
                "as prompt_variables",
                missing=missing,
            )
        return self.system_prompt_template.format(**values)
