"""How a constrained reply is written: one value for the three choices every constraint shares."""

from __future__ import annotations

import msgspec

__all__ = ["CallShape"]


class CallShape(msgspec.Struct, frozen=True, kw_only=True):
    """The shape of the replies a tool-call constraint admits.

    ``parallel``: a reply may hold several calls, as a JSON array (the runtime runs a reply's
    calls as one batch; the proxy passes the client's ``parallel_tool_calls``). ``listed`` (with
    ``parallel``): the reply is always that array, of one call or more, so after each call the
    model chooses between another and the end (``GuardrailOptions.call_list``). ``one_tool``
    (with ``listed``): the calls of that array are calls of one tool, a fan-out over items
    (``GuardrailOptions.fan_out``); calls of different tools come one reply each. ``single``
    (with ``one_tool``): tools whose list holds one call -- the tools that write (book, send,
    delete), so a list never changes records the request did not name. ``prose``: text
    that holds no call is a branch too -- a grammar's only (``GuardrailOptions.prose_answers``).
    Built by :meth:`GuardrailOptions.call_shape`, so every constraint of a run has the same shape.
    """

    parallel: bool = True
    listed: bool = False
    one_tool: bool = False
    single: frozenset[str] = frozenset()
    prose: bool = False
