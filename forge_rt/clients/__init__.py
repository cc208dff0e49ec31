"""Backend adapters: one per protocol, all speaking :class:`~forge_rt.core.LLMClient`.

The inference data model they implement (requests, responses, stream chunks, capabilities,
output constraints, sampling) lives in :mod:`forge_rt.core`, below the adapters, so that the
guardrails, the context manager and the runtime depend on it and not on any adapter. The wire
formats they speak live in :mod:`forge_rt.wire`, shared with the proxy, which reads and writes
the same formats the other way round.

Adapters: :class:`OpenAICompatClient`, :class:`LlamaServerClient` (also llamafile),
:class:`OllamaClient`, :class:`VLLMClient`, :class:`AnthropicClient`; :func:`make_client` picks
one by name. What they add to the wire codecs is the transport: connection pooling,
deadlines, stall detection, cancellation-safe request bodies, and the translation of every
transport and HTTP fault into a typed :class:`~forge_rt.errors.BackendError`.
"""

from forge_rt.clients._anthropic import AnthropicClient as AnthropicClient
from forge_rt.clients._cancel_safe import CancelSafeTransport as CancelSafeTransport
from forge_rt.clients._cancel_safe import cancel_safe_transport as cancel_safe_transport
from forge_rt.clients._factory import ClientKind as ClientKind
from forge_rt.clients._factory import make_client as make_client
from forge_rt.clients._faults import AUTO_RETRY_KINDS as AUTO_RETRY_KINDS
from forge_rt.clients._http import HTTPClient as HTTPClient
from forge_rt.clients._llamaserver import Generation as Generation
from forge_rt.clients._llamaserver import LlamaServerClient as LlamaServerClient
from forge_rt.clients._llamaserver import LlamaServerProps as LlamaServerProps
from forge_rt.clients._llamaserver import SlotState as SlotState
from forge_rt.clients._ollama import OllamaClient as OllamaClient
from forge_rt.clients._openai import OpenAICompatClient as OpenAICompatClient
from forge_rt.clients._sampling import known_models as known_models
from forge_rt.clients._sampling import sampling_defaults as sampling_defaults
from forge_rt.clients._vllm import VLLMClient as VLLMClient

__all__ = [
    "AUTO_RETRY_KINDS",
    "AnthropicClient",
    "CancelSafeTransport",
    "ClientKind",
    "Generation",
    "HTTPClient",
    "LlamaServerClient",
    "LlamaServerProps",
    "OllamaClient",
    "OpenAICompatClient",
    "SlotState",
    "VLLMClient",
    "cancel_safe_transport",
    "known_models",
    "make_client",
    "sampling_defaults",
]
