"""Backend adapters: one per protocol, all speaking :class:`~forge_rt.core.LLMClient`.

The inference data model they implement (requests, responses, stream chunks, capabilities,
output constraints, sampling) lives in :mod:`forge_rt.core`, below the adapters, so that the
guardrails, the context manager and the runtime depend on it and not on any adapter.

Adapters: :class:`OpenAICompatClient`, :class:`LlamaServerClient` (also llamafile),
:class:`OllamaClient`, :class:`VLLMClient`, :class:`AnthropicClient`; :func:`make_client` picks
one by name. The wire conversions they use are public too, in both directions, so a server
(the proxy) can read OpenAI / Anthropic requests into :class:`~forge_rt.core.Message` s and write
:class:`~forge_rt.core.LLMResponse` s back as response bodies and SSE events.
"""

from forge_rt.clients._anthropic import AnthropicClient as AnthropicClient
from forge_rt.clients._anthropic_wire import UNANSWERED_CALL_TEXT as UNANSWERED_CALL_TEXT
from forge_rt.clients._anthropic_wire import AnthropicStreamDecoder as AnthropicStreamDecoder
from forge_rt.clients._anthropic_wire import AnthropicStreamEncoder as AnthropicStreamEncoder
from forge_rt.clients._anthropic_wire import (
    anthropic_messages_from_wire as anthropic_messages_from_wire,
)
from forge_rt.clients._anthropic_wire import (
    anthropic_messages_to_wire as anthropic_messages_to_wire,
)
from forge_rt.clients._anthropic_wire import (
    anthropic_request_from_wire as anthropic_request_from_wire,
)
from forge_rt.clients._anthropic_wire import (
    anthropic_request_to_wire as anthropic_request_to_wire,
)
from forge_rt.clients._anthropic_wire import (
    anthropic_response_from_wire as anthropic_response_from_wire,
)
from forge_rt.clients._anthropic_wire import (
    anthropic_response_to_wire as anthropic_response_to_wire,
)
from forge_rt.clients._anthropic_wire import anthropic_tools_from_wire as anthropic_tools_from_wire
from forge_rt.clients._anthropic_wire import anthropic_tools_to_wire as anthropic_tools_to_wire
from forge_rt.clients._cancel_safe import CancelSafeTransport as CancelSafeTransport
from forge_rt.clients._cancel_safe import cancel_safe_transport as cancel_safe_transport
from forge_rt.clients._factory import ClientKind as ClientKind
from forge_rt.clients._factory import make_client as make_client
from forge_rt.clients._faults import AUTO_RETRY_KINDS as AUTO_RETRY_KINDS
from forge_rt.clients._http import HTTPClient as HTTPClient
from forge_rt.clients._llamaserver import LlamaServerClient as LlamaServerClient
from forge_rt.clients._llamaserver import LlamaServerProps as LlamaServerProps
from forge_rt.clients._llamaserver import SlotState as SlotState
from forge_rt.clients._ollama import OllamaClient as OllamaClient
from forge_rt.clients._ollama_wire import OllamaStreamDecoder as OllamaStreamDecoder
from forge_rt.clients._ollama_wire import ollama_messages_to_wire as ollama_messages_to_wire
from forge_rt.clients._ollama_wire import ollama_request_to_wire as ollama_request_to_wire
from forge_rt.clients._ollama_wire import ollama_response_from_wire as ollama_response_from_wire
from forge_rt.clients._openai import OpenAICompatClient as OpenAICompatClient
from forge_rt.clients._openai_wire import OpenAIDialect as OpenAIDialect
from forge_rt.clients._openai_wire import OpenAIStreamDecoder as OpenAIStreamDecoder
from forge_rt.clients._openai_wire import OpenAIStreamEncoder as OpenAIStreamEncoder
from forge_rt.clients._openai_wire import openai_messages_from_wire as openai_messages_from_wire
from forge_rt.clients._openai_wire import openai_messages_to_wire as openai_messages_to_wire
from forge_rt.clients._openai_wire import openai_request_from_wire as openai_request_from_wire
from forge_rt.clients._openai_wire import openai_request_to_wire as openai_request_to_wire
from forge_rt.clients._openai_wire import openai_response_from_wire as openai_response_from_wire
from forge_rt.clients._openai_wire import openai_response_to_wire as openai_response_to_wire
from forge_rt.clients._openai_wire import openai_tools_from_wire as openai_tools_from_wire
from forge_rt.clients._openai_wire import openai_tools_to_wire as openai_tools_to_wire
from forge_rt.clients._prompt_tools import render_tool_prompt as render_tool_prompt
from forge_rt.clients._sampling import known_models as known_models
from forge_rt.clients._sampling import sampling_defaults as sampling_defaults
from forge_rt.clients._sse import SSEDecoder as SSEDecoder
from forge_rt.clients._sse import SSEEvent as SSEEvent
from forge_rt.clients._sse import encode_sse as encode_sse
from forge_rt.clients._think import ThinkSplitter as ThinkSplitter
from forge_rt.clients._think import split_think as split_think
from forge_rt.clients._vllm import VLLMClient as VLLMClient
from forge_rt.clients._wire_common import ToolCallAssembler as ToolCallAssembler
from forge_rt.clients._wire_common import WireRequest as WireRequest

__all__ = [
    "AUTO_RETRY_KINDS",
    "UNANSWERED_CALL_TEXT",
    "AnthropicClient",
    "AnthropicStreamDecoder",
    "AnthropicStreamEncoder",
    "CancelSafeTransport",
    "ClientKind",
    "HTTPClient",
    "LlamaServerClient",
    "LlamaServerProps",
    "OllamaClient",
    "OllamaStreamDecoder",
    "OpenAICompatClient",
    "OpenAIDialect",
    "OpenAIStreamDecoder",
    "OpenAIStreamEncoder",
    "SSEDecoder",
    "SSEEvent",
    "SlotState",
    "ThinkSplitter",
    "ToolCallAssembler",
    "VLLMClient",
    "WireRequest",
    "anthropic_messages_from_wire",
    "anthropic_messages_to_wire",
    "anthropic_request_from_wire",
    "anthropic_request_to_wire",
    "anthropic_response_from_wire",
    "anthropic_response_to_wire",
    "anthropic_tools_from_wire",
    "anthropic_tools_to_wire",
    "cancel_safe_transport",
    "encode_sse",
    "known_models",
    "make_client",
    "ollama_messages_to_wire",
    "ollama_request_to_wire",
    "ollama_response_from_wire",
    "openai_messages_from_wire",
    "openai_messages_to_wire",
    "openai_request_from_wire",
    "openai_request_to_wire",
    "openai_response_from_wire",
    "openai_response_to_wire",
    "openai_tools_from_wire",
    "openai_tools_to_wire",
    "render_tool_prompt",
    "sampling_defaults",
    "split_think",
]
