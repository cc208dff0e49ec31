"""The wire codecs: OpenAI chat completions, Anthropic Messages and Ollama ``/api/chat``, both ways.

forge_rt's inference data model (:mod:`forge_rt.core`) meets the HTTP APIs here, in one place,
for everything that speaks them: the client adapters (:mod:`forge_rt.clients`) write requests
and read replies and streams; the proxy (:mod:`forge_rt.proxy`) reads requests and writes
replies and streams. The package sits above ``core`` and below both, and knows nothing about
HTTP transport, retries or the runtime; every function and class is pure.

Outbound (a client's side): ``*_request_to_wire`` (and ``*_messages_to_wire``,
``*_tools_to_wire``) build request bodies; ``*_response_from_wire`` and the ``*StreamDecoder``
classes read replies, raising :class:`~forge_rt.errors.BackendError` for a body that is not
the protocol's shape (:func:`malformed_error`, :func:`in_band_error`).

Inbound (a server's side): :func:`openai_request_from_wire`, :func:`anthropic_request_from_wire`
and :func:`anthropic_count_tokens_from_wire` decode a body **once**, against the API's strict
schema (:class:`OpenAIRequest`, :class:`AnthropicRequest`: unknown fields are refused with
msgspec's located message), and convert those structs into a :class:`WireRequest`. A tool list
stays raw JSON until it is needed, so a server's :class:`ToolMemo` can return the tools it
built from the same bytes before. ``*_response_to_wire`` and the ``*StreamEncoder`` classes
write the answer.

Shared: the SSE codec (:class:`SSEDecoder`, :func:`encode_sse`), the ``<think>`` splitter
(:class:`ThinkSplitter`, :func:`split_think`), tool-call assembly by index
(:class:`ToolCallAssembler`), and prompt-injected tool calling for templates without tool
support (:func:`prompt_mode_messages`, :func:`render_tool_prompt`); llama-server's raw
``/completion`` (:func:`completion_body`, :class:`CompletionStreamDecoder`), which generates a
chat request from its rendered prompt so a cut reply resumes from its exact tokens.
"""

from forge_rt.wire._anthropic_reply import (
    anthropic_response_from_wire as anthropic_response_from_wire,
)
from forge_rt.wire._anthropic_reply import (
    anthropic_response_to_wire as anthropic_response_to_wire,
)
from forge_rt.wire._anthropic_request import UNANSWERED_CALL_TEXT as UNANSWERED_CALL_TEXT
from forge_rt.wire._anthropic_request import (
    anthropic_count_tokens_from_wire as anthropic_count_tokens_from_wire,
)
from forge_rt.wire._anthropic_request import (
    anthropic_messages_from_wire as anthropic_messages_from_wire,
)
from forge_rt.wire._anthropic_request import (
    anthropic_messages_to_wire as anthropic_messages_to_wire,
)
from forge_rt.wire._anthropic_request import (
    anthropic_request_from_wire as anthropic_request_from_wire,
)
from forge_rt.wire._anthropic_request import (
    anthropic_request_to_wire as anthropic_request_to_wire,
)
from forge_rt.wire._anthropic_request import anthropic_tools_to_wire as anthropic_tools_to_wire
from forge_rt.wire._anthropic_schema import AnthropicCountTokens as AnthropicCountTokens
from forge_rt.wire._anthropic_schema import AnthropicRequest as AnthropicRequest
from forge_rt.wire._anthropic_stream import AnthropicStreamDecoder as AnthropicStreamDecoder
from forge_rt.wire._anthropic_stream import AnthropicStreamEncoder as AnthropicStreamEncoder
from forge_rt.wire._faults import BODY_KEEP_CHARS as BODY_KEEP_CHARS
from forge_rt.wire._faults import in_band_error as in_band_error
from forge_rt.wire._faults import malformed_error as malformed_error
from forge_rt.wire._llama_completion import CompletionPiece as CompletionPiece
from forge_rt.wire._llama_completion import CompletionStreamDecoder as CompletionStreamDecoder
from forge_rt.wire._llama_completion import PromptPart as PromptPart
from forge_rt.wire._llama_completion import completion_body as completion_body
from forge_rt.wire._llama_completion import completion_from_wire as completion_from_wire
from forge_rt.wire._ollama import OllamaStreamDecoder as OllamaStreamDecoder
from forge_rt.wire._ollama import ollama_messages_to_wire as ollama_messages_to_wire
from forge_rt.wire._ollama import ollama_request_to_wire as ollama_request_to_wire
from forge_rt.wire._ollama import ollama_response_from_wire as ollama_response_from_wire
from forge_rt.wire._ollama import ollama_tools_to_wire as ollama_tools_to_wire
from forge_rt.wire._openai_reply import openai_response_from_wire as openai_response_from_wire
from forge_rt.wire._openai_reply import openai_response_to_wire as openai_response_to_wire
from forge_rt.wire._openai_request import OpenAIDialect as OpenAIDialect
from forge_rt.wire._openai_request import openai_messages_from_wire as openai_messages_from_wire
from forge_rt.wire._openai_request import openai_messages_to_wire as openai_messages_to_wire
from forge_rt.wire._openai_request import openai_request_from_wire as openai_request_from_wire
from forge_rt.wire._openai_request import openai_request_to_wire as openai_request_to_wire
from forge_rt.wire._openai_request import openai_tools_to_wire as openai_tools_to_wire
from forge_rt.wire._openai_schema import OpenAIRequest as OpenAIRequest
from forge_rt.wire._openai_stream import OpenAIStreamDecoder as OpenAIStreamDecoder
from forge_rt.wire._openai_stream import OpenAIStreamEncoder as OpenAIStreamEncoder
from forge_rt.wire._prompt_tools import prompt_mode_messages as prompt_mode_messages
from forge_rt.wire._prompt_tools import render_tool_prompt as render_tool_prompt
from forge_rt.wire._reply import ToolCallAssembler as ToolCallAssembler
from forge_rt.wire._request import ToolMemo as ToolMemo
from forge_rt.wire._request import WireRequest as WireRequest
from forge_rt.wire._request import WireTools as WireTools
from forge_rt.wire._sse import SSEDecoder as SSEDecoder
from forge_rt.wire._sse import SSEEvent as SSEEvent
from forge_rt.wire._sse import encode_sse as encode_sse
from forge_rt.wire._think import ThinkSplitter as ThinkSplitter
from forge_rt.wire._think import split_think as split_think

__all__ = [
    "BODY_KEEP_CHARS",
    "UNANSWERED_CALL_TEXT",
    "AnthropicCountTokens",
    "AnthropicRequest",
    "AnthropicStreamDecoder",
    "AnthropicStreamEncoder",
    "CompletionPiece",
    "CompletionStreamDecoder",
    "OllamaStreamDecoder",
    "OpenAIDialect",
    "OpenAIRequest",
    "OpenAIStreamDecoder",
    "OpenAIStreamEncoder",
    "PromptPart",
    "SSEDecoder",
    "SSEEvent",
    "ThinkSplitter",
    "ToolCallAssembler",
    "ToolMemo",
    "WireRequest",
    "WireTools",
    "anthropic_count_tokens_from_wire",
    "anthropic_messages_from_wire",
    "anthropic_messages_to_wire",
    "anthropic_request_from_wire",
    "anthropic_request_to_wire",
    "anthropic_response_from_wire",
    "anthropic_response_to_wire",
    "anthropic_tools_to_wire",
    "completion_body",
    "completion_from_wire",
    "encode_sse",
    "in_band_error",
    "malformed_error",
    "ollama_messages_to_wire",
    "ollama_request_to_wire",
    "ollama_response_from_wire",
    "ollama_tools_to_wire",
    "openai_messages_from_wire",
    "openai_messages_to_wire",
    "openai_request_from_wire",
    "openai_request_to_wire",
    "openai_response_from_wire",
    "openai_response_to_wire",
    "openai_tools_to_wire",
    "prompt_mode_messages",
    "render_tool_prompt",
    "split_think",
]
