"""A byte-scripted HTTP/1.1 server on 127.0.0.1 for wire-shape tests (a fake, not a mock).

Each request is answered by the next :class:`Reply` in the script: a status, headers and body
parts sent as they are, or a transport fault (a close before any byte, a close after some body
parts, a hang). Requests are recorded, so tests assert on exactly what a client sent. The
simulated backend covers whole-API behaviour; this covers byte-level shapes the sim does not
produce (a particular server's quirks).
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

import h11
import msgspec
import trio

__all__ = ["Captured", "Reply", "ScriptedServer", "scripted_server", "sse"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``parts`` are sent chunked, one write each.

    ``fault``: ``"close_before"`` closes the connection after reading the request, before any
    response byte; ``"close_after_parts"`` sends the head and ``parts`` then closes without
    ending the body; ``"hang"`` never answers.
    """

    status: int = 200
    parts: Sequence[bytes] = ()
    content_type: str = "application/json"
    fault: Literal["close_before", "close_after_parts", "hang"] | None = None

    @classmethod
    def json(cls, body: object, status: int = 200) -> Reply:
        return cls(status=status, parts=[msgspec.json.encode(body)])


@dataclass(frozen=True)
class Captured:
    """One request as the server read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return msgspec.json.decode(self.body)


def sse(*payloads: object, event: str | None = None) -> list[bytes]:
    """SSE frames for JSON payloads (strings are sent as they are)."""
    out = []
    for p in payloads:
        data = p if isinstance(p, str) else msgspec.json.encode(p).decode()
        head = f"event: {event}\n" if event else ""
        out.append(f"{head}data: {data}\n\n".encode())
    return out


@dataclass
class ScriptedServer:
    """The running server: ``url``, the recorded ``requests`` and the remaining ``replies``."""

    url: str = ""
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Captured] = field(default_factory=list)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)


async def _read_request(
    stream: trio.SocketStream, conn: h11.Connection
) -> tuple[h11.Request, bytes] | None:
    request: h11.Request | None = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(data)
            continue
        if isinstance(event, h11.ConnectionClosed):
            return None
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, body


async def _serve(server: ScriptedServer, stream: trio.SocketStream) -> None:
    async with stream:
        try:
            await _answer(server, stream, h11.Connection(h11.SERVER))
        except trio.BrokenResourceError:
            return  # the client reset the connection: it left a stream before its end


async def _answer(server: ScriptedServer, stream: trio.SocketStream, conn: h11.Connection) -> None:
    """Answer the requests of one connection from the script, until it closes."""
    while True:
        got = await _read_request(stream, conn)
        if got is None:
            return
        request, body = got
        server.requests.append(
            Captured(
                method=request.method.decode(),
                path=request.target.decode(),
                headers={k.decode(): v.decode() for k, v in request.headers},
                body=body,
            )
        )
        reply = server.replies.popleft()
        if reply.fault == "close_before":
            return
        if reply.fault == "hang":
            await trio.sleep_forever()
        headers = [("content-type", reply.content_type), ("transfer-encoding", "chunked")]
        await stream.send_all(conn.send(h11.Response(status_code=reply.status, headers=headers)))
        for part in reply.parts:
            await stream.send_all(conn.send(h11.Data(data=part)))
        if reply.fault == "close_after_parts":
            return
        await stream.send_all(conn.send(h11.EndOfMessage()))
        conn.start_next_cycle()


@asynccontextmanager
async def scripted_server(*replies: Reply) -> AsyncIterator[ScriptedServer]:
    """Serve ``replies`` (more can be added with ``server.script``) until the block ends."""
    server = ScriptedServer(replies=deque(replies))
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, _Handler(server), 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        port = listeners[0].socket.getsockname()[1]
        server.url = f"http://127.0.0.1:{port}"
        yield server
        nursery.cancel_scope.cancel()


class _Handler:
    def __init__(self, server: ScriptedServer) -> None:
        self._server = server

    async def __call__(self, stream: trio.SocketStream) -> None:
        await _serve(self._server, stream)
