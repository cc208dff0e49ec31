"""An Anthropic Messages stream, both ways: a backend's events read into typed chunks
(:class:`AnthropicStreamDecoder`), and typed chunks written as Messages SSE events for a client
(:class:`AnthropicStreamEncoder`)."""

from __future__ import annotations

from typing import Any

import msgspec

from forge_rt.core import (
    FinalChunk,
    LLMResponse,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    Timings,
    ToolCallDeltaChunk,
)
from forge_rt.errors import StreamError
from forge_rt.wire._anthropic_reply import (
    BlockWire,
    DeltaWire,
    ErrorWire,
    UsageWire,
    event_decoder,
    in_band,
    stop_reason,
    usage_from_wire,
    usage_to_wire,
)
from forge_rt.wire._faults import retraction_refused, stream_decode_error
from forge_rt.wire._reply import ReplyAssembler
from forge_rt.wire._sse import encode_sse

__all__ = ["AnthropicStreamDecoder", "AnthropicStreamEncoder"]


class AnthropicStreamDecoder:
    """Consumes Messages stream events (their JSON data), yielding typed chunks.

    Tool-use blocks are numbered 0, 1, ... in order of appearance, whatever their content-block
    index, so tool-call deltas match the chat-completions convention. :attr:`complete` turns
    true at ``message_stop``.
    """

    def __init__(self, *, url: str | None = None) -> None:
        self._url = url
        self._reply = ReplyAssembler()
        self._call_index: dict[int, int] = {}
        self._usage: UsageWire | None = None
        self._output_tokens: int | None = None
        self._stop: str | None = None
        self._model: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    @property
    def partial_text(self) -> str:
        return self._reply.raw_text

    def feed(self, data: str, *, delivered: bool = False) -> list[StreamChunk]:
        """One event's data; raises :class:`StreamError` if it is not an event."""
        try:
            event = event_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise stream_decode_error(
                "event", "a valid Messages event", data, exc, partial=self.partial_text
            ) from exc
        kind = event.type
        if kind == "error":
            raise in_band(event.error or ErrorWire(), url=self._url, retry_safe=not delivered)
        if kind == "message_start" and event.message is not None:
            self._usage = event.message.usage
            self._model = event.message.model
        elif kind == "message_delta":
            if event.delta is not None and event.delta.stop_reason is not None:
                self._stop = event.delta.stop_reason
            if event.usage is not None and event.usage.output_tokens is not None:
                self._output_tokens = event.usage.output_tokens
        elif kind == "message_stop":
            self._done = True
        elif kind == "content_block_start" and event.content_block is not None:
            return self._block_start(event.index, event.content_block)
        elif kind == "content_block_delta" and event.delta is not None:
            return self._block_delta(event.index, event.delta)
        return []

    def _block_start(self, index: int | None, block: BlockWire) -> list[StreamChunk]:
        if block.type == "tool_use":
            call = len(self._call_index)
            self._call_index[index if index is not None else -1 - call] = call
            args = msgspec.json.encode(block.input).decode() if block.input else None
            return self._reply.call(call, block.id, block.name, args)
        if block.type == "text" and block.text:
            return self._reply.text(block.text)
        if block.type == "thinking" and block.thinking:
            return self._reply.reasoning(block.thinking)
        return []

    def _block_delta(self, index: int | None, delta: DeltaWire) -> list[StreamChunk]:
        if delta.type == "text_delta" and delta.text:
            return self._reply.text(delta.text)
        if delta.type == "thinking_delta" and delta.thinking:
            return self._reply.reasoning(delta.thinking)
        if delta.type == "input_json_delta" and delta.partial_json:
            if index not in self._call_index:
                raise StreamError(
                    f"an input_json_delta arrived for content block {index}, which is not an "
                    "open tool_use block",
                    partial=self.partial_text,
                )
            return self._reply.call(self._call_index[index], None, None, delta.partial_json)
        return []

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]:
        """The stream ended: the last held-back text, and the assembled response."""
        tail, result = self._reply.finish()
        return tail, LLMResponse(
            result=result,
            usage=usage_from_wire(self._usage, self._output_tokens),
            timings=timings,
            finish_reason=self._stop,
            raw_text=self.partial_text,
            model=self._model,
        )


class AnthropicStreamEncoder:
    """Turns stream chunks into Messages SSE events for a client.

    ``message_start`` goes out with the first chunk; each run of text, reasoning or one tool
    call is a content block; the final chunk closes the open block, sends any tool calls no
    delta carried, then ``message_delta`` and ``message_stop``. A :class:`ResetChunk` raises
    ``ValueError`` (see :class:`~forge_rt.wire.OpenAIStreamEncoder`).
    """

    def __init__(self, *, model: str, message_id: str) -> None:
        self._model = model
        self._id = message_id
        self._started = False
        self._block = -1
        self._open: tuple[str, int | None] | None = None
        self._streamed_calls: set[int] = set()

    def _event(self, name: str, body: dict[str, Any]) -> bytes:
        return encode_sse(msgspec.json.encode({"type": name, **body}), event=name)

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._event(
            "message_start",
            {
                "message": {
                    "id": self._id,
                    "type": "message",
                    "role": "assistant",
                    "model": self._model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                }
            },
        )

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return self._event("content_block_stop", {"index": self._block})

    def _open_block(self, key: tuple[str, int | None], block: dict[str, Any]) -> bytes:
        if self._open == key:
            return b""
        out = self._close()
        self._block += 1
        self._open = key
        return out + self._event(
            "content_block_start", {"index": self._block, "content_block": block}
        )

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return self._event("content_block_delta", {"index": self._block, "delta": delta})

    def encode(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for one chunk."""
        out = self._start()
        if isinstance(chunk, TextDeltaChunk):
            out += self._open_block(("text", None), {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": chunk.text})
        if isinstance(chunk, ReasoningDeltaChunk):
            block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            out += self._open_block(("thinking", None), block)
            return out + self._delta({"type": "thinking_delta", "thinking": chunk.text})
        if isinstance(chunk, ToolCallDeltaChunk):
            if ("tool_use", chunk.index) != self._open:
                self._streamed_calls.add(chunk.index)
                block = {
                    "type": "tool_use",
                    "id": chunk.call_id or "",
                    "name": chunk.name or "",
                    "input": {},
                }
                out += self._open_block(("tool_use", chunk.index), block)
            if chunk.arguments_delta:
                out += self._delta(
                    {"type": "input_json_delta", "partial_json": chunk.arguments_delta}
                )
            return out
        if isinstance(chunk, ResetChunk):
            raise retraction_refused(chunk)
        return out + self._final(chunk)

    def _final(self, chunk: FinalChunk) -> bytes:
        response = chunk.response
        out = b""
        for i, call in enumerate(response.tool_calls):
            if i in self._streamed_calls:
                continue
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call.call_id,
                "name": call.tool,
                "input": {},
            }
            out += self._open_block(("tool_use", i), block)
            out += self._delta(
                {
                    "type": "input_json_delta",
                    "partial_json": msgspec.json.encode(call.args).decode(),
                }
            )
        out += self._close()
        out += self._event(
            "message_delta",
            {
                "delta": {"stop_reason": stop_reason(response), "stop_sequence": None},
                # The whole usage here: message_start went out before the backend counted the
                # prompt, and the SDKs take input and cache counts from this event.
                "usage": usage_to_wire(response.usage),
            },
        )
        return out + self._event("message_stop", {})
