"""Request bodies and SSE helpers shared by the simulated backend's tests."""

from __future__ import annotations

from typing import Any

import msgspec
import trio

WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "respond",
            "description": "Give the final answer to the user.",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"],
            },
        },
    },
]


def sse_payloads(text: str) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]


def sse_json(text: str) -> list[dict[str, Any]]:
    """The JSON ``data:`` payloads of an SSE body (``[DONE]`` left out)."""
    return [msgspec.json.decode(p) for p in sse_payloads(text) if p != "[DONE]"]


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """Names of OpenAI-style tool definitions."""
    return [t["function"]["name"] for t in tools]


def user(text: str) -> list[dict[str, Any]]:
    """A one-message conversation."""
    return [{"role": "user", "content": text}]


class RawClient:
    """An HTTP/1.1 client on a bare trio socket, for reading a response byte by byte.

    httpx cannot hang up in the middle of a stream without leaving its async generators to the
    garbage collector; this one just closes its socket.
    """

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.received = b""

    @classmethod
    async def connect(cls, url: str) -> RawClient:
        host, port = url.removeprefix("http://").split(":")
        return cls(await trio.open_tcp_stream(host, int(port)))

    async def send(
        self, path: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
    ) -> None:
        """Send one request (POST with a JSON body, or GET without)."""
        payload = msgspec.json.encode(body) if body is not None else b""
        lines = [
            f"{'POST' if body is not None else 'GET'} {path} HTTP/1.1",
            "host: sim",
            f"content-length: {len(payload)}",
            "content-type: application/json",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        await self.stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)

    async def receive(self) -> bytes:
        """Wait for more bytes; everything received so far (raises if the peer closed)."""
        data = await self.stream.receive_some(65536)
        if not data:
            raise EOFError(f"connection closed; received so far: {self.received!r}")
        self.received += data
        return self.received

    async def read_until(self, marker: bytes) -> bytes:
        """Everything received so far, once ``marker`` is in it (raises if the peer closes)."""
        while marker not in self.received:
            await self.receive()
        return self.received

    async def read_to_end(self) -> bytes:
        """Everything received until the server closes the connection."""
        while data := await self.stream.receive_some(65536):
            self.received += data
        return self.received

    async def aclose(self) -> None:
        await self.stream.aclose()


def delta_text(line: str) -> str:
    """The content delta of one OpenAI SSE line ('' when it carries none)."""
    if not line.startswith("data: {"):
        return ""
    choices = msgspec.json.decode(line[len("data: ") :]).get("choices") or [{}]
    return choices[0].get("delta", {}).get("content") or ""
