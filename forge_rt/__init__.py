"""forge_rt: a trio-native runtime that makes self-hosted LLM tool-calling reliable.

Three ways in share one guardrail core: the runtime (``WorkflowRunner``, actors), an OpenAI- and
Anthropic-compatible proxy, and the ``Guardrails`` middleware for loops you own.
"""

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
from forge_rt.errors import ForgeError as ForgeError
from forge_rt.guardrails import Guardrails as Guardrails

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "ForgeError",
    "Guardrails",
    "Message",
    "MessageType",
    "Prerequisite",
    "Role",
    "StepTracker",
    "TextResponse",
    "ToolCall",
    "ToolDef",
    "ToolSpec",
    "Workflow",
    "__version__",
]
