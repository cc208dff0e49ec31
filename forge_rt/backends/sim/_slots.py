"""Inference slots: one request at a time each, a prefix cache each, FIFO waiting for a free one.

A request names a slot (llama-server's ``id_slot``) or takes any free one: the free slot whose
cache shares the longest prefix with the prompt if that covers at least half the prompt, else the
least recently used free slot (llama-server's rule with its default ``--slot-prompt-similarity``
of 0.5). When none is free the request waits in arrival order; a freed slot is handed
straight to the first waiter that can use it, so later arrivals cannot overtake.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import trio

from forge_rt.backends.sim._stats import SimStats, SlotStats

__all__ = ["Slot", "SlotPool", "common_prefix"]

_SIMILARITY = 0.5


def common_prefix(a: list[str], b: list[str]) -> int:
    """Length of the longest common prefix of two token lists (slice compares run in C)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class Slot:
    """One slot: its cache (the tokens of its last prompt plus what it generated) and counters."""

    def __init__(self, stats: SlotStats) -> None:
        self.id = stats.id
        self.stats = stats
        self.cache: list[str] = []
        self.busy = False
        self.last_used = 0.0


class _Waiter:
    def __init__(self, slot_id: int | None) -> None:
        self.slot_id = slot_id
        self.event = trio.Event()
        self.slot: Slot | None = None


class SlotPool:
    """The slots of one backend; keeps ``stats.waiting`` current and calls ``on_change``."""

    def __init__(self, stats: SimStats, on_change: Callable[[], None]) -> None:
        self.slots = [Slot(s) for s in stats.slots]
        self._stats = stats
        self._waiters: deque[_Waiter] = deque()
        self._on_change = on_change

    def _changed(self) -> None:
        self._stats.waiting = len(self._waiters)
        self._on_change()

    def _pick(self, prompt: list[str], slot_id: int | None) -> Slot | None:
        if slot_id is not None:
            slot = self.slots[slot_id]
            return None if slot.busy else slot
        free = [s for s in self.slots if not s.busy]
        if not free:
            return None
        best = max(free, key=lambda s: common_prefix(s.cache, prompt))
        if common_prefix(best.cache, prompt) >= _SIMILARITY * len(prompt):
            return best
        return min(free, key=lambda s: s.last_used)

    def has_free(self, slot_id: int | None) -> bool:
        """Whether a request for ``slot_id`` (``None``: any) would get a slot without waiting."""
        if slot_id is not None:
            return not self.slots[slot_id].busy
        return any(not s.busy for s in self.slots)

    def _take(self, slot: Slot) -> None:
        slot.busy = True
        slot.stats.is_processing = True
        slot.stats.requests += 1

    async def acquire(self, prompt: list[str], slot_id: int | None) -> Slot:
        """A slot for ``prompt``, waiting (FIFO) until one is free; release it with :meth:`release`."""
        slot = self._pick(prompt, slot_id)
        if slot is not None:
            self._take(slot)
            self._changed()
            return slot
        waiter = _Waiter(slot_id)
        self._waiters.append(waiter)
        self._changed()
        try:
            await waiter.event.wait()
        except BaseException:
            # Cancelled while waiting: give back a slot handed over in the meantime.
            if waiter.slot is not None:
                self.release(waiter.slot)
            else:
                self._waiters.remove(waiter)
                self._changed()
            raise
        assert waiter.slot is not None
        return waiter.slot

    def release(self, slot: Slot) -> None:
        """Free ``slot``, handing it to the first waiter that can use it."""
        slot.last_used = trio.current_time()
        for waiter in self._waiters:
            if waiter.slot_id is None or waiter.slot_id == slot.id:
                self._waiters.remove(waiter)
                slot.stats.requests += 1
                waiter.slot = slot
                waiter.event.set()
                break
        else:
            slot.busy = False
            slot.stats.is_processing = False
        self._changed()
