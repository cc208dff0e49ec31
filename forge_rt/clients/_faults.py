"""Translation of transport and HTTP faults into :class:`~forge_rt.errors.BackendError`.

All of it happens here, in one place, so every adapter says the same thing about the same
fault. ``retry_safe`` is True only when nothing of the reply reached the caller, so sending the
request again cannot duplicate output the caller already saw. Of the safe faults only one kind
is retried automatically, once, by the clients themselves: a connection that was reset before
the response started (:data:`AUTO_RETRY_KINDS`) -- typically a kept-alive pooled connection the
server had already closed, which llama-server reports as ``RemoteProtocolError: Server
disconnected without sending a response``. Every other fault goes to the caller, whose policy
decides.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import httpx
import msgspec

from forge_rt.errors import BackendError, ContextOverflowError, FaultKind
from forge_rt.wire import BODY_KEEP_CHARS

__all__ = [
    "AUTO_RETRY_KINDS",
    "deadline_error",
    "status_error",
    "transport_error",
]

AUTO_RETRY_KINDS = frozenset({FaultKind.RESET_BEFORE_FIRST_BYTE})

Phase = Literal["request", "body"]


def transport_error(
    exc: httpx.TransportError, *, method: str, url: str, phase: Phase, delivered: bool
) -> BackendError:
    """Classify an httpx transport error raised while sending (``request``) or reading (``body``).

    ``delivered`` says whether any part of the reply was already handed to the caller.
    """
    where = f"{method} {url}"
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return BackendError(
            f"{where}: timed out connecting to the backend; check that it is up and reachable, "
            "or raise connect_timeout if it is slow to accept connections",
            kind=FaultKind.CONNECT_TIMEOUT,
            retry_safe=True,
            url=url,
        )
    if isinstance(exc, httpx.ConnectError):
        return BackendError(
            f"{where}: could not connect ({exc}); is the backend running and listening on "
            "that address?",
            kind=FaultKind.CONNECT_REFUSED,
            retry_safe=True,
            url=url,
        )
    if isinstance(exc, httpx.TimeoutException):
        waiting = "the response to start" if phase == "request" else "the next part of the body"
        return BackendError(
            f"{where}: no data from the backend while waiting for {waiting} (read timeout); "
            "the backend is stalled or overloaded -- raise read_timeout if it is merely slow",
            kind=FaultKind.READ_TIMEOUT,
            retry_safe=not delivered,
            url=url,
        )
    if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
        if phase == "request":
            return BackendError(
                f"{where}: the connection was closed before the response started ({exc}); "
                "nothing was generated, so sending again is safe",
                kind=FaultKind.RESET_BEFORE_FIRST_BYTE,
                retry_safe=True,
                url=url,
            )
        seen = (
            "part of the reply was already delivered, so it is not safe to resend blindly"
            if delivered
            else "nothing had been delivered yet"
        )
        return BackendError(
            f"{where}: the connection was closed in the middle of the response ({exc}); {seen}",
            kind=FaultKind.RESET_MID_STREAM,
            retry_safe=not delivered,
            url=url,
        )
    if isinstance(exc, httpx.UnsupportedProtocol):
        return BackendError(
            f"{where}: {exc}; the base URL must start with http:// or https://",
            kind=FaultKind.CLIENT_ERROR,
            retry_safe=False,
            url=url,
        )
    # ProxyError and anything httpx adds later: a fault we cannot place is not retried blindly.
    return BackendError(
        f"{where}: transport failure {type(exc).__name__}: {exc}",
        kind=FaultKind.CLIENT_ERROR,
        retry_safe=False,
        url=url,
    )


def status_error(
    status: int,
    reason: str,
    body: str,
    *,
    method: str,
    url: str,
    retry_after: str | None = None,
) -> BackendError:
    """An HTTP error status. 5xx, 408 and 429 are safe to retry; other 4xx are not.

    The body goes to ``BackendError.body`` only: it may echo the prompt, and messages get logged.
    ``retry_after`` is the response's ``Retry-After`` header: kept when it is a number of seconds
    (an HTTP date is rare from a model server and is left out, not guessed).
    """
    wait = float(retry_after) if retry_after is not None and _is_seconds(retry_after) else None
    kept = body[:BODY_KEEP_CHARS]
    where = f"{method} {url}"
    if status >= 500:
        return BackendError(
            f"{where}: the backend answered {status} {reason}; nothing was generated, so the "
            "call is safe to retry -- if it persists, the error body on .body and the backend's "
            "log say why",
            kind=FaultKind.SERVER_ERROR,
            retry_safe=True,
            status=status,
            body=kept,
            url=url,
            retry_after_s=wait,
        )
    if status == 400:
        overflow = _context_overflow(body)
        if overflow is not None:
            prompt, context = overflow
            counts = f" ({prompt} tokens for a context of {context})" if prompt and context else ""
            return ContextOverflowError(
                f"{where}: the backend answered 400: the prompt is longer than its context"
                f"{counts}; shorten the history (a context manager compacts it) or start the "
                "backend with a larger context",
                prompt_tokens=prompt,
                context_tokens=context,
                status=status,
                body=kept,
                url=url,
            )
    hint = (
        "the backend is busy; retry later"
        if status in (408, 429)
        else "the request was rejected; the error body on .body says why"
    )
    return BackendError(
        f"{where}: the backend answered {status} {reason}; {hint}",
        kind=FaultKind.CLIENT_ERROR,
        retry_safe=status in (408, 429),
        status=status,
        body=kept,
        url=url,
        retry_after_s=wait,
    )


def _is_seconds(value: str) -> bool:
    text = value.strip()
    return text.replace(".", "", 1).isdigit()


def deadline_error(deadline: float, *, method: str, url: str, delivered: bool) -> BackendError:
    """The whole-call deadline expired."""
    return BackendError(
        f"{method} {url}: the call did not finish within its {deadline:g} s deadline; "
        "raise the client's deadline or shorten the request (max_tokens, context)",
        kind=FaultKind.DEADLINE,
        retry_safe=not delivered,
        url=url,
    )


# How backends say "the prompt does not fit": llama-server's error type (with the counts as
# fields), OpenAI's error code, vLLM's message.
_OVERFLOW_TYPES = frozenset({"exceed_context_size_error", "context_length_exceeded"})
_LLAMA_COUNTS = re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+)")
_VLLM_COUNTS = re.compile(
    r"maximum context length is (\d+) tokens.*?(?:requested|resulted in|have) (\d+) tokens",
    re.DOTALL,
)


def _context_overflow(body: str) -> tuple[int | None, int | None] | None:
    """(prompt tokens, context tokens) when ``body`` says the prompt exceeds the context."""
    try:
        decoded: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        decoded = None
    error = decoded.get("error") if isinstance(decoded, dict) else None
    fields: dict[str, Any] = error if isinstance(error, dict) else {}
    said = fields.get("message")
    message = said if isinstance(said, str) else body
    llama = _LLAMA_COUNTS.search(message)
    if llama is not None:
        return int(llama.group(1)), int(llama.group(2))
    vllm = _VLLM_COUNTS.search(message)
    if vllm is not None:
        return int(vllm.group(2)), int(vllm.group(1))
    if fields.get("type") in _OVERFLOW_TYPES or fields.get("code") in _OVERFLOW_TYPES:
        prompt, context = fields.get("n_prompt_tokens"), fields.get("n_ctx")
        if isinstance(prompt, int) and isinstance(context, int):
            return prompt, context
        return None, None
    return None
