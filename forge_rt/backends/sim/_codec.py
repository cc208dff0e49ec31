"""The contract each wire API (OpenAI, Anthropic, Ollama) fulfils for the engine.

A codec turns a request body into a :class:`RequestView`, and a :class:`Generation` into a
response body or a sequence of stream events in its API's shape. The engine never builds wire
JSON itself, so faults and timing behave the same on every API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

from forge_rt.backends.sim._generation import Generation, Unit
from forge_rt.backends.sim._view import Api, RequestView, ViewMessage

__all__ = ["BadRequest", "Codec", "StreamEncoder", "build_view", "decode_body"]

CONVERSATION_HEADER = "x-sim-conversation"


class BadRequest(Exception):
    """A request the sim cannot serve; becomes a 4xx in the API's own error shape."""

    def __init__(self, message: str, *, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.kind = kind


def decode_body(body: bytes, type_: type[Any], api: str) -> Any:
    """``body`` decoded into ``type_``, or :class:`BadRequest` saying what and where."""
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        raise BadRequest(f"invalid {api} request body: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise BadRequest(f"{api} request body is not valid JSON: {exc}") from exc


def build_view(
    api: Api,
    messages: list[ViewMessage],
    headers: Mapping[str, str],
    **fields: Any,
) -> RequestView:
    """A :class:`RequestView`: a trailing assistant message becomes the prefill being continued."""
    prefill = None
    if messages and messages[-1].role == "assistant" and not messages[-1].tool_calls:
        prefill = messages.pop().content
    conversation = headers.get(CONVERSATION_HEADER)
    if conversation is None:
        conversation = next((m.content for m in messages if m.role == "user"), "")
    turn = sum(1 for m in messages if m.role == "assistant")
    return RequestView(
        api=api,
        conversation=conversation,
        turn=turn,
        messages=tuple(messages),
        prefill=prefill,
        headers=headers,
        **fields,
    )


class StreamEncoder(Protocol):
    """Stream events for one generation, in order: ``progress`` reports while the prompt is
    prefilled (where the API has them), ``open``, ``delta`` per token, ``close``."""

    def progress(self, *, total: int, cached: int, processed: int) -> list[bytes]: ...

    def open(self) -> list[bytes]: ...

    def delta(self, unit: Unit) -> list[bytes]: ...

    def close(self) -> list[bytes]: ...

    def malformed(self) -> bytes:
        """An event whose payload is not JSON."""
        ...

    def truncated(self) -> bytes:
        """The final event with its JSON cut in half."""
        ...


class Codec(Protocol):
    """One wire API."""

    api: Api
    stream_content_type: str
    id_prefix: str

    def parse(self, body: bytes, headers: Mapping[str, str]) -> RequestView: ...

    def authorised(self, headers: Mapping[str, str], api_key: str) -> bool: ...

    def error(self, status: int, message: str, kind: str) -> bytes: ...

    def response(self, generation: Generation) -> bytes: ...

    def encoder(self, generation: Generation, view: RequestView) -> StreamEncoder: ...
