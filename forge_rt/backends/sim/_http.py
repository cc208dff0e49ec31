"""HTTP/1.1 on raw trio sockets with h11, so the sim controls every byte it sends.

An ASGI server would hide exactly what fault injection needs: a reset before the first byte, a
stream cut between two events, a body dripped one byte at a time. Each response head and body,
and each streamed event, goes out in a single ``send`` (trio sets ``TCP_NODELAY`` on accepted
sockets), so Nagle and delayed ACKs add no latency. Connections are kept alive between requests.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import parse_qs

import h11
import trio

__all__ = ["Exchange", "serve_connection"]

_RECEIVE_SIZE = 65536
_MAX_HEAD = 64 * 1024
_SERVER = (b"server", b"forge-rt-sim")


class Exchange:
    """One request and its response on a kept-alive connection.

    The handler reads ``method``, ``path``, ``headers`` (lower-cased names) and ``body``, then
    answers with :meth:`send` (a whole response) or :meth:`begin_stream` / :meth:`event` /
    :meth:`end_stream`, or aborts with :meth:`reset`. Setting ``drip`` makes every write go out
    one byte at a time, ``drip`` seconds apart.
    """

    def __init__(
        self, stream: trio.SocketStream, conn: h11.Connection, request: h11.Request, body: bytes
    ) -> None:
        self._stream = stream
        self._conn = conn
        self.method = request.method.decode("ascii")
        target = request.target.decode("latin-1")
        self.path, _, query = target.partition("?")
        self.query = parse_qs(query)
        self.headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers}
        self.body = body
        self.drip: float | None = None
        self.closed = False
        self.peer_gone = False
        self.started = False
        self._head: bytes = b""
        self._early: list[bytes] = []

    async def _write(self, data: bytes) -> None:
        self.started = True
        if self.drip is None:
            await self._stream.send_all(data)
            return
        for i in range(len(data)):
            await self._stream.send_all(data[i : i + 1])
            await trio.sleep(self.drip)

    def _response(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
        return self._conn.send(h11.Response(status_code=status, headers=[_SERVER, *headers]))

    async def send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Send a whole response (head and body) in one write."""
        head = self._response(
            status,
            [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                *((k.encode(), v.encode()) for k, v in headers),
            ],
        )
        await self._write(
            head + self._conn.send(h11.Data(data=body)) + self._conn.send(h11.EndOfMessage())
        )

    async def send_cut(self, status: int, body: bytes, cut: int, content_type: str) -> None:
        """Announce ``body`` in full but send only its first ``cut`` bytes, then reset."""
        head = self._response(
            status,
            [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        )
        await self._write(head + self._conn.send(h11.Data(data=body[:cut])))
        await self.reset()

    def begin_stream(self, content_type: str) -> None:
        """Start a streamed (chunked) response; the head goes out with the first event."""
        self._head = self._response(
            200, [(b"content-type", content_type.encode()), (b"cache-control", b"no-cache")]
        )

    async def event(self, data: bytes) -> None:
        """Send one streamed event (with the head, if it has not gone out yet)."""
        payload = self._head + self._conn.send(h11.Data(data=data))
        self._head = b""
        await self._write(payload)

    async def end_stream(self) -> None:
        """Finish a streamed response."""
        payload = self._head + self._conn.send(h11.EndOfMessage())
        self._head = b""
        await self._write(payload)

    async def reset(self) -> None:
        """Abort the connection with a TCP reset (``SO_LINGER`` 0), whatever was sent so far."""
        self._stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.closed = True
        await self._stream.aclose()

    async def watch_peer(self, on_gone: Callable[[], None]) -> None:
        """Read from the socket until the client closes it, then call ``on_gone``.

        Runs beside a slow response so a client that goes away is noticed at once, not at the
        next write. Bytes of a pipelined next request are kept for the connection loop.
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
            self._early.append(data)


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
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    body = f'{{"error": "malformed HTTP request: {exc}"}}'.encode()
                    response = h11.Response(
                        status_code=exc.error_status_hint,
                        headers=[_SERVER, (b"content-length", str(len(body)).encode())],
                    )
                    await stream.send_all(
                        conn.send(response)
                        + conn.send(h11.Data(data=body))
                        + conn.send(h11.EndOfMessage())
                    )
                return
            if received is None:
                return
            exchange = Exchange(stream, conn, *received)
            await handler(exchange)
            if exchange.closed or exchange.peer_gone:
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            for data in exchange._early:
                conn.receive_data(data)
    except trio.BrokenResourceError:
        return  # the client reset the connection mid-write: nothing left to answer
    finally:
        await stream.aclose()
