"""The HTTP transport the proxy gives its backend client: one send per request, not two.

httpcore writes an HTTP/1.1 request as two socket writes, head then body. Each write is a
syscall and a wake-up of the backend; on a busy machine that is a measurable share of what the
proxy adds per request. :class:`CoalescingBackend` wraps httpcore's trio network backend so a
connection's writes are held until the connection next reads -- which, in HTTP/1.1, is right
after the request is complete -- and go out as one write. Nothing else changes: timeouts, TLS,
connection pooling and httpx's error mapping are httpx's and httpcore's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

__all__ = ["CoalescingBackend", "coalescing_transport"]


class _CoalescingStream(httpcore.AsyncNetworkStream):
    """A network stream whose writes wait for the next read (or TLS start) to go out."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._pending: list[bytes] = []
        self._timeout: float | None = None

    async def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            await self._inner.write(data, timeout=self._timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 -- httpcore's interface
        if buffer:
            self._pending.append(buffer)
            self._timeout = timeout

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 -- httpcore's interface
        await self._flush()
        return await self._inner.read(max_bytes, timeout=timeout)

    async def aclose(self) -> None:
        # Closing abandons the connection, and with it anything not yet sent.
        self._pending.clear()
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
    ) -> httpcore.AsyncNetworkStream:
        await self._flush()
        upgraded = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _CoalescingStream(upgraded)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class CoalescingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's trio backend, with :class:`_CoalescingStream` connections."""

    def __init__(self) -> None:
        self._inner = httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _CoalescingStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 -- httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return _CoalescingStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


def coalescing_transport(*, limits: httpx.Limits = _LIMITS) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose connections send each request in one write (HTTP/1.1)."""
    transport = httpx.AsyncHTTPTransport(limits=limits)
    # httpx builds its httpcore pool privately and offers no network_backend option; the pool
    # is replaced by an identical one on our backend. The check keeps an httpx change loud.
    if not isinstance(transport._pool, httpcore.AsyncConnectionPool):
        raise TypeError(
            f"httpx.AsyncHTTPTransport no longer holds an httpcore pool ({type(transport._pool)}); "
            "update forge_rt.proxy._transport for this httpx version"
        )
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=CoalescingBackend(),
    )
    return transport
