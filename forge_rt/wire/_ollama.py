"""The Ollama ``/api/chat`` wire format, outbound only: what
:class:`~forge_rt.clients.OllamaClient` sends and reads (no server here speaks it).

Differences from chat completions that matter: tool-call arguments are JSON objects, not
strings; tool results name the tool (``tool_name``); sampling lives in ``options`` (with
``num_ctx`` and ``num_predict``); a JSON-schema constraint is the ``format`` field; reasoning
travels as ``thinking`` (replayed on assistant messages, read from replies, switched on with
``think``); streams are newline-delimited JSON objects ending with one that has ``done: true``.
Ollama sends each tool call whole, never in pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from forge_rt.core import (
    GrammarConstraint,
    InferenceRequest,
    LLMResponse,
    Message,
    Role,
    Sampling,
    StreamChunk,
    Timings,
    ToolSpec,
    Usage,
)
from forge_rt.errors import BackendError, UnsupportedRequestError
from forge_rt.wire._faults import in_band_error, malformed_error, stream_decode_error
from forge_rt.wire._openai_request import openai_tools_to_wire
from forge_rt.wire._reply import NO_TIMINGS, RawCall, ReplyAssembler, reply_result
from forge_rt.wire._request import fold_reasoning

__all__ = [
    "OllamaStreamDecoder",
    "ollama_messages_to_wire",
    "ollama_request_to_wire",
    "ollama_response_from_wire",
    "ollama_tools_to_wire",
]


def ollama_messages_to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages as ``/api/chat`` messages; reasoning is folded into ``thinking``."""
    out: list[dict[str, Any]] = []
    for message, reasoning in fold_reasoning(messages):
        wire: dict[str, Any] = {"role": message.role.value, "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [
                {"function": {"name": c.tool, "arguments": c.args}} for c in message.tool_calls
            ]
        if message.role is Role.TOOL and message.tool_name:
            wire["tool_name"] = message.tool_name
        if reasoning is not None:
            wire["thinking"] = reasoning
        out.append(wire)
    return out


def ollama_tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as ``/api/chat`` tools (the chat-completions function shape)."""
    return openai_tools_to_wire(tools)


def _options(sampling: Sampling, num_ctx: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in (
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repeat_penalty",
        "seed",
    ):
        value = getattr(sampling, name)
        if value is not None:
            out[name] = value
    if sampling.max_tokens is not None:
        out["num_predict"] = sampling.max_tokens
    if sampling.stop is not None:
        out["stop"] = list(sampling.stop)
    if num_ctx is not None:
        out["num_ctx"] = num_ctx
    return out


def ollama_request_to_wire(
    request: InferenceRequest,
    *,
    model: str,
    stream: bool,
    num_ctx: int | None = None,
    think: bool | None = None,
    keep_alive: str | None = None,
) -> dict[str, Any]:
    """A complete ``/api/chat`` body.

    ``tool_choice`` has no Ollama equivalent and is not sent (the guardrails enforce it); a
    grammar constraint or a prefill raises :class:`~forge_rt.errors.UnsupportedRequestError`.
    """
    if isinstance(request.constraint, GrammarConstraint):
        raise UnsupportedRequestError(
            "Ollama takes no GBNF grammar, only a JSON-schema constraint (sent as `format`); "
            "check client.capabilities.grammar first",
            feature="grammar",
            api="ollama",
        )
    if request.assistant_prefill is not None:
        raise UnsupportedRequestError(
            "OllamaClient does not support assistant_prefill; check "
            "client.capabilities.assistant_prefill first",
            feature="assistant_prefill",
            api="ollama",
        )
    body: dict[str, Any] = {
        "model": model,
        "messages": ollama_messages_to_wire(request.messages),
        "stream": stream,
    }
    if request.tools:
        body["tools"] = ollama_tools_to_wire(request.tools)
    options = _options(request.sampling, num_ctx)
    if options:
        body["options"] = options
    if request.constraint is not None:
        body["format"] = request.constraint.schema
    if think is not None:
        body["think"] = think
    if keep_alive is not None:
        body["keep_alive"] = keep_alive
    return body


class _Function(msgspec.Struct, kw_only=True):
    name: str | None = None
    arguments: dict[str, Any] | str | None = None
    index: int | None = None


class _ToolCallWire(msgspec.Struct, kw_only=True):
    id: str | None = None
    function: _Function | None = None


class _MessageWire(msgspec.Struct, kw_only=True):
    role: str | None = None
    content: str | None = None
    thinking: str | None = None
    tool_calls: list[_ToolCallWire] | None = None


class _ChatWire(msgspec.Struct, kw_only=True):
    model: str | None = None
    message: _MessageWire | None = None
    done: bool | None = None
    done_reason: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    error: str | None = None


_decoder = msgspec.json.Decoder(_ChatWire)


def _error(text: str, *, url: str | None, retry_safe: bool) -> BackendError:
    return in_band_error(
        "Ollama reported an error inside its reply", url=url, body=text, retry_safe=retry_safe
    )


def _raw_calls(calls: Sequence[_ToolCallWire] | None) -> list[RawCall]:
    return [
        RawCall(
            call_id=c.id,
            name=(c.function.name or "") if c.function else "",
            arguments=(c.function.arguments or {}) if c.function else {},
        )
        for c in calls or ()
    ]


def ollama_response_from_wire(
    body: bytes, *, timings: Timings = NO_TIMINGS, url: str | None = None
) -> LLMResponse:
    """Parse a non-streamed ``/api/chat`` reply."""
    try:
        wire = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise malformed_error(str(exc), url=url, body=body) from exc
    if wire.error is not None:
        raise _error(wire.error, url=url, retry_safe=True)
    if wire.message is None:
        raise malformed_error("it has no message", url=url, body=body)
    raw = wire.message.content or ""
    return LLMResponse(
        result=reply_result(raw, wire.message.thinking, _raw_calls(wire.message.tool_calls)),
        usage=Usage(prompt_tokens=wire.prompt_eval_count, completion_tokens=wire.eval_count),
        timings=timings,
        finish_reason=wire.done_reason,
        raw_text=raw,
        model=wire.model,
    )


class OllamaStreamDecoder:
    """Consumes the JSON lines of a streamed ``/api/chat`` reply, yielding typed chunks."""

    def __init__(self, *, url: str | None = None) -> None:
        self._url = url
        self._reply = ReplyAssembler()
        self._last: _ChatWire | None = None
        self._model: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    @property
    def partial_text(self) -> str:
        return self._reply.raw_text

    def feed(self, line: str, *, delivered: bool = False) -> list[StreamChunk]:
        """One JSON line; raises :class:`StreamError` if it is not a chat chunk."""
        try:
            wire = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise stream_decode_error(
                "line", "a valid Ollama chat chunk", line, exc, partial=self.partial_text
            ) from exc
        if wire.error is not None:
            raise _error(wire.error, url=self._url, retry_safe=not delivered)
        self._model = wire.model or self._model
        out: list[StreamChunk] = []
        if wire.message is not None:
            if wire.message.thinking:
                out.extend(self._reply.reasoning(wire.message.thinking))
            if wire.message.content:
                out.extend(self._reply.text(wire.message.content))
            for call in _raw_calls(wire.message.tool_calls):
                args = call.arguments
                text = args if isinstance(args, str) else msgspec.json.encode(args).decode()
                # Each Ollama call arrives whole: a fresh index per call, never a continuation.
                index = len(self._reply.calls.raw_calls())
                out.extend(self._reply.call(index, call.call_id, call.name, text))
        if wire.done:
            self._done = True
            self._last = wire
        return out

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]:
        """The stream ended: the last held-back text, and the assembled response."""
        tail, result = self._reply.finish()
        last = self._last
        return tail, LLMResponse(
            result=result,
            usage=Usage(
                prompt_tokens=last.prompt_eval_count if last else None,
                completion_tokens=last.eval_count if last else None,
            ),
            timings=timings,
            finish_reason=last.done_reason if last else None,
            raw_text=self.partial_text,
            model=self._model,
        )
