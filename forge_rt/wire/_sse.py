"""Server-sent events: an incremental line decoder and an encoder.

The decoder follows the WHATWG event-stream rules for the fields LLM servers use (``data``,
``event``, ``id``, ``retry``, comments) but is strict about everything else: a line that is not
one of those fields is a broken stream, not something to skip, because a chat-completions stream
that carries garbage has lost its framing and its deltas can no longer be trusted.
"""

from __future__ import annotations

import msgspec

from forge_rt.errors import StreamError

__all__ = ["SSEDecoder", "SSEEvent", "encode_sse"]

_KNOWN_FIELDS = frozenset({"data", "event", "id", "retry"})
# llama-server reports a failure inside a stream as a bare `error: {...}` line; it is dispatched
# at once as an event named "error" so the client can raise it as the server's error.
_ERROR_FIELD = "error"


class SSEEvent(msgspec.Struct, frozen=True):
    """One dispatched event: its ``data`` lines joined by newlines, and its ``event`` name."""

    data: str
    event: str | None = None


class SSEDecoder:
    """Turns the lines of an event stream (line endings already stripped) into events.

    Feed every line, including the blank ones that end an event; :meth:`feed_line` returns an
    event when one is complete. At the end of the body call :meth:`close`: an event left
    half-written there was cut off, and is reported rather than guessed at.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._pending = False

    def feed_line(self, line: str) -> SSEEvent | None:
        """Consume one line; return the event it completes, if any."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and name == _ERROR_FIELD:
            return SSEEvent(value.strip(), "error")
        if not sep or name not in _KNOWN_FIELDS:
            raise StreamError(
                f"the event stream carried a line that is not an SSE field: {line[:200]!r}; "
                "the server's stream framing is broken (expected 'data: ...' lines)"
            )
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._pending = True
        elif name == "event":
            self._event = value
            self._pending = True
        return None

    def close(self) -> SSEEvent | None:
        """The body ended: return an event still waiting for its blank line, if any.

        Servers commonly end the body right after the last ``data:`` line without the blank
        line; that event is complete in content, so it is dispatched.
        """
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        """The event the fields so far make up (None if there were none); starts the next."""
        if not self._pending:
            return None
        event = SSEEvent("\n".join(self._data), self._event)
        self._data = []
        self._event = None
        self._pending = False
        return event


def encode_sse(data: bytes | str, *, event: str | None = None) -> bytes:
    """One SSE frame carrying ``data`` (split across ``data:`` lines if it holds newlines)."""
    text = data.decode() if isinstance(data, bytes) else data
    lines = [f"event: {event}"] if event is not None else []
    lines.extend(f"data: {part}" for part in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()
