"""The typed data every part of forge_rt shares: messages, tool calls, tools, workflows, steps."""

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
    "RESPOND_TOOL_NAME",
    "ArgumentError",
    "ConstrainMode",
    "Message",
    "MessageType",
    "Prerequisite",
    "Role",
    "StepTracker",
    "TextResponse",
    "ToolArgumentError",
    "ToolCall",
    "ToolDef",
    "ToolSpec",
    "Workflow",
    "model_from_json_schema",
    "new_call_id",
]
