"""HTTP errors of the proxy, rendered in the shape of the API that was called.

A client of ``/v1/chat/completions`` gets OpenAI's ``{"error": {"message", "type", "param",
"code"}}``; a client of ``/v1/messages`` gets Anthropic's ``{"type": "error", "error": {"type",
"message"}}``. Both SDKs turn these into their typed exceptions. Every failure the proxy answers
is translated here, in one place, from forge_rt's typed errors (:func:`from_forge_error`).
"""

from __future__ import annotations

import enum
import math
import re
from typing import Any, Literal

import msgspec

from forge_rt.errors import (
    BackendError,
    BudgetExhaustedError,
    FaultKind,
    ForgeError,
    InferenceDeadlineError,
    ModelNotServedError,
    SlotQueueFullError,
    StreamError,
    ToolCallError,
    ToolLoopError,
    UnsupportedRequestError,
)
from forge_rt.proxy._work import RequestWork

__all__ = [
    "ApiShape",
    "ErrorKind",
    "ProxyHTTPError",
    "encode_error",
    "error_body",
    "from_forge_error",
    "redact",
]

ApiShape = Literal["openai", "anthropic"]

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")

# How much of a model's last raw reply an error body may carry (for the client to see why).
_RAW_KEEP_CHARS = 2000


class ErrorKind(enum.Enum):
    """A class of failure: its HTTP status and the error type each API names it by."""

    # value: (status, OpenAI type, Anthropic type)
    BAD_REQUEST = (400, "invalid_request_error", "invalid_request_error")
    UNAUTHORIZED = (401, "authentication_error", "authentication_error")
    FORBIDDEN = (403, "permission_error", "permission_error")
    NOT_FOUND = (404, "invalid_request_error", "not_found_error")
    METHOD_NOT_ALLOWED = (405, "invalid_request_error", "invalid_request_error")
    BODY_TIMEOUT = (408, "invalid_request_error", "timeout_error")
    TOO_LARGE = (413, "invalid_request_error", "request_too_large")
    UNSUPPORTED_MEDIA = (415, "invalid_request_error", "invalid_request_error")
    QUEUE_FULL = (429, "rate_limit_error", "rate_limit_error")
    INTERNAL = (500, "server_error", "api_error")
    BAD_GATEWAY = (502, "server_error", "api_error")
    GUARDRAIL = (502, "tool_call_error", "api_error")
    UNAVAILABLE = (503, "server_error", "overloaded_error")
    TIMEOUT = (504, "server_error", "timeout_error")

    @property
    def status(self) -> int:
        return self.value[0]

    def type_for(self, shape: ApiShape) -> str:
        return self.value[1] if shape == "openai" else self.value[2]


class ProxyHTTPError(Exception):
    """An error response: ``kind`` (status and type), a message saying what to do, details.

    ``code`` and ``param`` fill OpenAI's fields of the same name; ``details`` is a JSON object
    added as ``error.forge`` (attempts, last raw reply, ...); ``retry`` is the
    ``x-should-retry`` header both SDKs obey (``None``: let the SDK decide by status);
    ``retry_after`` seconds go to a ``retry-after`` header. ``work``: what a request that
    failed after inferences did, as the headers of an answer say it.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        details: dict[str, Any] | None = None,
        retry: bool | None = None,
        retry_after: int | None = None,
        work: RequestWork | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code
        self.param = param
        self.details = details
        self.retry = retry
        self.retry_after = retry_after
        self.work = work

    @property
    def status(self) -> int:
        return self.kind.status

    def headers(self) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        if self.retry is not None:
            out.append((b"x-should-retry", b"true" if self.retry else b"false"))
        if self.retry_after is not None:
            out.append((b"retry-after", str(self.retry_after).encode()))
        if self.kind is ErrorKind.GUARDRAIL:
            out.append((b"x-forge-error", (self.code or "guardrail").encode()))
        if self.work is not None:
            out += self.work.headers()
        return out


def error_body(error: ProxyHTTPError, shape: ApiShape) -> dict[str, Any]:
    """The JSON error object for ``error`` in the shape of the API called."""
    inner: dict[str, Any] = {"type": error.kind.type_for(shape), "message": error.message}
    if shape == "openai":
        inner["param"] = error.param
        inner["code"] = error.code
    if error.details is not None:
        inner["forge"] = error.details
    if shape == "openai":
        return {"error": inner}
    return {"type": "error", "error": inner}


def encode_error(error: ProxyHTTPError, shape: ApiShape) -> bytes:
    """:func:`error_body` as JSON bytes."""
    return msgspec.json.encode(error_body(error, shape))


def redact(text: str) -> str:
    """``text`` with any ``user:password@`` of a URL removed (backend credentials never leak)."""
    return _USERINFO.sub("***@", text)


def _kept(text: str | None) -> str | None:
    if text is None or len(text) <= _RAW_KEEP_CHARS:
        return text
    return text[:_RAW_KEEP_CHARS] + f"... [{len(text) - _RAW_KEEP_CHARS} more characters]"


class _BackendErrorBody(msgspec.Struct):
    error: dict[str, Any] | str | None = None
    message: str | None = None


def _backend_message(body: str | None) -> str | None:
    """The backend's own error message, when its error body carries one."""
    if not body:
        return None
    try:
        parsed = msgspec.json.decode(body, type=_BackendErrorBody)
    except msgspec.DecodeError:
        return _kept(body.strip()) or None
    if isinstance(parsed.error, dict) and isinstance(parsed.error.get("message"), str):
        return _kept(parsed.error["message"])
    if isinstance(parsed.error, str):
        return _kept(parsed.error)
    return _kept(parsed.message)


def from_forge_error(error: ForgeError, *, work: RequestWork | None = None) -> ProxyHTTPError:
    """The error response for a failure of the inference behind one request.

    Exhausted guardrail budgets are 502 with ``x-should-retry: false`` (the model cannot do
    it; an automatic SDK retry would only repeat the work) and carry the attempts, the last
    rejection and the model's last raw reply. A full queue is 429, a missed deadline 504.
    Backend faults are 502 (a backend refusing the proxy's own credentials too: that is the
    operator's to fix), except a backend that rejected the request as malformed or too long,
    which is the client's request: 400 with the backend's own message. A request the
    backend's API cannot express is 400 too. ``work``: what the request did before it failed.
    """
    error_response = _error_response(error)
    error_response.work = work
    return error_response


def _error_response(error: ForgeError) -> ProxyHTTPError:
    """The error response for ``error``, before what the request did is added."""
    if isinstance(error, ToolCallError):
        return ProxyHTTPError(
            ErrorKind.GUARDRAIL,
            f"the model produced no valid tool call in {error.attempts} attempt(s); last "
            f"problem: {error.cause or 'unknown'}. The model's last reply is in "
            "error.forge.last_raw. Retry, rephrase, or use a stronger model.",
            code="tool_call_retries_exhausted",
            details={
                "attempts": error.attempts,
                "cause": error.cause,
                "last_raw": _kept(error.last_raw),
            },
            retry=False,
        )
    if isinstance(error, ToolLoopError):
        return ProxyHTTPError(
            ErrorKind.GUARDRAIL,
            f"the model kept calling {error.tool!r} with {error.args_repr} although the request's "
            "history already holds its result and it was warned; the task is not progressing. "
            "Check that the tool's result tells the model what to do next, or use a stronger "
            "model.",
            code="tool_call_loop",
            details={"tool": error.tool, "arguments": error.args_repr, "repeats": error.repeats},
            retry=False,
        )
    if isinstance(error, BudgetExhaustedError):
        return ProxyHTTPError(
            ErrorKind.GUARDRAIL,
            f"a guardrail budget ran out: {error}",
            code="guardrail_budget_exhausted",
            details={"error": type(error).__name__},
            retry=False,
        )
    if isinstance(error, ModelNotServedError):
        return ProxyHTTPError(
            ErrorKind.NOT_FOUND,
            f"{error} (the models this proxy serves are listed at /v1/models)",
            code="model_not_found",
            param="model",
            details={"served": list(error.served)},
        )
    if isinstance(error, UnsupportedRequestError):
        # The client asked for what the backend's API cannot express: the client's to change.
        return ProxyHTTPError(
            ErrorKind.BAD_REQUEST,
            f"the backend cannot take this request: {error}",
            code="unsupported_by_backend",
        )
    if isinstance(error, SlotQueueFullError):
        return ProxyHTTPError(
            ErrorKind.QUEUE_FULL,
            f"the inference queue is full ({error.limit} calls waiting); retry shortly",
            code="queue_full",
            retry=True,
            retry_after=1,
        )
    if isinstance(error, InferenceDeadlineError):
        return ProxyHTTPError(
            ErrorKind.TIMEOUT,
            f"inference did not finish within {error.deadline_s:g} s "
            f"({'it was running' if error.started else 'it never left the queue'}); "
            "shorten the request (max_tokens, context) or raise the proxy's deadline",
            code="inference_deadline",
            retry=False,
        )
    if isinstance(error, BackendError):
        if error.kind is FaultKind.CLIENT_ERROR and error.status is not None:
            backend = _backend_message(error.body) or "it gave no reason"
            if error.status in (408, 429):
                return ProxyHTTPError(
                    ErrorKind.QUEUE_FULL,
                    f"the backend is busy (it answered {error.status}); retry shortly",
                    code="backend_busy",
                    retry=True,
                    retry_after=1,
                )
            if error.status in (400, 413, 422):
                # The request as the client wrote it (too long for the context, a value the
                # model cannot take): the client's to fix, with the backend's own words.
                return ProxyHTTPError(
                    ErrorKind.BAD_REQUEST,
                    f"the backend rejected this request ({error.status}): {backend}",
                    code="backend_rejected_request",
                )
            if error.status in (401, 403):
                return ProxyHTTPError(
                    ErrorKind.BAD_GATEWAY,
                    f"the backend refused the proxy's credentials ({error.status}); the proxy's "
                    "operator must check its backend API key (--backend-api-key)",
                    code="backend_auth_failed",
                    retry=False,
                )
            return ProxyHTTPError(
                ErrorKind.BAD_GATEWAY,
                f"the backend answered {error.status}: {backend}",
                code="backend_client_error",
                retry=False,
            )
        if error.status == 503:
            # Still unavailable after the slot rode it out: the client is told when to come
            # back, with the backend's own Retry-After where it gave one.
            wait = error.retry_after_s
            return ProxyHTTPError(
                ErrorKind.UNAVAILABLE,
                "the backend is unavailable (it answered 503, and went on answering it while "
                "the proxy retried); retry later",
                code="backend_unavailable",
                retry=True,
                retry_after=max(1, math.ceil(wait)) if wait is not None else 5,
            )
        return ProxyHTTPError(
            ErrorKind.BAD_GATEWAY,
            f"the backend failed ({error.kind.value}): {redact(str(error))}",
            code=f"backend_{error.kind.value}",
            retry=error.retry_safe,
        )
    if isinstance(error, StreamError):
        return ProxyHTTPError(
            ErrorKind.BAD_GATEWAY,
            f"the backend's reply stream broke: {redact(str(error))}",
            code="backend_stream_error",
            retry=True,
        )
    return ProxyHTTPError(
        ErrorKind.BAD_GATEWAY,
        f"the inference failed: {type(error).__name__}: {error}",
        code="inference_failed",
        retry=False,
    )
