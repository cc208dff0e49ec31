"""An Anthropic Messages reply, both ways: a backend's body read into an :class:`LLMResponse`
(what the clients do), and an :class:`LLMResponse` written as a body (what a server answers).

The reply structs here are lenient (unknown fields ignored) and also read the events of a
stream (:mod:`forge_rt.wire._anthropic_stream`). ``input_tokens`` excludes cache reads and
writes on this API; forge_rt's ``prompt_tokens`` is the whole prompt, so they are added back on
the way in and taken out on the way out.
"""

from __future__ import annotations

from typing import Any

import msgspec

from forge_rt.core import TOKEN_LIMIT_REASONS, LLMResponse, TextResponse, Timings, ToolCall, Usage
from forge_rt.errors import BackendError
from forge_rt.wire._faults import in_band_error, malformed_error
from forge_rt.wire._reply import NO_TIMINGS, RawCall, reply_result, result_reasoning

__all__ = [
    "BlockWire",
    "DeltaWire",
    "ErrorWire",
    "UsageWire",
    "anthropic_response_from_wire",
    "anthropic_response_to_wire",
    "event_decoder",
    "in_band",
    "stop_reason",
    "usage_from_wire",
    "usage_to_wire",
]


class BlockWire(msgspec.Struct, kw_only=True):
    """A content block of a reply, or the block a stream's ``content_block_start`` opens."""

    type: str
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None


class UsageWire(msgspec.Struct, kw_only=True):
    """``usage`` as the API reports it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class ErrorWire(msgspec.Struct, kw_only=True):
    """An ``error`` object, in place of a reply or as a stream event."""

    type: str = ""
    message: str = ""


class _MessageWire(msgspec.Struct, kw_only=True):
    type: str | None = None
    model: str | None = None
    content: list[BlockWire] = msgspec.field(default_factory=list)
    stop_reason: str | None = None
    usage: UsageWire | None = None
    error: ErrorWire | None = None


class DeltaWire(msgspec.Struct, kw_only=True):
    """The ``delta`` of a ``content_block_delta`` or ``message_delta`` event."""

    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class _Event(msgspec.Struct, kw_only=True):
    type: str
    index: int | None = None
    content_block: BlockWire | None = None
    delta: DeltaWire | None = None
    message: _MessageWire | None = None
    usage: UsageWire | None = None
    error: ErrorWire | None = None


_message_decoder = msgspec.json.Decoder(_MessageWire)
event_decoder = msgspec.json.Decoder(_Event)


def usage_from_wire(usage: UsageWire | None, output_tokens: int | None = None) -> Usage:
    """Anthropic's ``input_tokens`` excludes cache reads and writes; ``prompt_tokens`` is the
    whole prompt, so they are added back."""
    if usage is None:
        return Usage(completion_tokens=output_tokens)
    prompt = None
    if usage.input_tokens is not None:
        prompt = (
            usage.input_tokens
            + (usage.cache_read_input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
        )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=output_tokens if output_tokens is not None else usage.output_tokens,
        cached_tokens=usage.cache_read_input_tokens,
    )


def in_band(error: ErrorWire, *, url: str | None, retry_safe: bool) -> BackendError:
    """The error object a backend sent in place of a reply, or as a stream event."""
    return in_band_error(
        f"the backend reported a {error.type or 'unnamed'} error inside its reply",
        url=url,
        body=error.message,
        retry_safe=retry_safe,
    )


def anthropic_response_from_wire(
    body: bytes, *, timings: Timings = NO_TIMINGS, url: str | None = None
) -> LLMResponse:
    """Parse a non-streamed Messages reply (``BackendError`` on an error or a foreign shape)."""
    try:
        wire = _message_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise malformed_error(str(exc), url=url, body=body) from exc
    if wire.error is not None:
        raise in_band(wire.error, url=url, retry_safe=True)
    if wire.type != "message":
        raise malformed_error(f"its type is {wire.type!r}, not 'message'", url=url, body=body)
    raw = "".join(b.text or "" for b in wire.content if b.type == "text")
    thinking = "".join(b.thinking or "" for b in wire.content if b.type == "thinking")
    calls = [
        RawCall(call_id=b.id, name=b.name or "", arguments=b.input or {})
        for b in wire.content
        if b.type == "tool_use"
    ]
    return LLMResponse(
        result=reply_result(raw, thinking, calls),
        usage=usage_from_wire(wire.usage),
        timings=timings,
        finish_reason=wire.stop_reason,
        raw_text=raw,
        model=wire.model,
    )


def stop_reason(response: LLMResponse) -> str:
    """The ``stop_reason`` a client is told."""
    if response.tool_calls:
        return "tool_use"
    if response.finish_reason in TOKEN_LIMIT_REASONS:
        return "max_tokens"
    if response.finish_reason == "stop_sequence":
        return "stop_sequence"
    return "end_turn"


def usage_to_wire(usage: Usage) -> dict[str, int]:
    """``usage`` for a client: ``input_tokens`` excludes the cached part, as the API counts."""
    cached = usage.cached_tokens or 0
    out = {
        "input_tokens": max((usage.prompt_tokens or 0) - cached, 0),
        "output_tokens": usage.completion_tokens or 0,
    }
    if usage.cached_tokens is not None:
        out["cache_read_input_tokens"] = usage.cached_tokens
    return out


def anthropic_response_to_wire(
    response: LLMResponse, *, model: str, message_id: str, text_with_calls: str = ""
) -> dict[str, Any]:
    """A Messages reply body for ``response``; unknown token counts are reported as 0.

    ``text_with_calls`` is prose that came with tool calls: it goes in a text block before the
    ``tool_use`` blocks, which an :class:`LLMResponse` (calls or text) cannot hold itself.
    """
    content: list[dict[str, Any]] = []
    if isinstance(response.result, TextResponse):
        text = response.result.content
        calls: list[ToolCall] = []
    else:
        calls = response.result
        text = text_with_calls
    reasoning = result_reasoning(response.result)
    if reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    if text:
        content.append({"type": "text", "text": text})
    content.extend(
        {"type": "tool_use", "id": c.call_id, "name": c.tool, "input": c.args} for c in calls
    )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(response),
        "stop_sequence": None,
        "usage": usage_to_wire(response.usage),
    }
