"""Prompt-injected tool calling: tools described in the system prompt, calls read from text.

For backends whose chat template has no tool support (llamafile builds, templates without
``tools``), the client tells the model about the tools itself and renders the history so that
no ``tool`` role or ``tool_calls`` field reaches the template: earlier calls become assistant
text in the same one-line JSON format the model is asked to write, results become user turns
naming the call they answer, and consecutive turns of one role are merged. Reasoning is not
replayed in this mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from forge_rt.core import Message, Role, ToolCall, ToolSpec
from forge_rt.wire._request import fold_reasoning

__all__ = ["prompt_mode_messages", "render_call", "render_tool_prompt"]


def render_call(call: ToolCall) -> str:
    """One call in the format the prompt asks for."""
    return msgspec.json.encode({"name": call.tool, "arguments": call.args}).decode()


def render_tool_prompt(tools: Sequence[ToolSpec]) -> str:
    """The tool section appended to the system prompt: format, one example, every tool."""
    lines = [
        "You can call tools. To call a tool, reply with only a JSON object on one line:",
        '{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}',
        "To call several tools, write one such line per call. To answer without a tool, "
        "reply in plain text.",
    ]
    if tools:
        example = ToolCall(tool=tools[0].name, args=tools[0].example_args())
        lines += ["", "Example:", render_call(example)]
    lines += ["", "Tools:"]
    for tool in tools:
        schema = msgspec.json.encode(tool.json_schema()).decode()
        description = f": {tool.description}" if tool.description else ""
        lines.append(f"- {tool.name}{description}")
        lines.append(f"  arguments (JSON schema): {schema}")
    return "\n".join(lines)


def prompt_mode_messages(
    messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> list[dict[str, Any]]:
    """Chat messages with only system/user/assistant roles, tools described in the system."""
    out: list[dict[str, Any]] = []

    def add(role: str, content: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] = f"{out[-1]['content']}\n\n{content}"
        else:
            out.append({"role": role, "content": content})

    tool_prompt = render_tool_prompt(tools)
    placed = False
    for message, _reasoning in fold_reasoning(messages):
        if message.role is Role.SYSTEM:
            content = message.content
            if not placed:
                content = f"{content}\n\n{tool_prompt}" if content else tool_prompt
                placed = True
            add("system", content)
        elif message.role is Role.TOOL:
            name = message.tool_name or "the tool"
            add("user", f"Result of {name} (call {message.tool_call_id}):\n{message.content}")
        elif message.role is Role.ASSISTANT and message.tool_calls:
            calls = "\n".join(render_call(c) for c in message.tool_calls)
            add("assistant", f"{message.content}\n{calls}" if message.content else calls)
        else:
            add(message.role.value, message.content)
    if not placed:
        out.insert(0, {"role": "system", "content": tool_prompt})
    return out
