"""Tools remembered by their wire JSON, so a harness's tools are compiled once, not per request.

Agent harnesses send the same tool list with every request (Claude Code sends about twenty, with
large schemas). Turning one into a :class:`~forge_rt.core.ToolSpec` compiles a validator (a
pydantic model built from the JSON schema), which costs around a millisecond per tool -- more
than everything else the proxy does for a request. :class:`ToolCache` keeps what was built from
the most recently seen tool lists, keyed by their exact JSON as the client sent it (the wire
codecs keep a request's ``tools`` as raw bytes, so a hit costs no decoding at all); a list that
differs in any byte is a different key, so a changed tool is never served from an old entry.
It is the :class:`~forge_rt.wire.ToolMemo` the proxy hands the wire codecs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ToolCache"]

V = TypeVar("V")


class ToolCache(Generic[V]):
    """A bounded, least-recently-used map from a tool list's JSON to what was built from it."""

    def __init__(self, size: int = 256) -> None:
        if size < 1:
            raise ValueError(f"ToolCache size must be at least 1, got {size}")
        self._size = size
        self._built: OrderedDict[bytes, V] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes, build: Callable[[], V]) -> V:
        """What was built for ``key``, by ``build()`` the first time (errors are not cached)."""
        if key in self._built:
            self.hits += 1
            self._built.move_to_end(key)
            return self._built[key]
        self.misses += 1
        built = build()
        self._built[key] = built
        if len(self._built) > self._size:
            self._built.popitem(last=False)
        return built
