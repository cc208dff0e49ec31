"""Request limits checked before a body is decoded in full: how many messages, how many tools.

A body under the size limit can still hold a million tiny messages; decoding those into
forge_rt's data model holds the event loop for seconds (every other route with it) and the
memory for hundreds of megabytes. A first pass decodes only the shape -- ``messages`` and
``tools`` as raw, unparsed spans, tens of milliseconds for the largest body allowed -- and a
request over a limit is refused with 413 before anything is built from it.
"""

from __future__ import annotations

import msgspec

from forge_rt.proxy._errors import ErrorKind, ProxyHTTPError

__all__ = ["BodyTally", "check_counts"]


class BodyTally:
    """Upper bounds of a body's messages and tools, counted chunk by chunk as it arrives.

    Every message has a ``"role"`` key and every tool a ``"name"``, so the number of those
    strings bounds the counts from above; the pieces of a pattern split across two chunks are
    joined through the last few bytes carried over.
    """

    _PATTERNS = (b'"role"', b'"name"')

    def __init__(self) -> None:
        self.counts = [0, 0]
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        window = self._tail + chunk
        for index, pattern in enumerate(self._PATTERNS):
            self.counts[index] += window.count(pattern)
        keep = len(self._PATTERNS[0]) - 1  # too short to hold a whole pattern: never recounted
        self._tail = window[-keep:]

    @property
    def roles(self) -> int:
        return self.counts[0]

    @property
    def names(self) -> int:
        return self.counts[1]


class _Counts(msgspec.Struct):
    messages: list[msgspec.Raw] | None = None
    tools: list[msgspec.Raw] | None = None


_decoder = msgspec.json.Decoder(_Counts)


def check_counts(body: bytes, tally: BodyTally, *, max_messages: int, max_tools: int) -> None:
    """Raise a 413 :class:`ProxyHTTPError` for a request with more messages or tools than
    allowed. ``tally`` is the body's :class:`BodyTally`: when its bounds are within the limits
    (every real request) the shape pass is skipped. A body this pass cannot read is left to
    the API's own decoder, which says precisely what is wrong with it (in the API's words)."""
    if tally.roles <= max_messages and tally.names <= max_tools:
        return
    try:
        counts = _decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return  # not this check's to report: the full decode refuses it next, with the reason
    for field, items, limit in (
        ("messages", counts.messages, max_messages),
        ("tools", counts.tools, max_tools),
    ):
        if items is not None and len(items) > limit:
            raise ProxyHTTPError(
                ErrorKind.TOO_LARGE,
                f"the request has {len(items)} {field}; this proxy takes at most {limit} "
                f"(--max-{field})",
                code="request_too_large",
                param=field,
            )
