"""JSON bodies for the errors the HTTP server answers by itself, before the app sees a request.

A request h11 cannot parse (a bad chunk size, two content-lengths, headers too large for 431)
is answered by hypercorn directly, with an empty body -- the one place a client of the proxy
would get an error that is not JSON. hypercorn has no hook for it, so :func:`install` replaces
its ``H11Protocol._send_error_response`` with one that writes a body both SDKs read: the
Anthropic envelope (``type: "error"``) around an OpenAI-style ``error`` object. The request was
never parsed, so which API it meant is unknown; this shape satisfies either.

The replaced method is hypercorn's own (private), so the version is pinned in
``pyproject.toml`` and :func:`install` fails loudly if the method is not there.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import h11
import msgspec
from hypercorn.protocol.h11 import H11Protocol

__all__ = ["install"]

_MESSAGES = {
    400: "the request is not valid HTTP/1.1 (its framing, chunk sizes or content-length)",
    408: "the request did not arrive in time",
    413: "the request is too large",
    431: "the request's headers are too large",
}


def error_body(status: int) -> bytes:
    """The body sent for ``status``: readable as an OpenAI and as an Anthropic error."""
    message = _MESSAGES.get(status, f"the HTTP request could not be handled ({status})")
    return msgspec.json.encode(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": message,
                "param": None,
                "code": "malformed_http",
            },
        }
    )


async def _send_json_error_response(self: Any, status_code: int) -> None:
    body = error_body(status_code)
    headers = chain(
        [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ],
        self.config.response_headers("h11"),
    )
    await self._send_h11_event(h11.Response(status_code=status_code, headers=list(headers)))
    await self._send_h11_event(h11.Data(data=body))
    await self._send_h11_event(h11.EndOfMessage())


def install() -> None:
    """Make hypercorn's own HTTP-layer errors JSON (process-wide; idempotent)."""
    if not hasattr(H11Protocol, "_send_error_response"):
        raise RuntimeError(
            "hypercorn's H11Protocol has no _send_error_response: the pinned hypercorn version "
            "changed; update forge_rt/proxy/_http_errors.py"
        )
    H11Protocol._send_error_response = _send_json_error_response  # type: ignore[method-assign]
