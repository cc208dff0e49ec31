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

__all__ = ["check_counts"]


class _Counts(msgspec.Struct):
    messages: list[msgspec.Raw] | None = None
    tools: list[msgspec.Raw] | None = None


_decoder = msgspec.json.Decoder(_Counts)


def check_counts(body: bytes, *, max_messages: int, max_tools: int) -> None:
    """Raise a 413 :class:`ProxyHTTPError` for a request with more messages or tools than
    allowed. A body this pass cannot read is left to the API's own decoder, which says
    precisely what is wrong with it (in the API's words)."""
    # A cheap upper bound first (a C-speed substring count): every message has a "role" key,
    # so a body with few of them cannot be over the limit, and the shape pass is skipped.
    if body.count(b'"role"') <= max_messages and body.count(b'"name"') <= max_tools:
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
