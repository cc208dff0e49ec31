"""Tool specs remembered by their wire JSON, so a harness's tools are compiled once, not per request.

Agent harnesses send the same tool list with every request (Claude Code sends about twenty, with
large schemas). Turning one into a :class:`~forge_rt.core.ToolSpec` compiles a validator (a
pydantic model built from the JSON schema), which costs around a millisecond per tool -- more
than everything else the proxy does for a request. :class:`ToolCache` keeps the specs of the
most recently seen tool lists, keyed by their exact JSON; a list that differs in any byte is a
different key, so a changed tool is never served from an old entry.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from forge_rt.core import ToolSpec

__all__ = ["ToolCache"]


class ToolCache:
    """A bounded, least-recently-used map from a tool list's JSON to its specs."""

    def __init__(self, size: int = 256) -> None:
        if size < 1:
            raise ValueError(f"ToolCache size must be at least 1, got {size}")
        self._size = size
        self._specs: OrderedDict[bytes, tuple[ToolSpec, ...]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes, build: Callable[[], Sequence[ToolSpec]]) -> tuple[ToolSpec, ...]:
        """The specs for ``key``, built by ``build()`` the first time (errors are not cached)."""
        specs = self._specs.get(key)
        if specs is not None:
            self.hits += 1
            self._specs.move_to_end(key)
            return specs
        self.misses += 1
        specs = tuple(build())
        self._specs[key] = specs
        if len(self._specs) > self._size:
            self._specs.popitem(last=False)
        return specs
