"""Strict request schemas for the two APIs the proxy serves, as msgspec structs.

Every field the OpenAI chat-completions and Anthropic Messages APIs define is accepted (real
clients send many optional ones, often as explicit ``null``); a field neither API defines is
rejected with msgspec's located message (``Object contains unknown field `foo` - at
`$.messages[0]```), which the proxy answers with a 400. A few widely used llama.cpp sampling
extensions (``top_k``, ``min_p``, ``repeat_penalty``, ``grammar``) are accepted too.

These structs only validate: the conversion into forge_rt's messages and tools is the clients'
inverse wire functions (``openai_request_from_wire``, ``anthropic_request_from_wire``). After
decoding, :func:`openai_unsupported` and :func:`anthropic_unsupported` name the defined
features this proxy cannot honour (``n > 1``, log-probabilities, audio output, server tools),
so the client gets a clear 400 instead of a silently different answer. Anthropic server
tools are the exception: they are left out of what the model sees, and the response says so
(:func:`server_tool_names`), so clients that always offer them (Claude Code) still work.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "AnthropicCountTokens",
    "AnthropicRequest",
    "OpenAIRequest",
    "anthropic_count_decoder",
    "anthropic_decoder",
    "anthropic_unsupported",
    "openai_decoder",
    "openai_unsupported",
    "server_tool_names",
]

Json = Any


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A wire object whose unknown fields are an error."""


# --- OpenAI chat completions -------------------------------------------------------------------


class _CacheControl(_Strict):
    type: str
    ttl: str | None = None


class _OAPart(_Strict, tag_field="type"):
    pass


class _OATextPart(_OAPart, tag="text"):
    text: str
    cache_control: _CacheControl | None = None


class _OAImageUrl(_Strict):
    url: str
    detail: str | None = None


class _OAImagePart(_OAPart, tag="image_url"):
    image_url: _OAImageUrl
    cache_control: _CacheControl | None = None


class _OAInputAudio(_Strict):
    data: str
    format: str


class _OAAudioPart(_OAPart, tag="input_audio"):
    input_audio: _OAInputAudio


class _OAFile(_Strict):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class _OAFilePart(_OAPart, tag="file"):
    file: _OAFile


class _OARefusalPart(_OAPart, tag="refusal"):
    refusal: str


_OAUserPart = _OATextPart | _OAImagePart | _OAAudioPart | _OAFilePart


class _OAFunctionCall(_Strict):
    name: str
    arguments: str


class _OAToolCall(_Strict):
    id: str
    type: str = "function"
    function: _OAFunctionCall | None = None
    custom: dict[str, Json] | None = None
    # Not part of the request schema, but clients that accumulate streamed deltas send it back.
    index: int | None = None


class _OAMessage(_Strict, tag_field="role"):
    pass


class _OASystem(_OAMessage, tag="system"):
    content: str | list[_OATextPart]
    name: str | None = None


class _OADeveloper(_OAMessage, tag="developer"):
    content: str | list[_OATextPart]
    name: str | None = None


class _OAUser(_OAMessage, tag="user"):
    content: str | list[_OAUserPart]
    name: str | None = None


class _OAAssistantAudio(_Strict):
    id: str


class _OAAssistant(_OAMessage, tag="assistant"):
    content: str | list[_OATextPart | _OARefusalPart] | None = None
    name: str | None = None
    refusal: str | None = None
    tool_calls: list[_OAToolCall] | None = None
    function_call: _OAFunctionCall | None = None
    audio: _OAAssistantAudio | None = None
    # Response-only fields that clients echo back when they append a reply to the history.
    annotations: list[Json] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class _OATool(_OAMessage, tag="tool"):
    content: str | list[_OATextPart]
    tool_call_id: str
    # Not in the API's schema, but LangChain and other clients send the tool's name here.
    name: str | None = None


class _OAFunctionMsg(_OAMessage, tag="function"):
    content: str | None
    name: str


class _OAFunctionDef(_Strict):
    name: str
    description: str | None = None
    parameters: dict[str, Json] | None = None
    strict: bool | None = None


class _OAToolDef(_Strict):
    type: str = "function"
    function: _OAFunctionDef | None = None
    custom: dict[str, Json] | None = None


class _OANamed(_Strict):
    name: str


class _OAToolChoice(_Strict):
    type: str
    function: _OANamed | None = None
    custom: _OANamed | None = None
    allowed_tools: dict[str, Json] | None = None


class _OAJsonSchema(_Strict):
    name: str
    description: str | None = None
    schema: dict[str, Json] | None = None
    strict: bool | None = None


class _OAResponseFormat(_Strict):
    type: str
    json_schema: _OAJsonSchema | None = None


class _OAStreamOptions(_Strict):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class OpenAIRequest(_Strict):
    """A ``POST /v1/chat/completions`` body, every field the API defines."""

    messages: list[_OASystem | _OADeveloper | _OAUser | _OAAssistant | _OATool | _OAFunctionMsg]
    model: str | None = None
    audio: dict[str, Json] | None = None
    frequency_penalty: float | None = None
    function_call: str | dict[str, Json] | None = None
    functions: list[dict[str, Json]] | None = None
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    max_completion_tokens: int | None = None
    max_tokens: int | None = None
    metadata: dict[str, str] | None = None
    modalities: list[str] | None = None
    n: int | None = None
    parallel_tool_calls: bool | None = None
    prediction: dict[str, Json] | None = None
    presence_penalty: float | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    reasoning_effort: str | None = None
    response_format: _OAResponseFormat | None = None
    safety_identifier: str | None = None
    seed: int | None = None
    service_tier: str | None = None
    stop: str | list[str] | None = None
    store: bool | None = None
    stream: bool | None = None
    stream_options: _OAStreamOptions | None = None
    temperature: float | None = None
    tool_choice: str | _OAToolChoice | None = None
    tools: list[_OAToolDef] | None = None
    top_logprobs: int | None = None
    top_p: float | None = None
    user: str | None = None
    verbosity: str | None = None
    web_search_options: dict[str, Json] | None = None
    # llama.cpp / vLLM sampling extensions that OpenAI-compatible local clients send.
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repetition_penalty: float | None = None
    grammar: str | None = None


def openai_unsupported(request: OpenAIRequest) -> tuple[str, str] | None:
    """``(message, path)`` for a defined feature the proxy cannot honour, else ``None``."""
    if request.n is not None and request.n != 1:
        return "only n=1 is supported: the proxy returns one choice per request", "$.n"
    if request.logprobs or request.top_logprobs:
        return "log-probabilities are not supported by the proxy", "$.logprobs"
    if request.audio is not None or (request.modalities and "audio" in request.modalities):
        return "audio output is not supported by the proxy", "$.modalities"
    if request.functions is not None or request.function_call is not None:
        return (
            "the deprecated functions/function_call fields are not supported; send tools "
            "and tool_choice instead",
            "$.functions",
        )
    if request.web_search_options is not None:
        return "web search is not supported by the proxy", "$.web_search_options"
    return None


# --- Anthropic Messages ------------------------------------------------------------------------


class _ABlock(_Strict, tag_field="type"):
    pass


class _ATextBlock(_ABlock, tag="text"):
    text: str
    cache_control: _CacheControl | None = None
    citations: list[Json] | None = None


class _AImageBlock(_ABlock, tag="image"):
    source: dict[str, Json]
    cache_control: _CacheControl | None = None


class _ADocumentBlock(_ABlock, tag="document"):
    source: dict[str, Json]
    title: str | None = None
    context: str | None = None
    citations: dict[str, Json] | None = None
    cache_control: _CacheControl | None = None


class _ASearchResultBlock(_ABlock, tag="search_result"):
    source: str
    title: str
    content: list[_ATextBlock]
    citations: dict[str, Json] | None = None
    cache_control: _CacheControl | None = None


class _AToolUseBlock(_ABlock, tag="tool_use"):
    id: str
    name: str
    input: dict[str, Json]
    cache_control: _CacheControl | None = None


class _AToolResultBlock(_ABlock, tag="tool_result"):
    tool_use_id: str
    content: (
        str | list[_ATextBlock | _AImageBlock | _ADocumentBlock | _ASearchResultBlock] | None
    ) = None
    is_error: bool | None = None
    cache_control: _CacheControl | None = None


class _AThinkingBlock(_ABlock, tag="thinking"):
    thinking: str
    signature: str | None = None


class _ARedactedThinkingBlock(_ABlock, tag="redacted_thinking"):
    data: str


class _AServerToolUseBlock(_ABlock, tag="server_tool_use"):
    id: str
    name: str
    input: dict[str, Json]
    cache_control: _CacheControl | None = None


class _AWebSearchResultBlock(_ABlock, tag="web_search_tool_result"):
    tool_use_id: str
    content: Json
    cache_control: _CacheControl | None = None


_ABlocks = (
    _ATextBlock
    | _AImageBlock
    | _ADocumentBlock
    | _ASearchResultBlock
    | _AToolUseBlock
    | _AToolResultBlock
    | _AThinkingBlock
    | _ARedactedThinkingBlock
    | _AServerToolUseBlock
    | _AWebSearchResultBlock
)


class _AMessage(_Strict):
    role: str
    content: str | list[_ABlocks]


class _AMetadata(_Strict):
    user_id: str | None = None


class _AToolChoice(_Strict):
    type: str
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class _ACustomTool(_Strict):
    name: str
    input_schema: dict[str, Json]
    description: str | None = None
    type: str | None = None
    cache_control: _CacheControl | None = None


class _ABase(_Strict):
    messages: list[_AMessage]
    model: str | None = None
    system: str | list[_ATextBlock] | None = None
    tools: list[dict[str, Json]] | None = None
    tool_choice: _AToolChoice | None = None
    thinking: dict[str, Json] | None = None
    mcp_servers: list[Json] | None = None
    context_management: dict[str, Json] | None = None
    output_format: dict[str, Json] | None = None
    output_config: dict[str, Json] | None = None


class AnthropicRequest(_ABase, kw_only=True):
    """A ``POST /v1/messages`` body, every field the API defines (``max_tokens`` required)."""

    max_tokens: int
    container: str | dict[str, Json] | None = None
    inference_geo: str | None = None
    metadata: _AMetadata | None = None
    service_tier: str | None = None
    stop_sequences: list[str] | None = None
    stream: bool | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None


class AnthropicCountTokens(_ABase):
    """A ``POST /v1/messages/count_tokens`` body."""


def _is_server_tool(tool: dict[str, Json]) -> bool:
    return tool.get("type") not in (None, "custom")


def server_tool_names(request: _ABase) -> list[str]:
    """The server tools (web search, code execution, ...) a Messages request offers.

    They run on Anthropic's servers, which a local model does not have; the proxy leaves them
    out of what the model is offered and says so in the ``x-forge-dropped-tools`` header.
    """
    return [str(t.get("name") or t.get("type")) for t in request.tools or () if _is_server_tool(t)]


def _check_tools(tools: list[dict[str, Json]] | None) -> tuple[str, str] | None:
    for i, tool in enumerate(tools or ()):
        if _is_server_tool(tool):
            continue
        try:
            msgspec.convert(tool, _ACustomTool)
        except msgspec.ValidationError as exc:
            return str(exc).rsplit(" - at ", 1)[0], f"$.tools[{i}]" + _subpath(exc)
    return None


def _subpath(exc: msgspec.ValidationError) -> str:
    """The ``$...`` location msgspec gave, minus its leading ``$``."""
    text = str(exc)
    if " - at `$" not in text:
        return ""
    return text.rsplit(" - at `$", 1)[1].rstrip("`")


def anthropic_unsupported(request: _ABase) -> tuple[str, str] | None:
    """``(message, path)`` for a defined feature the proxy cannot honour, else ``None``."""
    found = _check_tools(request.tools)
    if found is not None:
        return found
    if request.mcp_servers:
        return "MCP servers are not supported by the proxy", "$.mcp_servers"
    return None


openai_decoder = msgspec.json.Decoder(OpenAIRequest)
anthropic_decoder = msgspec.json.Decoder(AnthropicRequest)
anthropic_count_decoder = msgspec.json.Decoder(AnthropicCountTokens)
