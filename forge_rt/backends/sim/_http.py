"""HTTP/1.1 on raw trio sockets, so the sim controls every byte it sends.

An ASGI server would hide exactly what fault injection needs: a reset before the first byte, a
stream cut between two events, a body dripped one byte at a time. Requests are parsed by h11;
responses are written here directly (a status line, a few headers, a body or chunked events),
which is all the sim needs and a third of the per-request cost of sending them through h11. Each
response head and body, and each streamed event, goes out in a single ``send`` (trio sets
``TCP_NODELAY`` on accepted sockets), so Nagle and delayed ACKs add no latency. Connections are
kept alive between requests unless the client asks to close.
"""

from __future__ import annotations

import http
import socket
import struct
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import parse_qs

import h11
import trio

__all__ = ["Exchange", "serve_connection"]

_RECEIVE_SIZE = 65536
_MAX_HEAD = 64 * 1024
_STATUS_LINES = {
    s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\nserver: forge-rt-sim\r\n".encode()
    for s in http.HTTPStatus
}


class Exchange:
    """One request and its response on a kept-alive connection.

    The handler reads ``method``, ``path``, ``headers`` (lower-cased names) and ``body``, then
    answers with :meth:`send` (a whole response) or :meth:`begin_stream` / :meth:`event` /
    :meth:`end_stream`, or aborts with :meth:`reset`. Setting ``drip`` makes every write go out
    one byte at a time, ``drip`` seconds apart.
    """

    def __init__(self, stream: trio.SocketStream, request: h11.Request, body: bytes) -> None:
        self._stream = stream
        self.method = request.method.decode("ascii")
        target = request.target.decode("latin-1")
        self.path, _, query = target.partition("?")
        self.query = parse_qs(query)
        self.headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers}
        self.body = body
        self.drip: float | None = None
        self.closed = False
        self.peer_gone = False
        self.complete = False
        self.early: list[bytes] = []
        self._chunked = request.http_version == b"1.1"
        self.keep_alive = self._chunked and "close" not in self.headers.get("connection", "")
        self._head = b""

    async def _write(self, data: bytes) -> None:
        if self.drip is None:
            await self._stream.send_all(data)
            return
        for i in range(len(data)):
            await self._stream.send_all(data[i : i + 1])
            await trio.sleep(self.drip)

    def _head_bytes(
        self, status: int, headers: Iterable[tuple[str, str]], length: int | None
    ) -> bytes:
        lines = [f"{k}: {v}\r\n" for k, v in headers]
        if length is not None:
            lines.append(f"content-length: {length}\r\n")
        elif self._chunked:
            lines.append("transfer-encoding: chunked\r\n")
        else:
            self.keep_alive = False  # HTTP/1.0 stream: its end is the connection's end
        if not self.keep_alive:
            lines.append("connection: close\r\n")
        return _STATUS_LINES[status] + "".join(lines).encode("latin-1") + b"\r\n"

    async def send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Send a whole response (head and body) in one write."""
        head = self._head_bytes(status, [("content-type", content_type), *headers], len(body))
        await self._write(head + body)
        self.complete = True

    async def send_cut(self, status: int, body: bytes, cut: int, content_type: str) -> None:
        """Announce ``body`` in full but send only its first ``cut`` bytes, then reset."""
        head = self._head_bytes(status, [("content-type", content_type)], len(body))
        await self._write(head + body[:cut])
        await self.reset()

    def begin_stream(self, content_type: str) -> None:
        """Start a streamed (chunked) response; the head goes out with the first event."""
        headers = [("content-type", content_type), ("cache-control", "no-cache")]
        self._head = self._head_bytes(200, headers, None)

    def _frame(self, data: bytes) -> bytes:
        return b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data

    async def event(self, data: bytes) -> None:
        """Send one streamed event (with the head, if it has not gone out yet)."""
        payload = self._head + self._frame(data)
        self._head = b""
        await self._write(payload)

    async def end_stream(self) -> None:
        """Finish a streamed response."""
        payload = self._head + (b"0\r\n\r\n" if self._chunked else b"")
        self._head = b""
        await self._write(payload)
        self.complete = True

    async def reset(self) -> None:
        """Abort the connection with a TCP reset (``SO_LINGER`` 0), whatever was sent so far."""
        self._stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.closed = True
        await self._stream.aclose()

    async def watch_peer(self, on_gone: Callable[[], None]) -> None:
        """Read from the socket until the client closes it, then call ``on_gone``.

        Runs beside a response that can take time, so a client that goes away is noticed at
        once, not at the next write. Bytes of a pipelined next request are kept in ``early``.
        """
        while True:
            try:
                data = await self._stream.receive_some(_RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.peer_gone = True
                on_gone()
                return
            self.early.append(data)


Handler = Callable[[Exchange], Awaitable[None]]


async def _read_request(
    stream: trio.SocketStream, conn: h11.Connection
) -> tuple[h11.Request, bytes] | None:
    """The next request and its body, or ``None`` when the client closed the connection."""
    request: h11.Request | None = None
    body: list[bytes] = []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive_some(_RECEIVE_SIZE)
            except trio.BrokenResourceError:
                return None
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, b"".join(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def serve_connection(stream: trio.SocketStream, handler: Handler) -> None:
    """Serve requests on one connection until either side closes it."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
    try:
        while True:
            try:
                received = await _read_request(stream, conn)
            except h11.RemoteProtocolError as exc:
                body = f"malformed HTTP request: {exc}".encode()
                status = _STATUS_LINES[exc.error_status_hint]
                await stream.send_all(
                    status + b"content-type: text/plain\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%b" % (len(body), body)
                )
                return
            if received is None:
                return
            exchange = Exchange(stream, *received)
            await handler(exchange)
            if exchange.closed or exchange.peer_gone or not exchange.complete:
                return
            if not exchange.keep_alive:
                return
            # h11 parsed the request; the response bypassed it, so the next request starts on
            # a fresh parser holding whatever the client already sent after this one.
            pending, closed = conn.trailing_data
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
            pending += b"".join(exchange.early)
            if pending:
                conn.receive_data(pending)
            if closed:
                conn.receive_data(b"")  # h11's way of saying the client closed its side
    except trio.BrokenResourceError:
        return  # the client reset the connection mid-write: nothing left to answer
    finally:
        await stream.aclose()
