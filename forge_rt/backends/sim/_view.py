"""The request as the simulated model sees it, whatever API it arrived on.

OpenAI, Anthropic and Ollama requests are all normalised into one :class:`RequestView`, which is
what an oracle reads to decide the next move, what the chat template renders into prompt tokens
and what the reply log records. msgspec structs: one is built per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec

__all__ = ["RequestView", "ViewMessage", "ViewTool", "ViewToolCall"]

Api = Literal["openai", "anthropic", "ollama"]


class ViewToolCall(msgspec.Struct, frozen=True):
    """A tool call already in the history; ``arguments`` is the JSON text as the client sent it."""

    id: str
    name: str
    arguments: str


class ViewMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One history message: ``role`` is system, user, assistant or tool."""

    role: str
    content: str = ""
    tool_calls: tuple[ViewToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: str | None = None


class ViewTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered in the request, with its parameters' JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class RequestView(msgspec.Struct, frozen=True, kw_only=True):
    """One inference request, API-independent.

    ``conversation`` is the ``x-sim-conversation`` header or else the first user message's text;
    ``turn`` counts the assistant messages in the history (a trailing assistant prefill is not
    counted: it is the reply being continued, in ``prefill``). ``tool_choice`` is ``auto``,
    ``required``, ``none`` or a tool name. ``schema`` is the JSON schema the output is
    constrained to, if any, ``grammar`` the GBNF grammar; ``constraint`` names the request field
    that carried the constraint.
    ``include_usage`` asks for a usage event at the end of a stream (OpenAI ``stream_options``);
    ``num_ctx`` is the context size an Ollama request asked the server to load;
    ``return_progress`` asks for llama-server's reports on the prompt while it is prefilled.
    """

    api: Api
    conversation: str
    turn: int
    messages: tuple[ViewMessage, ...]
    tools: tuple[ViewTool, ...] = ()
    tool_choice: str | None = None
    constraint: str | None = None
    schema: dict[str, Any] | None = None
    grammar: str | None = None
    prefill: str | None = None
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    return_progress: bool = False
    slot_id: int | None = None
    priority: int | None = None
    num_ctx: int | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)

    def called_tools(self) -> list[str]:
        """Names of the tools the assistant has called so far, in order."""
        return [c.name for m in self.messages if m.role == "assistant" for c in m.tool_calls]

    def tool(self, name: str) -> ViewTool | None:
        """The offered tool called ``name``, if any."""
        return next((t for t in self.tools if t.name == name), None)
