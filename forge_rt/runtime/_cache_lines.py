"""Which of the backend's KV cache lines a call runs on: a small pure choice, like ``pick_next``.

One SlotWorker runs one generation at a time, but a llama-server started with ``--parallel N``
keeps N separate KV caches (``id_slot``). Used as cache lines, they let a preempting call run
without evicting the call it preempted: the preempted call returns to its own line, where its
prompt and partial reply are still cached, and only its new tokens are processed. Urgent
workflows (a voice assistant's) keep lines of their own, so their static prefix (system prompt,
tool schemas) stays warm between requests instead of being pushed out by background work.
"""

from __future__ import annotations

from collections.abc import Sequence

from forge_rt.runtime._scheduling import InferenceJob

__all__ = ["CacheLine", "pick_line"]


class CacheLine:
    """What one backend KV slot holds, as far as the SlotWorker knows."""

    __slots__ = ("held_for", "holds", "index", "key", "last_used", "urgent")

    def __init__(self, index: int) -> None:
        self.index = index
        self.holds: tuple[int, ...] = ()  # fingerprint of the last prompt run here
        self.key: str | None = None  # affinity key of the call that ran here last
        self.held_for: int | None = None  # a preempted job whose partial work lives here
        self.last_used = -1.0
        self.urgent = False  # last used by a call at urgent priority

    def __repr__(self) -> str:
        return f"<CacheLine {self.index} key={self.key!r} held_for={self.held_for}>"


def pick_line(job: InferenceJob, lines: Sequence[CacheLine], *, urgent: bool) -> CacheLine:
    """The line ``job`` runs on (``urgent``: the job is at urgent priority).

    1. A preempted job goes back to the line that holds its partial work.
    2. Lines held for *another* preempted job are left alone while any other line is free.
    3. Of the rest: the line whose cached prompt shares the most leading messages with the
       job's, then the line its workflow (affinity key) used last, then the least recently
       used -- a call that is not urgent takes an urgent workflow's line only when there is no
       other.
    """
    for line in lines:
        if line.held_for == job.id:
            return line
    free = [line for line in lines if line.held_for is None] or list(lines)
    shared = {line.index: _shared(job.fp, line.holds) for line in free}
    best = max(free, key=lambda line: (shared[line.index], -line.index))
    if shared[best.index]:
        return best
    if job.affinity_key is not None:
        for line in free:
            if line.key == job.affinity_key:
                return line
    if not urgent:
        free = [line for line in free if not line.urgent] or free
    return min(free, key=lambda line: (line.last_used, line.index))


def _shared(fp: tuple[int, ...], holds: tuple[int, ...]) -> int:
    """How many leading messages two prompt fingerprints have in common."""
    count = 0
    for a, b in zip(fp, holds, strict=False):
        if a != b:
            break
        count += 1
    return count
