"""A readiness endpoint the test owns, for launcher tests that must not depend on a child's speed.

The launcher probes ``spec.ready_url``; when the test itself listens on that port *before* the
launch, every probe is answered from the very first one, whatever the machine's load, and the test
hears of each answer on a channel (:func:`serve_probes`, trio) or can count them
(:func:`probes_in_thread`, for the blocking launcher). The child the launcher starts is then a
quiet stand-in (:data:`QUIET_CHILD`) that only has to run until it is told to stop.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import trio

__all__ = ["QUIET_CHILD", "alive_with", "probes_in_thread", "serve_probes"]

QUIET_CHILD = ("sh", "-c", "exec sleep 600", "quiet-backend")
"""A backend program that listens nowhere and runs until SIGTERM (its flags land in ``$@``)."""

Answer = Callable[[int], int]
"""The HTTP status for the n-th probe (counting from 1)."""

_REASONS = {200: "OK", 503: "Service Unavailable"}


def _response(status: int) -> bytes:
    body = b'{"status": "ok"}' if status == 200 else b'{"error": {"message": "Loading model"}}'
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


@asynccontextmanager
async def serve_probes(port: int, answer: Answer) -> AsyncIterator[trio.MemoryReceiveChannel[int]]:
    """Answer every request on ``127.0.0.1:port`` with ``answer(n)``; yields a channel that gets
    ``n`` once the n-th answer has been sent."""
    sent, answered = trio.open_memory_channel[int](1000)
    count = 0

    async def handle(stream: trio.SocketStream) -> None:
        nonlocal count
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                data = await stream.receive_some()
                if not data:
                    return
                head += data
            count += 1
            number = count
            await stream.send_all(_response(answer(number)))
        sent.send_nowait(number)

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, handle, listeners)
        yield answered
        nursery.cancel_scope.cancel()


@contextmanager
def probes_in_thread(port: int, answer: Answer) -> Iterator[list[int]]:
    """:func:`serve_probes` for synchronous tests: serves from a thread and yields the list of
    statuses it has answered so far."""
    answered: list[int] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                status = answer(len(answered) + 1)
                answered.append(status)
            payload = _response(status)
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test reads ``answered``, not a log

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield answered
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def alive_with(marker: str) -> list[int]:
    """Pids of running (not zombie) processes whose command line contains ``marker``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended while we looked
        if marker in cmdline and "\nState:\tZ" not in state:
            pids.append(int(proc.name))
    return pids
