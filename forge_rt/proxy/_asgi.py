"""ASGI plumbing: reading a bounded body, answering JSON, streaming SSE, noticing a client leave.

No web framework: the proxy needs four things from HTTP and each is a few lines here. A body is
read against a size limit and a deadline; a streamed response sends its headers only with its
first bytes (so a failure before any content is still a proper HTTP error status); a
:class:`DisconnectWatch` cancels the request's work the moment the client goes away.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import msgspec
import trio

from forge_rt.proxy._errors import ApiShape, ErrorKind, ProxyHTTPError, error_body
from forge_rt.wire import encode_sse

__all__ = [
    "ClientGone",
    "Receive",
    "Responder",
    "Scope",
    "Send",
    "header",
    "read_body",
    "watch_disconnect",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

_JSON = (b"content-type", b"application/json")
_SSE_HEADERS: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower-case), or ``None``."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


class ClientGone(Exception):
    """The client disconnected while its request body was being read."""


async def read_body(
    scope: Scope,
    receive: Receive,
    *,
    limit: int,
    timeout_s: float,
    observe: Callable[[bytes], None] | None = None,
) -> bytes:
    """The whole request body, at most ``limit`` bytes, within ``timeout_s`` seconds.

    ``observe`` sees each chunk as it arrives (a cheap per-chunk count costs nothing then,
    where the same count over the whole body would hold the event loop).

    Raises :class:`ProxyHTTPError` (413 too large, 408 too slow, 400 bad length) and
    :class:`ClientGone` when the client disconnects first.
    """
    declared = header(scope, b"content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ProxyHTTPError(
                ErrorKind.BAD_REQUEST,
                f"content-length {declared.decode(errors='replace')!r} is not a number",
            )
        if int(declared) > limit:
            raise _too_large(limit)
    parts: list[bytes] = []
    size = 0
    with trio.move_on_after(timeout_s):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            parts.append(chunk)
            if observe is not None:
                observe(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)
    raise ProxyHTTPError(
        ErrorKind.BODY_TIMEOUT,
        f"the request body did not arrive within {timeout_s:g} s",
        code="body_timeout",
    )


def _too_large(limit: int) -> ProxyHTTPError:
    return ProxyHTTPError(
        ErrorKind.TOO_LARGE,
        f"the request body is larger than the proxy's limit of {limit:,} bytes",
        code="request_too_large",
    )


async def watch_disconnect(
    receive: Receive, reply: Responder, scope: trio.CancelScope, gone: list[bool]
) -> None:
    """Cancel ``scope`` when the client disconnects before ``reply`` is complete.

    The server also reports a disconnect once a response is complete; that one is not a
    client going away.
    """
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            if not reply.finished:
                gone.append(True)
                scope.cancel()
            return


class Responder:
    """Answers one request: a whole JSON body, or an SSE stream; errors in the API's shape.

    A stream's headers go out with its first bytes. An error before that is a normal error
    response; an error after it is an error event in the API's streaming shape, then the end.
    """

    def __init__(self, send: Send, shape: ApiShape, extra_headers: Headers) -> None:
        self._send = send
        self.shape = shape
        self.extra_headers = extra_headers
        self.started = False
        self.finished = False
        self.status = 0
        self.first_byte_at: float | None = None

    async def json(
        self, status: int, body: Any, headers: Iterable[tuple[bytes, bytes]] = ()
    ) -> None:
        """A whole JSON response (``body`` is encoded unless it is bytes already)."""
        data = body if isinstance(body, bytes) else msgspec.json.encode(body)
        await self.raw(status, data, [_JSON, *headers])

    async def raw(self, status: int, data: bytes, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """A whole response with the given headers (content-length is added)."""
        self.started = True
        self.status = status
        all_headers = [*headers, *self.extra_headers, (b"content-length", str(len(data)).encode())]
        await self._send({"type": "http.response.start", "status": status, "headers": all_headers})
        self.finished = True
        await self._send({"type": "http.response.body", "body": data})

    async def stream(self, data: bytes) -> None:
        """Send ``data`` on the SSE stream, starting the response if needed."""
        if not data:
            return
        if not self.started:
            self.started = True
            self.status = 200
            self.first_byte_at = trio.current_time()
            await self._send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [*_SSE_HEADERS, *self.extra_headers],
                }
            )
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end_stream(self) -> None:
        """Close the SSE stream."""
        self.finished = True
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def error(self, error: ProxyHTTPError) -> None:
        """Report ``error``: as a response, or at the end of a stream already under way."""
        if not self.started:
            await self.json(error.status, error_body(error, self.shape), error.headers())
            self.status = error.status
            return
        body = msgspec.json.encode(error_body(error, self.shape))
        if self.shape == "anthropic":
            await self.stream(encode_sse(body, event="error"))
        else:
            await self.stream(encode_sse(body))
        await self.end_stream()
