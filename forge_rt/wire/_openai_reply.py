"""An OpenAI chat completion, both ways: a backend's body read into an :class:`LLMResponse`
(what the clients do), and an :class:`LLMResponse` written as a body (what a server answers).

The reply structs here are lenient on purpose: servers add fields of their own freely
(llama-server's ``timings``, vLLM's extras), so unknown fields are ignored. They also read the
chunks of a stream (:mod:`forge_rt.wire._openai_stream`), which have the same shape with
``delta`` in place of ``message``. Reasoning is read from ``reasoning_content``, ``reasoning`` or
``<think>`` tags in the content.
"""

from __future__ import annotations

from typing import Any

import msgspec

from forge_rt.core import LLMResponse, PromptProgressChunk, TextResponse, Timings, Usage
from forge_rt.errors import BackendError
from forge_rt.wire._faults import in_band_error, malformed_error
from forge_rt.wire._openai_request import call_to_wire
from forge_rt.wire._reply import NO_TIMINGS, RawCall, reply_result, result_reasoning

__all__ = [
    "CompletionWire",
    "LlamaPromptProgress",
    "LlamaTimings",
    "UsageWire",
    "completion_decoder",
    "finish_to_wire",
    "in_band",
    "openai_response_from_wire",
    "openai_response_to_wire",
    "reply_text",
    "usage_from_wire",
    "usage_to_wire",
]


class _Function(msgspec.Struct, kw_only=True):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _ToolCallWire(msgspec.Struct, kw_only=True):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: _Function | None = None


class _ContentPart(msgspec.Struct, kw_only=True):
    type: str
    text: str | None = None


class _MessageWire(msgspec.Struct, kw_only=True):
    role: str | None = None
    content: str | list[_ContentPart] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallWire] | None = None


class _Choice(msgspec.Struct, kw_only=True):
    index: int = 0
    message: _MessageWire | None = None
    delta: _MessageWire | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct, kw_only=True):
    cached_tokens: int | None = None


class UsageWire(msgspec.Struct, kw_only=True):
    """``usage`` as a backend reports it."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None


class LlamaTimings(msgspec.Struct, kw_only=True):
    """llama-server's own ``timings`` (where it reports cache reuse)."""

    cache_n: int | None = None
    prompt_n: int | None = None
    predicted_n: int | None = None


class LlamaPromptProgress(msgspec.Struct, kw_only=True):
    """llama-server's ``prompt_progress`` (asked for with ``return_progress``): sent once when
    the server starts on the prompt and again after each batch it prefills."""

    total: int
    cache: int = 0
    processed: int = 0

    def chunk(self) -> PromptProgressChunk:
        return PromptProgressChunk(processed=self.processed, total=self.total, cached=self.cache)


class _ErrorWire(msgspec.Struct, kw_only=True):
    message: str = ""
    type: str | None = None
    code: int | str | None = None


class CompletionWire(msgspec.Struct, kw_only=True):
    """A ``chat.completion`` body or a ``chat.completion.chunk`` (or an error in their place)."""

    id: str | None = None
    model: str | None = None
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: UsageWire | None = None
    timings: LlamaTimings | None = None
    prompt_progress: LlamaPromptProgress | None = None
    error: _ErrorWire | str | None = None


completion_decoder = msgspec.json.Decoder(CompletionWire)


def reply_text(part: str | list[_ContentPart] | None) -> str:
    """The text of a reply's ``content``, whichever form it takes."""
    if part is None:
        return ""
    if isinstance(part, str):
        return part
    return "".join(p.text or "" for p in part if p.type == "text")


def usage_from_wire(usage: UsageWire | None, timings: LlamaTimings | None) -> Usage:
    """Token counts; the cached count from ``prompt_tokens_details``, else llama-server's
    ``timings.cache_n``."""
    cached = None
    if usage is not None and usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens
    if cached is None and timings is not None:
        cached = timings.cache_n
    return Usage(
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        cached_tokens=cached,
    )


def in_band(error: _ErrorWire | str, *, url: str | None, retry_safe: bool) -> BackendError:
    """The error object a backend sent in place of a completion or chunk."""
    message = error if isinstance(error, str) else error.message
    code = None if isinstance(error, str) else error.code
    return in_band_error(
        f"the backend reported an error inside its reply (code {code})",
        url=url,
        body=message,
        retry_safe=retry_safe,
        status=code if isinstance(code, int) else None,
    )


def openai_response_from_wire(
    body: bytes, *, timings: Timings = NO_TIMINGS, url: str | None = None
) -> LLMResponse:
    """Parse a non-streamed chat completion.

    Raises ``BackendError(MALFORMED_RESPONSE)`` when the body is not a completion and
    ``BackendError(SERVER_ERROR)`` when it is an error object.
    """
    try:
        wire = completion_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise malformed_error(str(exc), url=url, body=body) from exc
    if wire.error is not None:
        raise in_band(wire.error, url=url, retry_safe=True)
    if not wire.choices or wire.choices[0].message is None:
        raise malformed_error("it has no choices[0].message", url=url, body=body)
    choice = wire.choices[0]
    message = choice.message
    assert message is not None  # checked just above; narrows for the type checker
    raw = reply_text(message.content)
    calls = [
        RawCall(
            call_id=c.id,
            name=(c.function.name or "") if c.function else "",
            arguments=(c.function.arguments or "") if c.function else "",
        )
        for c in message.tool_calls or ()
    ]
    return LLMResponse(
        result=reply_result(raw, message.reasoning_content or message.reasoning, calls),
        usage=usage_from_wire(wire.usage, wire.timings),
        timings=timings,
        finish_reason=choice.finish_reason,
        raw_text=raw,
        model=wire.model,
    )


def usage_to_wire(usage: Usage) -> dict[str, Any] | None:
    """``usage`` for a client, or None when the backend did not report the counts."""
    if usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return out


def finish_to_wire(response: LLMResponse) -> str:
    """The ``finish_reason`` a client is told."""
    if response.tool_calls:
        return "tool_calls"
    # A backend that did not say why it stopped finished normally: the reply is complete.
    return response.finish_reason or "stop"


def openai_response_to_wire(
    response: LLMResponse,
    *,
    model: str,
    response_id: str,
    created: int,
    text_with_calls: str = "",
) -> dict[str, Any]:
    """A ``chat.completion`` body for ``response`` (usage only when the backend reported it).

    ``text_with_calls`` is prose that came with tool calls: the message carries it as its
    ``content`` beside ``tool_calls``, which an :class:`LLMResponse` (calls or text) cannot.
    """
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(response.result, TextResponse):
        message["content"] = response.result.content
    else:
        message["content"] = text_with_calls or None
        message["tool_calls"] = [call_to_wire(c) for c in response.result]
    reasoning = result_reasoning(response.result)
    if reasoning:
        message["reasoning_content"] = reasoning
    body: dict[str, Any] = {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_to_wire(response)}],
    }
    usage = usage_to_wire(response.usage)
    if usage is not None:
        body["usage"] = usage
    return body
