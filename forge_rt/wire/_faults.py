"""What a codec raises when bytes are not what their protocol promises.

Two audiences, two types. A backend's reply or stream that a decoder cannot read is a
:class:`~forge_rt.errors.BackendError` (``MALFORMED_RESPONSE``, or ``SERVER_ERROR`` for an error
the backend reported inside a 2xx body), so the client adapters' callers see the same typed
fault whichever wire it came from; the transport's faults (timeouts, resets, HTTP statuses) are
the adapters' own, in :mod:`forge_rt.clients`. A client's request that a server-side converter
cannot take is a :class:`msgspec.ValidationError` in msgspec's own format (``... - at
`$.messages[2].role```), so it reads like msgspec's schema errors in the same 400.
"""

from __future__ import annotations

import msgspec

from forge_rt.core import ResetChunk
from forge_rt.errors import BackendError, FaultKind, StreamError

__all__ = [
    "BODY_KEEP_CHARS",
    "in_band_error",
    "invalid",
    "malformed_error",
    "relocated",
    "required",
    "retraction_refused",
    "stream_decode_error",
]

BODY_KEEP_CHARS = 4000
"""How much of a response body an error keeps for diagnosis: bounded, so a huge HTML error page
is not held in memory by every retry record."""

_EXCERPT_CHARS = 120
"""How much of an undecodable stream unit an error quotes: enough to recognise it, and never a
whole (possibly huge) payload in a message that may be logged."""

_AT = " - at `$"


def in_band_error(
    what: str, *, url: str | None, body: str, retry_safe: bool, status: int | None = None
) -> BackendError:
    """An error the backend reported inside a reply or stream it answered with 2xx.

    ``what`` says who reported what (each wire names its error differently); the error text
    goes to ``BackendError.body`` only, like every other body. ``retry_safe`` is the caller's
    to say: an error object in place of a reply is safe, one mid-stream is safe only if nothing
    was delivered before it.
    """
    where = f"{url}: " if url else ""
    return BackendError(
        f"{where}{what}; the error text is on .body",
        kind=FaultKind.SERVER_ERROR,
        retry_safe=retry_safe,
        status=status,
        body=body,
        url=url,
    )


def malformed_error(
    detail: str, *, url: str | None, body: str | bytes, retry_safe: bool = True
) -> BackendError:
    """A body that arrived whole but is not the shape the protocol promises."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    where = f"{url}: " if url else ""
    return BackendError(
        f"{where}the backend's response is not a valid reply: {detail}; is the base URL "
        "pointing at the right kind of server?",
        kind=FaultKind.MALFORMED_RESPONSE,
        retry_safe=retry_safe,
        body=text[:BODY_KEEP_CHARS],
        url=url,
    )


def stream_decode_error(
    unit: str, expected: str, text: str, exc: msgspec.DecodeError, *, partial: str
) -> StreamError:
    """A streamed ``unit`` (chunk, event, line) that does not decode as ``expected``, quoting
    its start; ``partial`` is the text the stream had carried before it."""
    return StreamError(
        f"a streamed {unit} is not {expected}: {exc}; the {unit} began {text[:_EXCERPT_CHARS]!r}",
        partial=partial,
    )


def invalid(message: str, path: str) -> msgspec.ValidationError:
    """A request a server cannot take, saying what and where, in msgspec's own format
    (``... - at `$.messages[2].role```)."""
    return msgspec.ValidationError(f"{message} - at `{path}`")


def required(value: str | None, field: str, why: str, path: str) -> str:
    """``value`` of a field the API requires but the schema leaves optional, so that the error
    can say ``why`` it is needed as well as msgspec's "missing required field"."""
    if value is None:
        raise invalid(f"Object missing required field `{field}`: {why}", path)
    if not value:
        raise invalid(f"`{field}` is empty: {why}", path)
    return value


def relocated(exc: msgspec.ValidationError, base: str) -> msgspec.ValidationError:
    """``exc``, raised decoding a part of a body on its own (a request's tools), located in the
    whole body: ``... - at `$[0].name``` under ``$.tools`` reads ``... - at `$.tools[0].name```."""
    text = str(exc)
    message, sep, where = text.rpartition(_AT)
    if not sep:
        return invalid(text, base)
    return invalid(message, base + where.removesuffix("`"))


def retraction_refused(chunk: ResetChunk) -> ValueError:
    """Why a stream encoder cannot honour a :class:`ResetChunk`: SSE cannot take back what a
    client already received."""
    return ValueError(
        f"cannot retract streamed output ({chunk.reason}); buffer attempts that may "
        "be abandoned instead of streaming them to the client"
    )
