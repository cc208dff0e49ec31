"""A client wrapper that fetches whole replies for requests nobody streams.

The SlotWorker always reads a call as a stream (so it can track partial output for preemption).
A client that asked for a whole reply gains nothing from that: token-by-token SSE from the
backend, parsed and passed chunk by chunk through the slot, costs about a millisecond per
request on a short reply. :class:`WholeReplyClient` answers ``stream()`` for requests marked
with :meth:`whole` by one ``send()`` and a single :class:`~forge_rt.core.FinalChunk`; every
other request streams as before. Preemption still works: cancelling the attempt cancels the
HTTP request, and the re-run sends it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from forge_rt.core import (
    ClientCapabilities,
    FinalChunk,
    InferenceRequest,
    LLMClient,
    LLMResponse,
    StreamChunk,
)

__all__ = ["WholeReplyClient"]


class WholeReplyClient:
    """An :class:`~forge_rt.core.LLMClient` over ``inner`` (see the module docstring)."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner
        # Marked requests by identity: the slot passes the very object it was given (a
        # continued call gets a new object with a prefill, and is then simply streamed).
        self._whole: dict[int, InferenceRequest] = {}

    @contextmanager
    def whole(self, request: InferenceRequest) -> Iterator[None]:
        """While the block runs, ``request`` is fetched whole instead of streamed."""
        self._whole[id(request)] = request
        try:
            yield
        finally:
            del self._whole[id(request)]

    @property
    def model(self) -> str | None:
        return self.inner.model

    @property
    def capabilities(self) -> ClientCapabilities:
        return self.inner.capabilities

    async def send(self, request: InferenceRequest) -> LLMResponse:
        return await self.inner.send(request)

    @asynccontextmanager
    async def stream(self, request: InferenceRequest) -> AsyncIterator[AsyncIterator[StreamChunk]]:
        if self._whole.get(id(request)) is not request:
            async with self.inner.stream(request) as chunks:
                yield chunks
            return
        response = await self.inner.send(request)
        yield _One(FinalChunk(response))

    async def context_length(self) -> int | None:
        return await self.inner.context_length()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _One:
    """An async iterator of exactly one chunk (a plain iterator: nothing to finalize if the
    reader stops after it)."""

    def __init__(self, chunk: StreamChunk) -> None:
        self._chunk: StreamChunk | None = chunk

    def __aiter__(self) -> _One:
        return self

    async def __anext__(self) -> StreamChunk:
        chunk, self._chunk = self._chunk, None
        if chunk is None:
            raise StopAsyncIteration
        return chunk
