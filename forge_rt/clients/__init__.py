"""Backend adapters: one per protocol, all speaking :class:`~forge_rt.clients.base.LLMClient`."""

from forge_rt.clients.base import ClientCapabilities as ClientCapabilities
from forge_rt.clients.base import FinalChunk as FinalChunk
from forge_rt.clients.base import GrammarConstraint as GrammarConstraint
from forge_rt.clients.base import InferenceRequest as InferenceRequest
from forge_rt.clients.base import JsonSchemaConstraint as JsonSchemaConstraint
from forge_rt.clients.base import LLMClient as LLMClient
from forge_rt.clients.base import LLMResponse as LLMResponse
from forge_rt.clients.base import OutputConstraint as OutputConstraint
from forge_rt.clients.base import ReasoningDeltaChunk as ReasoningDeltaChunk
from forge_rt.clients.base import ResetChunk as ResetChunk
from forge_rt.clients.base import Sampling as Sampling
from forge_rt.clients.base import StreamChunk as StreamChunk
from forge_rt.clients.base import TextDeltaChunk as TextDeltaChunk
from forge_rt.clients.base import Timings as Timings
from forge_rt.clients.base import ToolCallDeltaChunk as ToolCallDeltaChunk
from forge_rt.clients.base import ToolChoice as ToolChoice
from forge_rt.clients.base import Usage as Usage

__all__ = [
    "ClientCapabilities",
    "FinalChunk",
    "GrammarConstraint",
    "InferenceRequest",
    "JsonSchemaConstraint",
    "LLMClient",
    "LLMResponse",
    "OutputConstraint",
    "ReasoningDeltaChunk",
    "ResetChunk",
    "Sampling",
    "StreamChunk",
    "TextDeltaChunk",
    "Timings",
    "ToolCallDeltaChunk",
    "ToolChoice",
    "Usage",
]
