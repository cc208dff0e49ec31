"""The Anthropic Messages wire format (``POST /v1/messages``), streamed and not.

Tool results in user turns become tool messages, ``tool_use`` blocks become tool calls, thinking
blocks become reasoning, so the same engine and chat template serve it. Streams use Anthropic's
named SSE events: ``message_start``, ``content_block_start`` / ``content_block_delta``
(``text_delta``, ``thinking_delta``, ``input_json_delta``) / ``content_block_stop``,
``message_delta`` and ``message_stop``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from forge_rt.backends.sim._codec import build_view, decode_body
from forge_rt.backends.sim._generation import Generation, Unit, UnitKind
from forge_rt.backends.sim._view import Api, RequestView, ViewMessage, ViewTool, ViewToolCall

__all__ = ["AnthropicCodec"]

_encode = msgspec.json.Encoder().encode

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_ERROR_TYPES = {
    "server_error": "api_error",
    "unavailable_error": "overloaded_error",
    "exceed_context_size_error": "invalid_request_error",
    "not_found_error": "not_found_error",
}


class _Block(msgspec.Struct):
    type: str
    text: str = ""
    thinking: str = ""
    id: str = ""
    name: str = ""
    input: dict[str, Any] | None = None
    tool_use_id: str = ""
    content: str | list[_Block] | None = None


class _Message(msgspec.Struct):
    role: str
    content: str | list[_Block]


class _Tool(msgspec.Struct):
    name: str
    description: str = ""
    input_schema: dict[str, Any] = msgspec.field(default_factory=dict)


class _ToolChoice(msgspec.Struct):
    type: str
    name: str | None = None


class _OutputFormat(msgspec.Struct):
    type: str
    schema: dict[str, Any] | None = None


class _Request(msgspec.Struct):
    messages: list[_Message]
    model: str = ""
    max_tokens: int | None = None
    system: str | list[_Block] | None = None
    tools: list[_Tool] | None = None
    tool_choice: _ToolChoice | None = None
    stream: bool = False
    output_format: _OutputFormat | None = None


def _text(content: str | list[_Block] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(b.text for b in content if b.type == "text")


def _messages(request: _Request) -> list[ViewMessage]:
    out: list[ViewMessage] = []
    if request.system:
        out.append(ViewMessage(role="system", content=_text(request.system)))
    for message in request.messages:
        if isinstance(message.content, str):
            out.append(ViewMessage(role=message.role, content=message.content))
            continue
        blocks = message.content
        if message.role == "assistant":
            thinking = "".join(b.thinking for b in blocks if b.type == "thinking")
            calls = tuple(
                ViewToolCall(b.id, b.name, _encode(b.input or {}).decode())
                for b in blocks
                if b.type == "tool_use"
            )
            out.append(
                ViewMessage(
                    role="assistant",
                    content=_text(blocks),
                    tool_calls=calls,
                    reasoning=thinking or None,
                )
            )
            continue
        out.extend(
            ViewMessage(role="tool", content=_text(b.content), tool_call_id=b.tool_use_id)
            for b in blocks
            if b.type == "tool_result"
        )
        if any(b.type != "tool_result" for b in blocks):
            out.append(ViewMessage(role=message.role, content=_text(blocks)))
    return out


def _tool_choice(choice: _ToolChoice | None) -> str | None:
    if choice is None:
        return None
    if choice.type == "tool" and choice.name:
        return choice.name
    return {"any": "required"}.get(choice.type, choice.type)


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + _encode(payload) + b"\n\n"


def _usage(gen: Generation) -> dict[str, int]:
    return {
        "input_tokens": gen.prompt_tokens - gen.cached_tokens,
        "cache_read_input_tokens": gen.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": gen.completion_tokens,
    }


class AnthropicCodec:
    """``POST /v1/messages`` requests and responses."""

    api: Api = "anthropic"
    stream_content_type = "text/event-stream"
    id_prefix = "msg_"

    def parse(self, body: bytes, headers: Mapping[str, str]) -> RequestView:
        request: _Request = decode_body(body, _Request, "Anthropic messages")
        fmt = request.output_format
        constrained = fmt is not None and fmt.type == "json_schema"
        return build_view(
            "anthropic",
            _messages(request),
            headers,
            tools=tuple(
                ViewTool(name=t.name, description=t.description, parameters=t.input_schema)
                for t in request.tools or ()
            ),
            tool_choice=_tool_choice(request.tool_choice),
            constraint="output_format" if constrained else None,
            schema=fmt.schema if fmt is not None and constrained else None,
            max_tokens=request.max_tokens,
            stream=request.stream,
        )

    def authorised(self, headers: Mapping[str, str], api_key: str) -> bool:
        return headers.get("x-api-key") == api_key

    def error(self, status: int, message: str, kind: str) -> bytes:
        kind = _ERROR_TYPES.get(kind, kind)
        return _encode({"type": "error", "error": {"type": kind, "message": message}})

    def response(self, generation: Generation) -> bytes:
        content: list[dict[str, Any]] = []
        if generation.reasoning:
            content.append(
                {"type": "thinking", "thinking": generation.reasoning, "signature": "sim"}
            )
        calls, raw = generation.object_calls()
        if generation.content or raw:
            content.append({"type": "text", "text": generation.content + raw})
        content += [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, name, args in calls
        ]
        return _encode(
            {
                "id": generation.id,
                "type": "message",
                "role": "assistant",
                "model": generation.model,
                "content": content,
                "stop_reason": _STOP_REASONS.get(generation.finish_reason, "end_turn"),
                "stop_sequence": None,
                "usage": _usage(generation),
            }
        )

    def encoder(self, generation: Generation, view: RequestView) -> _Encoder:
        return _Encoder(generation)


class _Encoder:
    def __init__(self, generation: Generation) -> None:
        self._gen = generation
        self._index = -1
        self._open: UnitKind | None = None

    def progress(self, *, total: int, cached: int, processed: int) -> list[bytes]:
        return []  # the Anthropic API reports nothing while it reads the prompt

    def open(self) -> list[bytes]:
        gen = self._gen
        message: dict[str, Any] = {
            "id": gen.id,
            "type": "message",
            "role": "assistant",
            "model": gen.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**_usage(gen), "output_tokens": 0},
        }
        return [_event("message_start", {"type": "message_start", "message": message})]

    def _stop_block(self) -> list[bytes]:
        if self._open is None:
            return []
        events = []
        if self._open is UnitKind.REASONING:
            delta = {"type": "signature_delta", "signature": "sim"}
            events.append(self._delta(delta))
        self._open = None
        stop = {"type": "content_block_stop", "index": self._index}
        return [*events, _event("content_block_stop", stop)]

    def _start_block(self, kind: UnitKind, block: dict[str, Any]) -> list[bytes]:
        events = self._stop_block()
        self._index += 1
        self._open = kind
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        return [*events, _event("content_block_start", start)]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        payload = {"type": "content_block_delta", "index": self._index, "delta": delta}
        return _event("content_block_delta", payload)

    def delta(self, unit: Unit) -> list[bytes]:
        kind = unit.kind
        events: list[bytes] = []
        if kind is UnitKind.REASONING:
            if self._open is not UnitKind.REASONING:
                events += self._start_block(kind, {"type": "thinking", "thinking": ""})
            events.append(self._delta({"type": "thinking_delta", "thinking": unit.piece}))
        elif kind is UnitKind.CONTENT:
            if self._open is not UnitKind.CONTENT:
                events += self._start_block(kind, {"type": "text", "text": ""})
            events.append(self._delta({"type": "text_delta", "text": unit.piece}))
        elif kind is UnitKind.CALL_START:
            call = self._gen.plan.calls[unit.call]
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            events += self._start_block(UnitKind.ARGS, block)
        elif kind is UnitKind.ARGS:
            events.append(self._delta({"type": "input_json_delta", "partial_json": unit.piece}))
        return events

    def _message_delta(self) -> bytes:
        gen = self._gen
        payload = {
            "type": "message_delta",
            "delta": {
                "stop_reason": _STOP_REASONS.get(gen.finish_reason, "end_turn"),
                "stop_sequence": None,
            },
            "usage": {"output_tokens": gen.completion_tokens},
        }
        return _event("message_delta", payload)

    def close(self) -> list[bytes]:
        stop = _event("message_stop", {"type": "message_stop"})
        return [*self._stop_block(), self._message_delta(), stop]

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "index\n\n'

    def truncated(self) -> bytes:
        event = self._message_delta()
        return event[: len(event) // 2] + b"\n\n"
