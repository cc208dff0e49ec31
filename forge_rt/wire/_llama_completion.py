"""llama-server's raw ``/completion`` endpoint, both the request and the reply.

A chat request can be generated from its raw prompt instead of through ``/v1/chat/completions``:
the server's own chat template renders it (``/apply-template``), and ``/completion`` continues
that text. Everything the model writes then arrives as plain text -- tool calls included, which
forge_rt's rescue parser reads -- so a reply cut off half-way can be continued from exactly the
text (and the tokens) it had: the property a preempted call needs. The chat endpoint instead
turns a tool call into structured deltas that no request can resume.

:func:`completion_body` maps a chat body's sampling and constraint fields to ``/completion``'s
names; :class:`CompletionStreamDecoder` reads its stream (keeping each piece's token ids, see
:class:`CompletionPiece`) and :func:`completion_from_wire` a whole reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from forge_rt.core import BackendChunk, LLMResponse, StreamChunk, Timings, Usage
from forge_rt.errors import BackendError
from forge_rt.wire._faults import in_band_error, malformed_error, stream_decode_error
from forge_rt.wire._openai_reply import LlamaPromptProgress, LlamaTimings
from forge_rt.wire._reply import NO_TIMINGS, ReplyAssembler, reply_result

__all__ = [
    "CompletionPiece",
    "CompletionStreamDecoder",
    "PromptPart",
    "completion_body",
    "completion_from_wire",
]

PromptPart = str | int
"""One part of a ``/completion`` prompt: text (tokenized by the server) or a token id."""

# Chat-body fields /completion takes under the same name.
_SAME_NAME = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "stop",
    "grammar",
    "cache_prompt",
    "id_slot",
    "return_progress",
)


def completion_body(
    chat_body: Mapping[str, Any], prompt: Sequence[PromptPart], *, stream: bool
) -> dict[str, Any]:
    """The ``/completion`` body that generates what ``chat_body`` asks for from ``prompt``.

    ``prompt`` is the rendered chat prompt (and any partial reply, as text or token ids);
    sampling, ``grammar``, ``cache_prompt`` and ``id_slot`` keep their names, ``max_tokens``
    becomes ``n_predict`` and a ``json_schema`` response format the bare ``json_schema``.
    ``return_tokens`` is always on: the token ids are what lets a cut reply resume exactly.
    """
    body: dict[str, Any] = {name: chat_body[name] for name in _SAME_NAME if name in chat_body}
    if "max_tokens" in chat_body:
        body["n_predict"] = chat_body["max_tokens"]
    response_format = chat_body.get("response_format")
    if response_format is not None:
        body["json_schema"] = response_format["json_schema"]["schema"]
    body["prompt"] = list(prompt) if len(prompt) != 1 else prompt[0]
    body["stream"] = stream
    body["return_tokens"] = True
    return body


class _ErrorWire(msgspec.Struct, kw_only=True):
    message: str = ""
    code: int | str | None = None


class _CompletionWire(msgspec.Struct, kw_only=True):
    """A ``/completion`` reply or one of its stream events (or an error in their place)."""

    content: str = ""
    tokens: list[int] = msgspec.field(default_factory=list)
    stop: bool = False
    stop_type: str | None = None
    tokens_predicted: int | None = None
    tokens_evaluated: int | None = None
    timings: LlamaTimings | None = None
    prompt_progress: LlamaPromptProgress | None = None
    model: str | None = None
    error: _ErrorWire | None = None


_decoder = msgspec.json.Decoder(_CompletionWire)

# stop_type -> the OpenAI finish reason the rest of forge_rt reads.
_FINISH = {"eos": "stop", "word": "stop", "limit": "length"}


def _finish_reason(wire: _CompletionWire) -> str | None:
    if wire.stop_type is None:
        return None
    return _FINISH.get(wire.stop_type, wire.stop_type)


def _usage(wire: _CompletionWire) -> Usage:
    return Usage(
        prompt_tokens=wire.tokens_evaluated,
        completion_tokens=wire.tokens_predicted,
        cached_tokens=wire.timings.cache_n if wire.timings is not None else None,
    )


def _in_band(error: _ErrorWire, *, url: str | None, retry_safe: bool) -> BackendError:
    return in_band_error(
        f"the backend reported an error inside its reply (code {error.code})",
        url=url,
        body=error.message,
        retry_safe=retry_safe,
    )


class CompletionPiece(msgspec.Struct, frozen=True):
    """One streamed piece of a reply: its text and the token ids that wrote it, or None when
    the event did not carry them all -- llama-server holds back the tokens of a character split
    across several and sends the character with the last token's id alone (its
    ``tokens_predicted`` counter says how many there were)."""

    text: str
    tokens: tuple[int, ...] | None


class CompletionStreamDecoder:
    """Consumes the ``data:`` payloads of a ``/completion`` stream, yielding typed chunks.

    Text goes through the same think-tag splitting as a chat reply. :attr:`pieces` keeps what
    each event carried, text and token ids, so a reply cut off here can be resumed from the
    very tokens it had. :attr:`complete` turns true at the event with ``stop: true``.
    """

    def __init__(self, *, url: str | None = None) -> None:
        self._url = url
        self._reply = ReplyAssembler()
        self._final: _CompletionWire | None = None
        self._predicted = 0  # tokens_predicted as of the last event
        self.pieces: list[CompletionPiece] = []

    @property
    def complete(self) -> bool:
        return self._final is not None

    @property
    def partial_text(self) -> str:
        """The raw text received so far (for error context)."""
        return self._reply.raw_text

    def feed(self, data: str, *, delivered: bool = False) -> list[BackendChunk]:
        """One event's data; raises :class:`StreamError` if it is not a completion event."""
        try:
            wire = _decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise stream_decode_error(
                "event", "a /completion event", data, exc, partial=self.partial_text
            ) from exc
        if wire.error is not None:
            raise _in_band(wire.error, url=self._url, retry_safe=not delivered)
        if wire.content or wire.tokens:
            self.pieces.append(CompletionPiece(wire.content, self._tokens_of(wire)))
        if wire.stop:
            self._final = wire
        out: list[BackendChunk] = []
        if wire.prompt_progress is not None:
            out.append(wire.prompt_progress.chunk())
        if wire.content:
            out.extend(self._reply.text(wire.content))
        return out

    def _tokens_of(self, wire: _CompletionWire) -> tuple[int, ...] | None:
        """The event's token ids, or None when the counter says it wrote more than it lists."""
        if wire.tokens_predicted is None:
            return None
        new, self._predicted = wire.tokens_predicted - self._predicted, wire.tokens_predicted
        return tuple(wire.tokens) if new == len(wire.tokens) else None

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]:
        """The stream ended: the last held-back text, and the assembled response."""
        final = self._final
        assert final is not None  # the shared loop calls finish only once complete
        tail, result = self._reply.finish()
        return tail, LLMResponse(
            result=result,
            usage=_usage(final),
            timings=timings,
            finish_reason=_finish_reason(final),
            raw_text=self.partial_text,
            model=final.model,
        )


def completion_from_wire(
    body: bytes, *, timings: Timings = NO_TIMINGS, url: str | None = None
) -> LLMResponse:
    """A whole (non-streamed) ``/completion`` reply; raises ``BackendError`` for a body that is
    not one, or that is an error object."""
    try:
        wire = _decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise malformed_error(str(exc), url=url, body=body) from exc
    if wire.error is not None:
        raise _in_band(wire.error, url=url, retry_safe=True)
    if not wire.stop:
        raise malformed_error("it is not a finished completion (no stop: true)", url=url, body=body)
    return LLMResponse(
        result=reply_result(wire.content, None, ()),
        usage=_usage(wire),
        timings=timings,
        finish_reason=_finish_reason(wire),
        raw_text=wire.content,
        model=wire.model,
    )
