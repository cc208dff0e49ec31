"""forge_rt: a trio-native runtime that makes self-hosted LLM tool-calling reliable.

Three ways in share one guardrail core: the runtime (``WorkflowRunner``, ``Session``, actors), an
OpenAI- and Anthropic-compatible proxy (``forge-rt proxy``), and the ``Guardrails`` middleware
for loops you own. The most used names are re-exported here; each subpackage has the rest.
"""

from forge_rt.clients import AnthropicClient as AnthropicClient
from forge_rt.clients import LlamaServerClient as LlamaServerClient
from forge_rt.clients import OllamaClient as OllamaClient
from forge_rt.clients import OpenAICompatClient as OpenAICompatClient
from forge_rt.clients import VLLMClient as VLLMClient
from forge_rt.context import ContextManager as ContextManager
from forge_rt.context import NoCompact as NoCompact
from forge_rt.context import SlidingWindowCompact as SlidingWindowCompact
from forge_rt.context import TieredCompact as TieredCompact
from forge_rt.context import TokenEstimator as TokenEstimator
from forge_rt.core import Capability as Capability
from forge_rt.core import Message as Message
from forge_rt.core import MessageType as MessageType
from forge_rt.core import Prerequisite as Prerequisite
from forge_rt.core import Role as Role
from forge_rt.core import StepTracker as StepTracker
from forge_rt.core import TextResponse as TextResponse
from forge_rt.core import ToolCall as ToolCall
from forge_rt.core import ToolDef as ToolDef
from forge_rt.core import ToolSpec as ToolSpec
from forge_rt.core import Workflow as Workflow
from forge_rt.errors import BackendError as BackendError
from forge_rt.errors import BackendFailureError as BackendFailureError
from forge_rt.errors import BudgetExhaustedError as BudgetExhaustedError
from forge_rt.errors import ConfigurationError as ConfigurationError
from forge_rt.errors import ForgeError as ForgeError
from forge_rt.guardrails import Allow as Allow
from forge_rt.guardrails import Approve as Approve
from forge_rt.guardrails import Deny as Deny
from forge_rt.guardrails import Guardrails as Guardrails
from forge_rt.guardrails import Policy as Policy
from forge_rt.runtime import ApprovalRequest as ApprovalRequest
from forge_rt.runtime import PreemptPolicy as PreemptPolicy
from forge_rt.runtime import Session as Session
from forge_rt.runtime import SessionLease as SessionLease
from forge_rt.runtime import SlotPool as SlotPool
from forge_rt.runtime import SlotWorker as SlotWorker
from forge_rt.runtime import WorkflowResult as WorkflowResult
from forge_rt.runtime import WorkflowRunner as WorkflowRunner

__version__ = "0.1.0"

__all__ = [
    "Allow",
    "AnthropicClient",
    "ApprovalRequest",
    "Approve",
    "BackendError",
    "BackendFailureError",
    "BudgetExhaustedError",
    "Capability",
    "ConfigurationError",
    "ContextManager",
    "Deny",
    "ForgeError",
    "Guardrails",
    "LlamaServerClient",
    "Message",
    "MessageType",
    "NoCompact",
    "OllamaClient",
    "OpenAICompatClient",
    "Policy",
    "PreemptPolicy",
    "Prerequisite",
    "Role",
    "Session",
    "SessionLease",
    "SlidingWindowCompact",
    "SlotPool",
    "SlotWorker",
    "StepTracker",
    "TextResponse",
    "TieredCompact",
    "TokenEstimator",
    "ToolCall",
    "ToolDef",
    "ToolSpec",
    "VLLMClient",
    "Workflow",
    "WorkflowResult",
    "WorkflowRunner",
    "__version__",
]
