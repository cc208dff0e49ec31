"""Fleet: several inference backends as one slot, each call placed on one of them.

Each backend (a *lane*) keeps its own SlotWorker: its queue, priorities, preemption and cache
lines, all as on one backend. The fleet only decides where a call goes, from what it sent each
lane and has not heard back about (its calls in flight there, queued or running):

- a call of a workflow (its ``affinity_key``) goes where that workflow's earlier calls went:
  its prompt is in that backend's KV cache;
- a workflow's first call goes to the lane with the least work ahead of it -- the calls in
  flight there as urgent as it or more -- then the fewest calls in flight;
- an urgent call (``priority`` at ``urgent_priority`` or more urgent) goes where it starts
  soonest, whatever its workflow's lane: an idle lane, else the one with the fewest calls as
  urgent as it, where the lane's SlotWorker preempts the less urgent running call. The
  workflow then stays there (its prompt is there now).

The inference servers are the distributed engine; the fleet schedules across them and never
re-implements them. All lanes serve the same model: ``client`` (read for capabilities and the
context length) is the first lane's.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

from actors import ActorSystem
from forge_rt.core import InferenceRequest, LLMClient, LLMResponse
from forge_rt.runtime._slot import SlotWorker
from forge_rt.runtime._slot_stats import PriorityWaits, SlotStats

__all__ = ["Fleet"]

PINS_KEPT = 4096
"""Workflows whose lane the fleet remembers, least recently used forgotten first: a chat
daemon's weeks of conversations do not grow it without bound (a forgotten workflow is placed
afresh, and only its cached prompt is lost)."""


class Fleet:
    """Several backends' SlotWorkers behind the one ``infer`` a workflow calls (see the module
    docstring). Start one with :meth:`start`, or build it over SlotWorkers already started."""

    def __init__(self, lanes: Sequence[SlotWorker], *, urgent_priority: int = 0) -> None:
        if not lanes:
            raise ValueError("a Fleet needs at least one backend")
        self.lanes = tuple(lanes)
        self.name = "fleet"
        self.client: LLMClient = lanes[0].client
        self.system: ActorSystem = lanes[0].system
        self._urgent = urgent_priority
        self._in_flight: list[Counter[int]] = [Counter() for _ in lanes]  # priority -> calls
        self._pins: OrderedDict[str, int] = OrderedDict()

    @classmethod
    async def start(
        cls,
        system: ActorSystem,
        clients: Sequence[LLMClient],
        *,
        urgent_priority: int = 0,
        **slot_options: Any,
    ) -> Fleet:
        """A SlotWorker per client, named ``lane0``, ``lane1``, ... (``slot_options`` as
        ``SlotWorker.start``'s), as one fleet."""
        lanes = [
            await SlotWorker.start(
                system, client, name=f"lane{i}", urgent_priority=urgent_priority, **slot_options
            )
            for i, client in enumerate(clients)
        ]
        return cls(lanes, urgent_priority=urgent_priority)

    def place(self, *, priority: int = 0, affinity_key: str | None = None) -> int:
        """The lane a call at ``priority`` of the workflow ``affinity_key`` goes to now (see the
        module docstring); the workflow is pinned there."""
        pinned = self._pins.get(affinity_key) if affinity_key is not None else None
        if pinned is not None and priority > self._urgent:
            self._pins.move_to_end(affinity_key)  # type: ignore[arg-type]
            return pinned
        ranked = sorted(
            range(len(self.lanes)),
            key=lambda i: (self._ahead(i, priority), self._total(i), i != pinned, i),
        )
        lane = ranked[0]
        if affinity_key is not None:
            self._pins[affinity_key] = lane
            self._pins.move_to_end(affinity_key)
            while len(self._pins) > PINS_KEPT:
                self._pins.popitem(last=False)
        return lane

    def lane_of(self, affinity_key: str) -> int | None:
        """The lane ``affinity_key``'s workflow is pinned to, if any."""
        return self._pins.get(affinity_key)

    def in_flight(self) -> tuple[int, ...]:
        """The calls in flight on each lane (queued or running), as the fleet counts them."""
        return tuple(self._total(i) for i in range(len(self.lanes)))

    async def infer(
        self, request: InferenceRequest, *, priority: int = 0, **options: Any
    ) -> LLMResponse:
        """Run ``request`` on the lane :meth:`place` picks; options as ``SlotWorker.infer``."""
        lane = self.place(priority=priority, affinity_key=options.get("affinity_key"))
        counts = self._in_flight[lane]
        counts[priority] += 1
        try:
            return await self.lanes[lane].infer(request, priority=priority, **options)
        finally:
            counts[priority] -= 1
            if not counts[priority]:
                del counts[priority]

    async def stats(self) -> SlotStats:
        """The lanes' counters summed, as one slot's (``lane_stats`` for each)."""
        lanes = await self.lane_stats()
        total = SlotStats(name=self.name, **{f: 0 for f in _SUMMED}, running=False, waits={})
        for stats in lanes:
            for field in _SUMMED:
                setattr(total, field, getattr(total, field) + getattr(stats, field))
            total.running = total.running or stats.running
        total.uptime_s = max(s.uptime_s for s in lanes)
        for stats in lanes:
            for priority, waits in stats.waits.items():
                into = total.waits.setdefault(priority, PriorityWaits())
                into.count += waits.count
                into.total_s += waits.total_s
                into.max_s = max(into.max_s, waits.max_s)
        return total

    async def lane_stats(self) -> list[SlotStats]:
        """Each lane's own stats, in lane order."""
        return [await lane.stats() for lane in self.lanes]

    async def recheck(self) -> None:
        """Tell every lane's scheduler to try dispatching again (after a budget change)."""
        for lane in self.lanes:
            await lane.recheck()

    def _ahead(self, lane: int, priority: int) -> int:
        """Calls in flight on ``lane`` that run before a new call at ``priority``: those as
        urgent or more (a less urgent running call is preempted)."""
        return sum(n for p, n in self._in_flight[lane].items() if p <= priority)

    def _total(self, lane: int) -> int:
        return sum(self._in_flight[lane].values())


_SUMMED = (
    "queue_depth",
    "submitted",
    "completed",
    "failed",
    "abandoned",
    "rejected",
    "evicted",
    "preemptions",
    "continued",
    "restarted",
    "backend_cuts",
    "tokens_redecoded",
    "prompt_tokens_reprocessed",
    "prompt_tokens_resumed",
    "cache_hits",
    "busy_s",
    "uptime_s",
)
