"""The Anthropic Messages request, as strict msgspec structs: the one schema a body is decoded
against.

Every field the API defines is accepted; a field it does not define is rejected with msgspec's
located message (``Object contains unknown field `foo` - at `$.messages[0]```), which a server
answers with a 400. Content blocks are a tagged union (by ``type``), so each decodes straight
into its own struct; whether a block is allowed depends on the role of its message, which the
conversion checks.

``tools`` is kept as its raw JSON (:class:`msgspec.Raw`), as for OpenAI: a server remembers the
compiled tools by those exact bytes and decodes them only the first time it sees them. They are
decoded as JSON objects (:data:`tools_decoder`), because a server tool (web search, code
execution, ...) has a shape of its own per type; the custom tools among them are then converted
into :class:`CustomTool`.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "NO_TOOLS",
    "AnthropicCountTokens",
    "AnthropicRequest",
    "CustomTool",
    "MessageList",
    "MessageParam",
    "MessagesBase",
    "RedactedThinkingBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolChoiceParam",
    "ToolResultBlock",
    "ToolUseBlock",
    "count_decoder",
    "request_decoder",
    "tools_decoder",
]

Json = Any

NO_TOOLS = msgspec.Raw(b"null")
"""What ``tools`` holds when the body has none (absent or ``null``)."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A wire object whose unknown fields are an error."""


class _CacheControl(_Strict):
    type: str
    ttl: str | None = None


class _Block(_Strict, tag_field="type"):
    """A content block, tagged by ``type``."""


class TextBlock(_Block, tag="text"):
    text: str
    cache_control: _CacheControl | None = None
    citations: list[Json] | None = None


class _ImageBlock(_Block, tag="image"):
    source: dict[str, Json]
    cache_control: _CacheControl | None = None


class _DocumentBlock(_Block, tag="document"):
    source: dict[str, Json]
    title: str | None = None
    context: str | None = None
    citations: dict[str, Json] | None = None
    cache_control: _CacheControl | None = None


class _SearchResultBlock(_Block, tag="search_result"):
    source: str
    title: str
    content: list[TextBlock]
    citations: dict[str, Json] | None = None
    cache_control: _CacheControl | None = None


class ToolUseBlock(_Block, tag="tool_use"):
    id: str
    name: str
    input: dict[str, Json]
    cache_control: _CacheControl | None = None


class ToolResultBlock(_Block, tag="tool_result"):
    # Required by the API; the conversion checks it, so that its error can say why.
    tool_use_id: str | None = None
    content: str | list[TextBlock | _ImageBlock | _DocumentBlock | _SearchResultBlock] | None = None
    is_error: bool | None = None
    cache_control: _CacheControl | None = None


class ThinkingBlock(_Block, tag="thinking"):
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Block, tag="redacted_thinking"):
    data: str


class _ServerToolUseBlock(_Block, tag="server_tool_use"):
    id: str
    name: str
    input: dict[str, Json]
    cache_control: _CacheControl | None = None


class _WebSearchResultBlock(_Block, tag="web_search_tool_result"):
    tool_use_id: str
    content: Json
    cache_control: _CacheControl | None = None


_BlockParam = (
    TextBlock
    | _ImageBlock
    | _DocumentBlock
    | _SearchResultBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | _ServerToolUseBlock
    | _WebSearchResultBlock
)


class MessageParam(_Strict):
    role: str
    content: str | list[_BlockParam]


class _Metadata(_Strict):
    user_id: str | None = None


class ToolChoiceParam(_Strict):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class CustomTool(_Strict):
    """A tool the caller defines (``type`` absent or ``custom``), as opposed to a server tool."""

    name: str
    input_schema: dict[str, Json]
    description: str | None = None
    type: str | None = None
    cache_control: _CacheControl | None = None


class MessagesBase(_Strict):
    """What a Messages request and a count_tokens request share: the prompt and its tools."""

    messages: list[MessageParam]
    model: str | None = None
    system: str | list[TextBlock] | None = None
    # A list of tool objects, kept as its JSON (see the module docstring).
    tools: msgspec.Raw = NO_TOOLS
    tool_choice: ToolChoiceParam | None = None
    thinking: dict[str, Json] | None = None
    mcp_servers: list[Json] | None = None
    context_management: dict[str, Json] | None = None
    output_format: dict[str, Json] | None = None
    output_config: dict[str, Json] | None = None


class AnthropicRequest(MessagesBase, kw_only=True):
    """A ``POST /v1/messages`` body, every field the API defines (``max_tokens`` required)."""

    max_tokens: int
    container: str | dict[str, Json] | None = None
    inference_geo: str | None = None
    metadata: _Metadata | None = None
    service_tier: str | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None


class AnthropicCountTokens(MessagesBase):
    """A ``POST /v1/messages/count_tokens`` body."""


class MessageList(_Strict):
    """``messages`` on its own, so that its errors are located as in a whole body."""

    messages: list[MessageParam]


request_decoder = msgspec.json.Decoder(AnthropicRequest)
count_decoder = msgspec.json.Decoder(AnthropicCountTokens)
tools_decoder = msgspec.json.Decoder(list[dict[str, Json]])
