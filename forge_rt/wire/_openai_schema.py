"""The OpenAI chat-completions request, as strict msgspec structs: the one schema a body is
decoded against.

Every field the API defines is accepted (real clients send many optional ones, often as explicit
``null``); a field it does not define is rejected with msgspec's located message (``Object
contains unknown field `foo` - at `$.messages[0]```), which a server answers with a 400. The
llama.cpp / vLLM sampling extensions that OpenAI-compatible local clients send (``top_k``,
``min_p``, ``repeat_penalty``, ``repetition_penalty``, ``grammar``) are accepted too.

Messages and content parts are tagged unions (by ``role``, by ``type``), so each decodes straight
into its own struct. The variants forge_rt refuses whatever they hold -- non-text content parts
and the deprecated ``function`` role -- are refused by their tag alone: their fields are not
read, so the client hears "not supported" rather than about a field it need not fix.

``tools`` is kept as its raw JSON (:class:`msgspec.Raw`): compiling a tool list is the costly
part of reading a request, so a server remembers the compiled tools by those exact bytes and
decodes them (against :class:`ToolDef`) only the first time it sees them.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "NO_TOOLS",
    "AssistantMessage",
    "DeveloperMessage",
    "FunctionMessage",
    "MessageList",
    "MessageParam",
    "OpenAIRequest",
    "SystemMessage",
    "TextPart",
    "ToolCallParam",
    "ToolChoiceParam",
    "ToolDef",
    "ToolMessage",
    "UserMessage",
    "request_decoder",
    "tools_decoder",
]

Json = Any

NO_TOOLS = msgspec.Raw(b"null")
"""What :attr:`OpenAIRequest.tools` holds when the body has none (absent or ``null``)."""


class _Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A wire object whose unknown fields are an error."""


class _CacheControl(_Strict):
    type: str
    ttl: str | None = None


class _Part(_Strict, tag_field="type"):
    """A content part, tagged by ``type``."""


class TextPart(_Part, tag="text"):
    text: str
    cache_control: _CacheControl | None = None


class _ImagePart(_Part, tag="image_url", forbid_unknown_fields=False):
    """Refused by its tag (text only); its fields are not read."""


class _AudioPart(_Part, tag="input_audio", forbid_unknown_fields=False):
    """Refused by its tag (text only); its fields are not read."""


class _FilePart(_Part, tag="file", forbid_unknown_fields=False):
    """Refused by its tag (text only); its fields are not read."""


class _RefusalPart(_Part, tag="refusal", forbid_unknown_fields=False):
    """Refused by its tag (text only); its fields are not read."""


class _FunctionCall(_Strict):
    name: str
    arguments: str


class ToolCallParam(_Strict):
    """A call in an assistant message of the history."""

    id: str
    type: str = "function"
    function: _FunctionCall | None = None
    custom: dict[str, Json] | None = None
    # Not part of the request schema, but clients that accumulate streamed deltas send it back.
    index: int | None = None


class _Message(_Strict, tag_field="role"):
    """A message, tagged by ``role``."""


class SystemMessage(_Message, tag="system"):
    content: str | list[TextPart]
    name: str | None = None


class DeveloperMessage(_Message, tag="developer"):
    content: str | list[TextPart]
    name: str | None = None


class UserMessage(_Message, tag="user"):
    content: str | list[TextPart | _ImagePart | _AudioPart | _FilePart]
    name: str | None = None


class _AssistantAudio(_Strict):
    id: str


class AssistantMessage(_Message, tag="assistant"):
    content: str | list[TextPart | _RefusalPart] | None = None
    name: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallParam] | None = None
    function_call: _FunctionCall | None = None
    audio: _AssistantAudio | None = None
    # Response-only fields that clients echo back when they append a reply to the history.
    annotations: list[Json] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class ToolMessage(_Message, tag="tool"):
    content: str | list[TextPart]
    # Required by the API; the conversion checks it, so that its error can say why.
    tool_call_id: str | None = None
    # Not in the API's schema, but LangChain and other clients send the tool's name here.
    name: str | None = None


class FunctionMessage(_Message, tag="function", forbid_unknown_fields=False):
    """The deprecated ``function`` role: refused by its tag; its fields are not read."""


MessageParam = (
    SystemMessage
    | DeveloperMessage
    | UserMessage
    | AssistantMessage
    | ToolMessage
    | FunctionMessage
)


class _FunctionDef(_Strict):
    name: str
    description: str | None = None
    parameters: dict[str, Json] | None = None
    strict: bool | None = None


class ToolDef(_Strict):
    """One entry of ``tools``."""

    type: str = "function"
    function: _FunctionDef | None = None
    custom: dict[str, Json] | None = None


class _Named(_Strict):
    name: str


class ToolChoiceParam(_Strict):
    """A ``tool_choice`` object (the string forms are plain ``str``)."""

    type: str
    function: _Named | None = None
    custom: _Named | None = None
    allowed_tools: dict[str, Json] | None = None


class _JsonSchema(_Strict):
    name: str
    description: str | None = None
    schema: dict[str, Json] | None = None
    strict: bool | None = None


class _ResponseFormat(_Strict):
    type: str
    json_schema: _JsonSchema | None = None


class _StreamOptions(_Strict):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class OpenAIRequest(_Strict):
    """A ``POST /v1/chat/completions`` body, every field the API defines."""

    messages: list[MessageParam]
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
    response_format: _ResponseFormat | None = None
    safety_identifier: str | None = None
    seed: int | None = None
    service_tier: str | None = None
    stop: str | list[str] | None = None
    store: bool | None = None
    stream: bool | None = None
    stream_options: _StreamOptions | None = None
    temperature: float | None = None
    tool_choice: str | ToolChoiceParam | None = None
    # A list of ToolDef, kept as its JSON (see the module docstring); `null` when absent.
    tools: msgspec.Raw = NO_TOOLS
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


class MessageList(_Strict):
    """``messages`` on its own, so that its errors are located as in a whole body."""

    messages: list[MessageParam]


request_decoder = msgspec.json.Decoder(OpenAIRequest)
tools_decoder = msgspec.json.Decoder(list[ToolDef])
