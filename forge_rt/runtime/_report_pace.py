"""How quickly a backend reports its progress on a prompt: learned, so silence is caught early.

A backend that reports its progress (llama-server's ``return_progress``: a report when it starts
on a prompt and one after each batch it prefills) is alive while reports come. How far apart
they come depends on the model, the batch size and the machine -- about a second for the
embedded 0.5B on the 2-core CPU, several for the 1.5B on a busy one -- so no fixed wait fits
all. :class:`ReportPace` keeps the recent waits of the slot's calls from a report to the next
report or the first token, and :meth:`ReportPace.limit` allows a few times the longest of them:
a server that stops in mid-prefill is caught in seconds, a slower prefill keeps going as long as
it moves at its usual pace.

Only once a call's first report came: before it, the server may still be finishing the batch
of a call just cancelled (a preemption; llama.cpp notices a cancel between batches), and that
wait is not the call's own. It stays under the first-token limit.
"""

from __future__ import annotations

import collections

__all__ = ["KEPT_WAITS", "ReportPace"]

KEPT_WAITS = 32
"""How many recent waits a pace keeps (a slot's last few calls)."""


class ReportPace:
    """The recent waits between a slot's progress reports (shared by the slot's executors).

    ``factor`` times the longest recent wait, and at least ``floor_s``, is how long the next
    may take; ``None`` until a wait was seen (the stall limits' own waits then apply).
    """

    def __init__(self, *, factor: float, floor_s: float) -> None:
        # Both come from StallLimits, which checks them (``report_pace``).
        self._factor = factor
        self._floor_s = floor_s
        self._waits: collections.deque[float] = collections.deque(maxlen=KEPT_WAITS)

    def moved(self, waited: float) -> None:
        """The next report, or the first token, came ``waited`` seconds after a report."""
        self._waits.append(waited)

    def next_limit(self) -> float | None:
        """How long a call may wait after a report for the next one or its first token."""
        if not self._waits:
            return None
        return max(self._floor_s, self._factor * max(self._waits))
