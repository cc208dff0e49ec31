"""The OpenAI chat-completions wire format, with llama-server's and vLLM's extensions.

Accepted beyond OpenAI's own fields: ``json_schema`` and ``grammar`` (llama-server constrained
decoding), ``id_slot`` (pin a llama-server slot), ``priority`` (vLLM scheduling). Responses carry
llama-server's ``timings`` (``cache_n`` is the prompt tokens served from the slot's cache) next
to OpenAI's ``usage.prompt_tokens_details.cached_tokens``. Streamed tool calls follow
llama-server: every delta repeats the call's ``index``, ``id`` and ``name``, and carries a piece
of the arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from forge_rt.backends.sim._codec import BadRequest, build_view, decode_body
from forge_rt.backends.sim._generation import Generation, Unit, UnitKind
from forge_rt.backends.sim._view import Api, RequestView, ViewMessage, ViewTool, ViewToolCall

__all__ = ["OpenAICodec"]

_encode = msgspec.json.Encoder().encode


class _Function(msgspec.Struct):
    name: str
    arguments: str | dict[str, Any] = ""


class _ToolCall(msgspec.Struct):
    function: _Function
    id: str = ""
    type: str = "function"


class _Part(msgspec.Struct):
    type: str
    text: str = ""


class _Message(msgspec.Struct):
    role: str
    content: str | list[_Part] | None = None
    tool_calls: list[_ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None


class _ToolFunction(msgspec.Struct):
    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class _Tool(msgspec.Struct):
    function: _ToolFunction
    type: str = "function"


class _StreamOptions(msgspec.Struct):
    include_usage: bool = False


class _JsonSchema(msgspec.Struct):
    schema: dict[str, Any] | None = None
    name: str = ""


class _ResponseFormat(msgspec.Struct):
    type: str
    json_schema: _JsonSchema | None = None
    schema: dict[str, Any] | None = None


class _Request(msgspec.Struct):
    messages: list[_Message]
    model: str = ""
    tools: list[_Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n_predict: int | None = None
    response_format: _ResponseFormat | None = None
    json_schema: dict[str, Any] | None = None
    grammar: str | None = None
    id_slot: int | None = None
    priority: int | None = None
    return_progress: bool = False


def _text(content: str | list[_Part] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(p.text if p.type == "text" else f"[{p.type}]" for p in content)


def _tool_choice(value: str | dict[str, Any] | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    name = value.get("function", {}).get("name")
    if not isinstance(name, str):
        raise BadRequest(
            f"tool_choice object must name a function as {{'type': 'function', 'function': "
            f"{{'name': …}}}}, got {value!r}"
        )
    return name


def _constraint(request: _Request) -> tuple[str | None, dict[str, Any] | None]:
    fmt = request.response_format
    if fmt is not None and fmt.type in ("json_schema", "json_object"):
        inner = fmt.json_schema.schema if fmt.json_schema is not None else None
        return "response_format", inner if inner is not None else fmt.schema
    if request.json_schema is not None:
        return "json_schema", request.json_schema
    if request.grammar is not None:
        return "grammar", None
    return None, None


class OpenAICodec:
    """``POST /v1/chat/completions`` requests and responses."""

    api: Api = "openai"
    stream_content_type = "text/event-stream"
    id_prefix = "chatcmpl-"

    def parse(self, body: bytes, headers: Mapping[str, str]) -> RequestView:
        request: _Request = decode_body(body, _Request, "OpenAI chat completion")
        messages = [
            ViewMessage(
                role=m.role,
                content=_text(m.content),
                tool_calls=tuple(
                    ViewToolCall(
                        c.id,
                        c.function.name,
                        c.function.arguments
                        if isinstance(c.function.arguments, str)
                        else _encode(c.function.arguments).decode(),
                    )
                    for c in m.tool_calls or ()
                ),
                tool_call_id=m.tool_call_id,
                reasoning=m.reasoning_content,
            )
            for m in request.messages
        ]
        constraint, schema = _constraint(request)
        limits = [request.max_tokens, request.max_completion_tokens, request.n_predict]
        return build_view(
            "openai",
            messages,
            headers,
            tools=tuple(
                ViewTool(
                    name=t.function.name,
                    description=t.function.description,
                    parameters=t.function.parameters,
                )
                for t in request.tools or ()
            ),
            tool_choice=_tool_choice(request.tool_choice),
            constraint=constraint,
            schema=schema,
            grammar=request.grammar,
            max_tokens=next((n for n in limits if n is not None and n >= 0), None),
            stream=request.stream,
            include_usage=request.stream_options is not None
            and request.stream_options.include_usage,
            slot_id=request.id_slot,
            priority=request.priority,
            return_progress=request.return_progress,
        )

    def authorised(self, headers: Mapping[str, str], api_key: str) -> bool:
        return headers.get("authorization") == f"Bearer {api_key}"

    def error(self, status: int, message: str, kind: str) -> bytes:
        return _encode({"error": {"code": status, "message": message, "type": kind}})

    def response(self, generation: Generation) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": generation.content or None}
        reasoning = generation.reasoning
        if reasoning:
            message["reasoning_content"] = reasoning
        calls = generation.calls()
        if calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a, _ in calls
            ]
        return _encode(
            {
                "id": generation.id,
                "object": "chat.completion",
                "created": generation.created,
                "model": generation.model,
                "choices": [
                    {"index": 0, "message": message, "finish_reason": generation.finish_reason}
                ],
                "usage": generation.usage_openai(),
                "timings": generation.timings_llama(),
            }
        )

    def encoder(self, generation: Generation, view: RequestView) -> _Encoder:
        return _Encoder(generation, view.include_usage)


class _Encoder:
    def __init__(self, generation: Generation, include_usage: bool) -> None:
        self._gen = generation
        self._include_usage = include_usage
        self._prefix = (
            b'data: {"id":'
            + _encode(generation.id)
            + b',"object":"chat.completion.chunk","created":'
            + str(generation.created).encode()
            + b',"model":'
            + _encode(generation.model)
            + b',"choices":'
        )

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, tail: bytes = b"") -> bytes:
        """One ``chat.completion.chunk`` event; ``tail`` is more of the object after its
        ``choices`` (``,"timings":...``), as llama-server writes it."""
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return self._prefix + _encode([choice]) + tail + b"}\n\n"

    def progress(self, *, total: int, cached: int, processed: int) -> list[bytes]:
        """llama-server's report on the prompt: an empty assistant delta beside it."""
        report = {"total": total, "cache": cached, "processed": processed, "time_ms": 0}
        tail = b',"prompt_progress":' + _encode(report)
        return [self._chunk({"role": "assistant", "content": None}, tail=tail)]

    def open(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": None})]

    def delta(self, unit: Unit) -> list[bytes]:
        kind = unit.kind
        if kind is UnitKind.CONTENT:
            return [self._chunk({"content": unit.piece})]
        if kind is UnitKind.REASONING:
            return [self._chunk({"reasoning_content": unit.piece})]
        if kind is UnitKind.CALL_START or kind is UnitKind.ARGS:
            call = self._gen.plan.calls[unit.call]
            piece = unit.piece if kind is UnitKind.ARGS else ""
            function = {"name": call.name, "arguments": piece}
            tool_call = {
                "index": unit.call,
                "id": call.id,
                "type": "function",
                "function": function,
            }
            return [self._chunk({"tool_calls": [tool_call]})]
        return []

    def _final(self) -> bytes:
        gen = self._gen
        timings = b',"timings":' + _encode(gen.timings_llama())
        return self._chunk({}, gen.finish_reason, tail=timings)

    def close(self) -> list[bytes]:
        events = [self._final()]
        if self._include_usage:
            usage = _encode(self._gen.usage_openai())
            events.append(self._prefix + b'[],"usage":' + usage + b"}\n\n")
        events.append(b"data: [DONE]\n\n")
        return events

    def malformed(self) -> bytes:
        return b'data: {"choices": [{"delta": {"content": "unterminated\n\n'

    def truncated(self) -> bytes:
        final = self._final()
        return final[: len(final) // 2] + b"\n\n"
