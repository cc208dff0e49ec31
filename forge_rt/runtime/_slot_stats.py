"""What a slot reports of its work: ``SlotStats``, with ``PriorityWaits`` per priority level."""

from __future__ import annotations

import msgspec

__all__ = ["PriorityWaits", "SlotStats"]


class PriorityWaits(msgspec.Struct, kw_only=True):
    """Queue waits (submission to first start) of one priority level, in seconds."""

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0

    @property
    def mean_s(self) -> float:
        return self.total_s / self.count if self.count else 0.0


class SlotStats(msgspec.Struct, kw_only=True):
    """A snapshot of one slot's work.

    Of the calls cut mid-reply -- ``preemptions``, and ``backend_cuts``: streams the backend
    closed mid-reply (a restart) within the retry window -- ``continued`` ones resumed from their
    partial text (nothing lost) and ``restarted`` ones began again; ``evicted`` calls were dropped from the full queue for a
    more urgent arrival, ``rejected`` arrivals refused by it; ``tokens_redecoded`` counts the tokens those restarts threw
    away, to be generated again. ``prompt_tokens_reprocessed`` is what the backend reported
    processing (prompt minus cached tokens) for the attempts that finished preempted calls,
    out of ``prompt_tokens_resumed`` in their prompts: the prefill that preemption cost.
    """

    name: str
    queue_depth: int
    running: bool
    submitted: int
    completed: int
    failed: int
    abandoned: int
    rejected: int
    evicted: int
    preemptions: int
    continued: int
    restarted: int
    backend_cuts: int
    tokens_redecoded: int
    prompt_tokens_reprocessed: int
    prompt_tokens_resumed: int
    cache_hits: int
    busy_s: float
    uptime_s: float
    waits: dict[int, PriorityWaits]

    @property
    def busy_fraction(self) -> float:
        return self.busy_s / self.uptime_s if self.uptime_s > 0 else 0.0
