"""An httpx transport whose request bodies cannot leak when the sending task is cancelled.

httpx holds a request body of bytes in a ``ByteStream``, whose ``__aiter__`` is an async
*generator*. httpcore sends a body by iterating it and writing each chunk to the socket; a
cancellation that lands on that write (a preemption, a deadline, a caller that goes away) leaves
the generator suspended at its ``yield``. Nothing ever closes it, so it is garbage-collected
unfinished: trio warns (``ResourceWarning``) and defers its finalisation to the run loop. In a
daemon that preempts thousands of calls that is a steady drip of half-finished generators.

:class:`CancelSafeTransport` wraps any httpx transport and swaps such a body for
:class:`_OneShotBody`, an iterator *object*: abandoning it half-way leaves nothing to finalise.
The bytes, the ``Content-Length`` header and everything else about the request stay as httpx
built them. :class:`~forge_rt.clients.HTTPClient`, which every adapter builds on, sends through
this wrapper whatever transport it is given. (A request without a body, such as the budget
probes' and the managed-backend readiness poll's GETs, never starts the generator.)
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

import httpx

__all__ = ["CancelSafeTransport", "cancel_safe_transport"]


class _OneShotBodyIterator:
    """Yields one bytes chunk, then ends: an async iterator with no generator frame."""

    __slots__ = ("_content",)

    def __init__(self, content: bytes) -> None:
        self._content: bytes | None = content

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        content, self._content = self._content, None
        if content is None:
            raise StopAsyncIteration
        return content


class _OneShotBody(httpx.AsyncByteStream):
    """A request body of known bytes; each iteration (a retry re-sends) starts afresh."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def __aiter__(self) -> _OneShotBodyIterator:
        return _OneShotBodyIterator(self._content)


class CancelSafeTransport(httpx.AsyncBaseTransport):
    """``inner`` with every in-memory request body sent as a :class:`_OneShotBody`."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if isinstance(request.stream, httpx.ByteStream):
            # httpx reads a ByteStream body eagerly, so ``request.content`` is always there.
            request.stream = _OneShotBody(request.content)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)


def cancel_safe_transport(
    inner: httpx.AsyncBaseTransport | None = None, *, limits: httpx.Limits | None = None
) -> CancelSafeTransport:
    """``inner`` (default: httpx's own HTTP transport, with ``limits``) made cancel-safe.

    Give the result to ``httpx.AsyncClient(transport=...)``; a client given a transport ignores
    its own ``limits``, so they go here.
    """
    if inner is None:
        inner = (
            httpx.AsyncHTTPTransport()
            if limits is None
            else httpx.AsyncHTTPTransport(limits=limits)
        )
    elif limits is not None:
        raise ValueError("set limits on the transport you pass, not beside it")
    return CancelSafeTransport(inner)
