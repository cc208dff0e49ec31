"""The typed data every part of forge_rt shares: messages, tool calls, tools, workflows, steps,
and the inference data model (requests, responses, stream chunks, capabilities, output
constraints, sampling, the ``LLMClient`` protocol) that the client adapters implement and the
guardrails, context and runtime read."""

from forge_rt.core._capabilities import ALL_CAPABILITIES as ALL_CAPABILITIES
from forge_rt.core._capabilities import Capability as Capability
from forge_rt.core._inference import TOKEN_LIMIT_REASONS as TOKEN_LIMIT_REASONS
from forge_rt.core._inference import BackendChunk as BackendChunk
from forge_rt.core._inference import ClientCapabilities as ClientCapabilities
from forge_rt.core._inference import FinalChunk as FinalChunk
from forge_rt.core._inference import GrammarConstraint as GrammarConstraint
from forge_rt.core._inference import InferenceRequest as InferenceRequest
from forge_rt.core._inference import JsonSchemaConstraint as JsonSchemaConstraint
from forge_rt.core._inference import LLMClient as LLMClient
from forge_rt.core._inference import LLMResponse as LLMResponse
from forge_rt.core._inference import OutputConstraint as OutputConstraint
from forge_rt.core._inference import PromptProgressChunk as PromptProgressChunk
from forge_rt.core._inference import ReasoningDeltaChunk as ReasoningDeltaChunk
from forge_rt.core._inference import ResetChunk as ResetChunk
from forge_rt.core._inference import Sampling as Sampling
from forge_rt.core._inference import StreamChunk as StreamChunk
from forge_rt.core._inference import TextDeltaChunk as TextDeltaChunk
from forge_rt.core._inference import Timings as Timings
from forge_rt.core._inference import ToolCallDeltaChunk as ToolCallDeltaChunk
from forge_rt.core._inference import ToolChoice as ToolChoice
from forge_rt.core._inference import Usage as Usage
from forge_rt.core._messages import Message as Message
from forge_rt.core._messages import MessageType as MessageType
from forge_rt.core._messages import Role as Role
from forge_rt.core._messages import TextResponse as TextResponse
from forge_rt.core._messages import ToolCall as ToolCall
from forge_rt.core._messages import new_call_id as new_call_id
from forge_rt.core._schema import model_from_json_schema as model_from_json_schema
from forge_rt.core._steps import StepTracker as StepTracker
from forge_rt.core._tools import ArgumentError as ArgumentError
from forge_rt.core._tools import Prerequisite as Prerequisite
from forge_rt.core._tools import ToolArgumentError as ToolArgumentError
from forge_rt.core._tools import ToolDef as ToolDef
from forge_rt.core._tools import ToolSpec as ToolSpec
from forge_rt.core._workflow import RESPOND_TOOL_NAME as RESPOND_TOOL_NAME
from forge_rt.core._workflow import ConstrainMode as ConstrainMode
from forge_rt.core._workflow import Workflow as Workflow

__all__ = [
    "ALL_CAPABILITIES",
    "RESPOND_TOOL_NAME",
    "TOKEN_LIMIT_REASONS",
    "ArgumentError",
    "BackendChunk",
    "Capability",
    "ClientCapabilities",
    "ConstrainMode",
    "FinalChunk",
    "GrammarConstraint",
    "InferenceRequest",
    "JsonSchemaConstraint",
    "LLMClient",
    "LLMResponse",
    "Message",
    "MessageType",
    "OutputConstraint",
    "Prerequisite",
    "PromptProgressChunk",
    "ReasoningDeltaChunk",
    "ResetChunk",
    "Role",
    "Sampling",
    "StepTracker",
    "StreamChunk",
    "TextDeltaChunk",
    "TextResponse",
    "Timings",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallDeltaChunk",
    "ToolChoice",
    "ToolDef",
    "ToolSpec",
    "Usage",
    "Workflow",
    "model_from_json_schema",
    "new_call_id",
]
