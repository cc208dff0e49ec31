"""Messages, tool calls and text responses: the typed data that flows through every loop.

These are msgspec structs because they sit on the hot path (every inference serialises the whole
history). The compaction tag (`MessageType`) travels with each message; wire serialisation strips
it and lives with the client adapters.
"""

from __future__ import annotations

import enum
import uuid
from typing import Any

import msgspec

__all__ = [
    "Message",
    "MessageType",
    "Role",
    "TextResponse",
    "ToolCall",
    "new_call_id",
]


class Role(enum.StrEnum):
    """Who speaks a message on the chat wire."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class MessageType(enum.StrEnum):
    """What a message is for; compaction decides what to cut by this tag."""

    SYSTEM_PROMPT = "system_prompt"
    USER_INPUT = "user_input"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    REASONING = "reasoning"
    TEXT_RESPONSE = "text_response"
    STEP_NUDGE = "step_nudge"
    PREREQUISITE_NUDGE = "prerequisite_nudge"
    RETRY_NUDGE = "retry_nudge"
    SUMMARY = "summary"
    CONTEXT_WARNING = "context_warning"


# Which roles each message type may be spoken in. Nudges that point at a failed call travel on
# the tool channel (paired with the call); a retry nudge after bare text travels as a user turn.
_ALLOWED_ROLES: dict[MessageType, frozenset[Role]] = {
    MessageType.SYSTEM_PROMPT: frozenset({Role.SYSTEM}),
    MessageType.USER_INPUT: frozenset({Role.USER}),
    MessageType.TOOL_CALL: frozenset({Role.ASSISTANT}),
    MessageType.TOOL_RESULT: frozenset({Role.TOOL}),
    MessageType.REASONING: frozenset({Role.ASSISTANT}),
    MessageType.TEXT_RESPONSE: frozenset({Role.ASSISTANT}),
    MessageType.STEP_NUDGE: frozenset({Role.TOOL, Role.USER}),
    MessageType.PREREQUISITE_NUDGE: frozenset({Role.TOOL, Role.USER}),
    MessageType.RETRY_NUDGE: frozenset({Role.USER, Role.TOOL}),
    MessageType.SUMMARY: frozenset({Role.SYSTEM, Role.USER}),
    MessageType.CONTEXT_WARNING: frozenset({Role.SYSTEM, Role.USER}),
}


def new_call_id() -> str:
    """A fresh tool-call id, unique across turns and sessions."""
    return f"call_{uuid.uuid4().hex[:24]}"


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One call of a tool by the model: name, arguments, the id that pairs it with its result."""

    tool: str
    args: dict[str, Any] = msgspec.field(default_factory=dict)
    call_id: str = msgspec.field(default_factory=new_call_id)
    reasoning: str | None = None

    def __post_init__(self) -> None:
        if not self.tool:
            raise ValueError("ToolCall.tool must be a non-empty tool name")
        if not self.call_id:
            raise ValueError("ToolCall.call_id must be non-empty; omit it to get a fresh id")


class TextResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A model reply that is not a tool call: prose, an answer, or garbage to be rescued."""

    content: str
    reasoning: str | None = None


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a conversation, tagged for compaction.

    Invariants checked at construction: the role fits the type; only assistant messages carry
    ``tool_calls``; a tool message names the call it answers (``tool_call_id``). ``transient``
    marks messages (nudges, failed attempts) that a long-running session keeps out of its
    persisted history.
    """

    role: Role
    content: str
    type: MessageType
    tool_calls: tuple[ToolCall, ...] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    step_index: int | None = None
    transient: bool = False
    token_estimate: int | None = None

    def __post_init__(self) -> None:
        allowed = _ALLOWED_ROLES[self.type]
        if self.role not in allowed:
            roles = ", ".join(sorted(r.value for r in allowed))
            raise ValueError(
                f"a {self.type.value} message must have role {roles}, got {self.role.value}"
            )
        if self.tool_calls is not None:
            if self.role is not Role.ASSISTANT:
                raise ValueError("only assistant messages may carry tool_calls")
            if not self.tool_calls:
                raise ValueError("tool_calls must be None or non-empty")
        if self.role is Role.TOOL and not self.tool_call_id:
            raise ValueError("a tool message must name the call it answers (tool_call_id)")
        if self.type is MessageType.TOOL_CALL and not self.tool_calls:
            raise ValueError("a tool_call message must carry at least one ToolCall")

    # Named constructors keep call sites short and the role/type pairing right.

    @classmethod
    def system(cls, content: str) -> Message:
        """The system prompt."""
        return cls(role=Role.SYSTEM, content=content, type=MessageType.SYSTEM_PROMPT)

    @classmethod
    def user(cls, content: str) -> Message:
        """A user turn."""
        return cls(role=Role.USER, content=content, type=MessageType.USER_INPUT)

    @classmethod
    def assistant_calls(
        cls, calls: tuple[ToolCall, ...] | list[ToolCall], *, content: str = "", **kw: Any
    ) -> Message:
        """An assistant turn that calls one or more tools."""
        return cls(
            role=Role.ASSISTANT,
            content=content,
            type=MessageType.TOOL_CALL,
            tool_calls=tuple(calls),
            **kw,
        )

    @classmethod
    def tool_result(cls, call: ToolCall, content: str, **kw: Any) -> Message:
        """The result of ``call``, on the tool channel."""
        return cls(
            role=Role.TOOL,
            content=content,
            type=MessageType.TOOL_RESULT,
            tool_call_id=call.call_id,
            tool_name=call.tool,
            **kw,
        )

    @classmethod
    def assistant_text(cls, content: str, **kw: Any) -> Message:
        """An assistant reply in plain text (a final answer, or a failed attempt)."""
        return cls(role=Role.ASSISTANT, content=content, type=MessageType.TEXT_RESPONSE, **kw)

    def with_content(self, content: str) -> Message:
        """A copy with new content (compaction truncates results this way)."""
        return msgspec.structs.replace(self, content=content, token_estimate=None)
