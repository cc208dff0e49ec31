"""The inference data model: the one protocol every backend adapter speaks, and the typed data
that crosses it.

The loop never sees HTTP: it builds an :class:`InferenceRequest` and gets back an
:class:`LLMResponse` whose ``result`` is a list of :class:`ToolCall` or a :class:`TextResponse`.
Streaming yields typed chunks, ending with a :class:`FinalChunk`. A :class:`ResetChunk` tells the
consumer to discard partial output (an attempt was abandoned: a preemption, a retry).

Clients classify transport faults into :class:`~forge_rt.errors.BackendError`; they never retry
model *content* (that is the guardrails' job).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from forge_rt.core._messages import Message, TextResponse, ToolCall
from forge_rt.core._tools import ToolSpec

__all__ = [
    "TOKEN_LIMIT_REASONS",
    "ClientCapabilities",
    "FinalChunk",
    "GrammarConstraint",
    "InferenceRequest",
    "JsonSchemaConstraint",
    "LLMClient",
    "LLMResponse",
    "OutputConstraint",
    "ReasoningDeltaChunk",
    "ResetChunk",
    "Sampling",
    "StreamChunk",
    "TextDeltaChunk",
    "Timings",
    "ToolCallDeltaChunk",
    "ToolChoice",
    "Usage",
]


class Sampling(msgspec.Struct, frozen=True, kw_only=True):
    """Sampling parameters; ``None`` means "leave it to the backend"."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repeat_penalty: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None

    def merged_over(self, defaults: Sampling) -> Sampling:
        """These values, with ``defaults`` filling every field left as ``None``."""
        fields = {
            name: getattr(self, name)
            if getattr(self, name) is not None
            else getattr(defaults, name)
            for name in self.__struct_fields__
        }
        return Sampling(**fields)

    def as_dict(self) -> dict[str, Any]:
        """The fields that are set, by name."""
        return {n: getattr(self, n) for n in self.__struct_fields__ if getattr(self, n) is not None}


class JsonSchemaConstraint(msgspec.Struct, frozen=True, tag="json_schema"):
    """Constrain the output to instances of a JSON schema."""

    schema: dict[str, Any]


class GrammarConstraint(msgspec.Struct, frozen=True, tag="grammar"):
    """Constrain the output to a GBNF grammar (llama.cpp).

    ``admits_text``: besides calls, the grammar admits a reply of plain text, so a reply
    without a call is the model's choice of an answer, not a constraint the backend ignored.
    """

    gbnf: str
    admits_text: bool = False


OutputConstraint = JsonSchemaConstraint | GrammarConstraint

# "auto" lets the model choose; "required" asks for a call; "none" forbids calls; a tool name
# asks for that tool. Backends that ignore tool_choice are handled by the guardrails, not here.
ToolChoice = Literal["auto", "required", "none"] | str


class InferenceRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One inference: the conversation, the tools offered and how to sample.

    ``assistant_prefill`` continues a partial assistant reply (used to resume a preempted call on
    backends that support prefill). ``slot_id`` pins a llama-server slot for cache reuse.
    ``model`` is the model the caller asks for, where the slot serves several (a
    :class:`~forge_rt.runtime.Fleet` routes by it; ``None``: its default); a client speaks to
    its backend in its own model's name, whatever this says.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    sampling: Sampling = Sampling()
    tool_choice: ToolChoice | None = None
    constraint: OutputConstraint | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    slot_id: int | None = None
    assistant_prefill: str | None = None
    priority: int | None = None
    model: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts as the backend reported them; ``None`` where it did not say."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


class Timings(msgspec.Struct, frozen=True, kw_only=True):
    """Wall-clock facts of one call, in seconds (``None`` where not measured)."""

    total_s: float
    first_token_s: float | None = None


TOKEN_LIMIT_REASONS = frozenset({"length", "max_tokens"})
"""The finish reasons of a reply stopped at its token limit: ``length`` from OpenAI-shaped
backends (llama-server, vLLM, Ollama), ``max_tokens`` from Anthropic-shaped ones, whose
``stop_reason`` reaches :attr:`LLMResponse.finish_reason` as it came."""


class LLMResponse(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed reply: structured tool calls or text, plus what it cost.

    ``raw_text`` is the model's text content exactly as received (kept for error context and
    rescue); ``finish_reason`` is the backend's, when it gave one.
    """

    result: list[ToolCall] | TextResponse
    usage: Usage = Usage()
    timings: Timings = Timings(total_s=0.0)
    finish_reason: str | None = None
    raw_text: str = ""
    model: str | None = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.result if isinstance(self.result, list) else []


class TextDeltaChunk(msgspec.Struct, frozen=True):
    """More visible text from the model."""

    text: str


class ReasoningDeltaChunk(msgspec.Struct, frozen=True):
    """More reasoning ("thinking") text from the model."""

    text: str


class ToolCallDeltaChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A piece of a structured tool call; ``index`` says which call in the reply it extends."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


class FinalChunk(msgspec.Struct, frozen=True):
    """The end of a stream, with the fully assembled response."""

    response: LLMResponse


class ResetChunk(msgspec.Struct, frozen=True):
    """Discard everything streamed so far for this call; ``reason`` says why."""

    reason: str


StreamChunk = TextDeltaChunk | ReasoningDeltaChunk | ToolCallDeltaChunk | FinalChunk | ResetChunk


class PromptProgressChunk(msgspec.Struct, frozen=True, kw_only=True):
    """The backend is still reading the prompt: ``processed`` of its ``total`` tokens are in
    the KV cache, ``cached`` of them reused from an earlier call.

    A backend that reports it (llama-server's ``return_progress``) is alive during a long
    prefill, so the slot tells a slow backend from a hung one by these instead of by a guess
    of prefill speed. It is not part of the reply: the slot consumes it and callers never see
    it, which is why it is not a :data:`StreamChunk`.
    """

    processed: int
    total: int
    cached: int = 0

    @property
    def remaining(self) -> int:
        """Prompt tokens still to prefill."""
        return max(self.total - self.processed, 0)


BackendChunk = StreamChunk | PromptProgressChunk
"""What a client's stream yields: the reply's chunks, and progress reports on the prompt."""


class ClientCapabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What a backend can do, so the runtime never silently assumes a feature."""

    native_tools: bool = True
    json_schema: bool = False
    grammar: bool = False
    assistant_prefill: bool = False
    slots: bool = False
    priority_field: bool = False


@runtime_checkable
class LLMClient(Protocol):
    """A backend adapter.

    ``stream`` is an async context manager so the HTTP response is always closed by its owner
    (trio-safe, like ``httpx.AsyncClient.stream``)::

        async with client.stream(request) as chunks:
            async for chunk in chunks:
                ...
    """

    @property
    def model(self) -> str | None: ...

    @property
    def capabilities(self) -> ClientCapabilities: ...

    async def send(self, request: InferenceRequest) -> LLMResponse: ...

    def stream(
        self, request: InferenceRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[BackendChunk]]: ...

    async def context_length(self) -> int | None: ...

    async def aclose(self) -> None: ...
