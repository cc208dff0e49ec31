"""Ollama's chat wire format (``POST /api/chat``): NDJSON streaming, arguments as objects.

Ollama streams by default (``"stream": false`` turns it off) and sends each tool call whole, in
one chunk, once its arguments are complete. ``options.num_ctx`` is reported to the engine
because Ollama reloads the model whenever it changes; ``format`` (``"json"`` or a JSON schema)
constrains the output.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec

from forge_rt.backends.sim._codec import build_view, decode_body
from forge_rt.backends.sim._generation import Generation, Unit, UnitKind, object_or_none
from forge_rt.backends.sim._tokens import CALL_CLOSE
from forge_rt.backends.sim._view import Api, RequestView, ViewMessage, ViewTool, ViewToolCall

__all__ = ["OllamaCodec"]

_encode = msgspec.json.Encoder().encode


class _Function(msgspec.Struct):
    name: str
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)


class _ToolCall(msgspec.Struct):
    function: _Function


class _Message(msgspec.Struct):
    role: str
    content: str = ""
    tool_calls: list[_ToolCall] | None = None
    thinking: str | None = None
    tool_name: str | None = None


class _ToolFunction(msgspec.Struct):
    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class _Tool(msgspec.Struct):
    function: _ToolFunction
    type: str = "function"


class _Options(msgspec.Struct):
    num_ctx: int | None = None
    num_predict: int | None = None


class _Request(msgspec.Struct):
    messages: list[_Message]
    model: str = ""
    tools: list[_Tool] | None = None
    stream: bool = True
    format: str | dict[str, Any] | None = None
    options: _Options | None = None


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _arguments(value: dict[str, Any] | str) -> str:
    return value if isinstance(value, str) else _encode(value).decode()


class OllamaCodec:
    """``POST /api/chat`` requests and responses."""

    api: Api = "ollama"
    stream_content_type = "application/x-ndjson"
    id_prefix = "ollama-"

    def parse(self, body: bytes, headers: Mapping[str, str]) -> RequestView:
        request: _Request = decode_body(body, _Request, "Ollama chat")
        messages = [
            ViewMessage(
                role=m.role,
                content=m.content,
                tool_calls=tuple(
                    ViewToolCall("", c.function.name, _arguments(c.function.arguments))
                    for c in m.tool_calls or ()
                ),
                reasoning=m.thinking,
            )
            for m in request.messages
        ]
        options = request.options or _Options()
        fmt = request.format
        return build_view(
            "ollama",
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
            constraint="format" if fmt else None,
            schema=fmt if isinstance(fmt, dict) else None,
            max_tokens=options.num_predict
            if options.num_predict is not None and options.num_predict >= 0
            else None,
            stream=request.stream,
            num_ctx=options.num_ctx,
        )

    def authorised(self, headers: Mapping[str, str], api_key: str) -> bool:
        return headers.get("authorization") == f"Bearer {api_key}"

    def error(self, status: int, message: str, kind: str) -> bytes:
        return _encode({"error": message})

    def _done(self, gen: Generation) -> dict[str, Any]:
        prompt_ns = int(gen.prompt_ms * 1e6)
        eval_ns = int(gen.predicted_ms * 1e6)
        return {
            "model": gen.model,
            "created_at": _now(),
            "done": True,
            "done_reason": "length" if gen.finish_reason == "length" else "stop",
            "total_duration": prompt_ns + eval_ns,
            "load_duration": 0,
            "prompt_eval_count": gen.prompt_tokens,
            "prompt_eval_duration": prompt_ns,
            "eval_count": gen.completion_tokens,
            "eval_duration": eval_ns,
        }

    def response(self, generation: Generation) -> bytes:
        calls, raw = generation.object_calls()
        message: dict[str, Any] = {"role": "assistant", "content": generation.content + raw}
        if generation.reasoning:
            message["thinking"] = generation.reasoning
        if calls:
            message["tool_calls"] = [
                {"function": {"name": name, "arguments": args}} for _, name, args in calls
            ]
        return _encode({**self._done(generation), "message": message})

    def encoder(self, generation: Generation, view: RequestView) -> _Encoder:
        return _Encoder(self, generation)


class _Encoder:
    def __init__(self, codec: OllamaCodec, generation: Generation) -> None:
        self._codec = codec
        self._gen = generation
        self._head = b'{"model":' + _encode(generation.model) + b',"created_at":'

    def _chunk(self, message: dict[str, Any]) -> bytes:
        body = {"role": "assistant", "content": "", **message}
        tail = b',"message":' + _encode(body) + b',"done":false}\n'
        return self._head + _encode(_now()) + tail

    def progress(self, *, total: int, cached: int, processed: int) -> list[bytes]:
        return []  # Ollama reports nothing while it reads the prompt

    def open(self) -> list[bytes]:
        return []

    def delta(self, unit: Unit) -> list[bytes]:
        if unit.kind is UnitKind.CONTENT:
            return [self._chunk({"content": unit.piece})]
        if unit.kind is UnitKind.REASONING:
            return [self._chunk({"thinking": unit.piece})]
        if unit.kind is UnitKind.SILENT and unit.piece == CALL_CLOSE:
            call = self._gen.plan.calls[unit.call]
            value = object_or_none(call.arguments)
            if value is not None:
                function = {"name": call.name, "arguments": value}
                return [self._chunk({"tool_calls": [{"function": function}]})]
            return [self._chunk({"content": f"<tool_call>{call.arguments}</tool_call>"})]
        return []

    def _final(self) -> bytes:
        done = self._codec._done(self._gen)
        return _encode({**done, "message": {"role": "assistant", "content": ""}}) + b"\n"

    def close(self) -> list[bytes]:
        return [self._final()]

    def malformed(self) -> bytes:
        return b'{"model": "not json\n'

    def truncated(self) -> bytes:
        final = self._final()
        return final[: len(final) // 2] + b"\n"
