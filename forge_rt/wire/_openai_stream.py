"""An OpenAI chat-completions stream, both ways: a backend's ``data:`` payloads read into typed
chunks (:class:`OpenAIStreamDecoder`), and typed chunks written as ``chat.completion.chunk`` SSE
frames for a client (:class:`OpenAIStreamEncoder`)."""

from __future__ import annotations

from typing import Any

import msgspec

from forge_rt.core import (
    BackendChunk,
    FinalChunk,
    LLMResponse,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
)
from forge_rt.wire._faults import retraction_refused, stream_decode_error
from forge_rt.wire._openai_reply import (
    LlamaTimings,
    UsageWire,
    completion_decoder,
    finish_to_wire,
    in_band,
    reply_text,
    usage_from_wire,
    usage_to_wire,
)
from forge_rt.wire._reply import ReplyAssembler
from forge_rt.wire._sse import encode_sse

__all__ = ["OpenAIStreamDecoder", "OpenAIStreamEncoder"]


class OpenAIStreamDecoder:
    """Consumes the ``data:`` payloads of a chat-completions stream, yielding typed chunks.

    Content deltas go through the think-tag splitter; tool-call deltas through the by-index
    assembler. :attr:`complete` turns true at ``[DONE]``, or once a ``finish_reason`` was seen
    (some servers end the body without ``[DONE]``).
    """

    def __init__(self, *, url: str | None = None) -> None:
        self._url = url
        self._reply = ReplyAssembler()
        self._finish: str | None = None
        self._usage: UsageWire | None = None
        self._timings: LlamaTimings | None = None
        self._model: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done or self._finish is not None

    @property
    def partial_text(self) -> str:
        """The raw text received so far (for error context)."""
        return self._reply.raw_text

    def feed(self, data: str, *, delivered: bool = False) -> list[BackendChunk]:
        """One event's data; raises :class:`StreamError` if it is not a chunk.

        ``delivered`` (whether the caller already got output) decides ``retry_safe`` on an
        error the server reports inside the stream.
        """
        if data.strip() == "[DONE]":
            self._done = True
            return []
        try:
            wire = completion_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise stream_decode_error(
                "chunk", "a valid chat-completion chunk", data, exc, partial=self.partial_text
            ) from exc
        if wire.error is not None:
            raise in_band(wire.error, url=self._url, retry_safe=not delivered)
        self._model = wire.model or self._model
        if wire.usage is not None:
            self._usage = wire.usage
        if wire.timings is not None:
            self._timings = wire.timings
        out: list[BackendChunk] = []
        if wire.prompt_progress is not None:
            out.append(wire.prompt_progress.chunk())
        for choice in wire.choices:
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
            delta = choice.delta or choice.message
            if delta is None:
                continue
            reasoning = delta.reasoning_content or delta.reasoning
            if reasoning:
                out.extend(self._reply.reasoning(reasoning))
            text = reply_text(delta.content)
            if text:
                out.extend(self._reply.text(text))
            for tc in delta.tool_calls or ():
                fn = tc.function
                args = fn.arguments if fn else None
                if isinstance(args, dict):
                    args = msgspec.json.encode(args).decode()
                out.extend(self._reply.call(tc.index, tc.id, fn.name if fn else None, args))
        return out

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]:
        """The stream ended: the last held-back text, and the assembled response."""
        tail, result = self._reply.finish()
        return tail, LLMResponse(
            result=result,
            usage=usage_from_wire(self._usage, self._timings),
            timings=timings,
            finish_reason=self._finish,
            raw_text=self.partial_text,
            model=self._model,
        )


class OpenAIStreamEncoder:
    """Turns stream chunks into ``chat.completion.chunk`` SSE frames for a client.

    The first frame carries the assistant role. A :class:`FinalChunk` whose response holds tool
    calls that no delta carried (calls parsed from text after the fact) sends them whole before
    the finishing frame. A :class:`ResetChunk` cannot be honoured -- SSE has no way to take back
    what a client already received -- so it raises ``ValueError``: a server that may abandon an
    attempt must buffer instead of streaming it.
    """

    def __init__(
        self, *, model: str, response_id: str, created: int, include_usage: bool = False
    ) -> None:
        self._model = model
        self._id = response_id
        self._created = created
        self._include_usage = include_usage
        self._started = False
        self._streamed_calls: set[int] = set()

    def _frame(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self._started:
            delta = {"role": "assistant", **delta}
            self._started = True
        body = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return encode_sse(msgspec.json.encode(body))

    def encode(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for one chunk (several frames for a final chunk)."""
        if isinstance(chunk, TextDeltaChunk):
            return self._frame({"content": chunk.text})
        if isinstance(chunk, ReasoningDeltaChunk):
            return self._frame({"reasoning_content": chunk.text})
        if isinstance(chunk, ToolCallDeltaChunk):
            self._streamed_calls.add(chunk.index)
            return self._frame({"tool_calls": [_delta_call(chunk)]})
        if isinstance(chunk, ResetChunk):
            raise retraction_refused(chunk)
        return self._final(chunk)

    def _final(self, chunk: FinalChunk) -> bytes:
        response = chunk.response
        frames = b""
        for i, call in enumerate(response.tool_calls):
            if i not in self._streamed_calls:
                frames += self._frame({"tool_calls": [_delta_call_whole(i, call)]})
        frames += self._frame({}, finish_to_wire(response))
        usage = usage_to_wire(response.usage)
        if self._include_usage and usage is not None:
            body = {
                "id": self._id,
                "object": "chat.completion.chunk",
                "created": self._created,
                "model": self._model,
                "choices": [],
                "usage": usage,
            }
            frames += encode_sse(msgspec.json.encode(body))
        return frames

    def done(self) -> bytes:
        """The terminating ``[DONE]`` frame."""
        return encode_sse("[DONE]")


def _delta_call(chunk: ToolCallDeltaChunk) -> dict[str, Any]:
    out: dict[str, Any] = {"index": chunk.index}
    if chunk.call_id is not None:
        out["id"] = chunk.call_id
        out["type"] = "function"
    function: dict[str, Any] = {"arguments": chunk.arguments_delta}
    if chunk.name is not None:
        function["name"] = chunk.name
    out["function"] = function
    return out


def _delta_call_whole(index: int, call: ToolCall) -> dict[str, Any]:
    return {
        "index": index,
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.tool, "arguments": msgspec.json.encode(call.args).decode()},
    }
