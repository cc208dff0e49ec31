"""The tool cache: a tool list is compiled once per exact JSON, least recently used evicted."""

from __future__ import annotations

import pytest

from forge_rt.core import ToolSpec
from forge_rt.proxy._toolcache import ToolCache


def _spec(name: str) -> ToolSpec:
    return ToolSpec(name=name, parameters={"type": "object", "properties": {}})


def test_second_lookup_reuses_the_first_build() -> None:
    """A key seen before returns the same specs without building again."""
    cache = ToolCache()
    built: list[str] = []

    def build() -> list[ToolSpec]:
        built.append("x")
        return [_spec("a")]

    first = cache.get(b"k", build)
    second = cache.get(b"k", build)
    assert first is second
    assert built == ["x"]
    assert (cache.hits, cache.misses) == (1, 1)


def test_least_recently_used_key_is_evicted() -> None:
    """Over its size the cache forgets the key used longest ago."""
    cache = ToolCache(size=2)
    cache.get(b"a", lambda: [_spec("a")])
    cache.get(b"b", lambda: [_spec("b")])
    cache.get(b"a", lambda: [_spec("a")])
    cache.get(b"c", lambda: [_spec("c")])
    rebuilt: list[str] = []
    cache.get(b"b", lambda: rebuilt.append("b") or [_spec("b")])
    cache.get(b"a", lambda: rebuilt.append("a") or [_spec("a")])
    assert rebuilt == ["b", "a"]


def test_a_failed_build_is_not_cached() -> None:
    """A tool list that fails to compile is tried again next time (and fails again)."""
    cache = ToolCache()

    def bad() -> list[ToolSpec]:
        raise ValueError("bad tool")

    for _ in range(2):
        with pytest.raises(ValueError, match=r"^bad tool$"):
            cache.get(b"k", bad)
    assert cache.misses == 2


def test_size_must_be_positive() -> None:
    """A cache that can hold nothing is refused at construction."""
    with pytest.raises(ValueError, match="at least 1"):
        ToolCache(size=0)
