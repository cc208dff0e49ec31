"""Supervision settings: when to restart a crashed actor, how often, and how long to wait.

They follow Erlang/OTP: a restart policy per actor, a restart intensity (at most
``max_restarts`` crashes within ``within`` seconds, then give up and escalate to the parent),
and a backoff between restarts so a crash loop does not spin the CPU.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

__all__ = ["Backoff", "RestartIntensity", "RestartPolicy"]


class RestartPolicy(enum.Enum):
    """Whether an actor is restarted when an incarnation ends on its own.

    A stop asked for from outside (``ActorSystem.stop``) never restarts an actor. A crash is an
    exception from ``on_start``, a handler or ``on_stop``; a normal end is ``stop_self()``.
    """

    PERMANENT = "permanent"
    """Always restarted: after a crash and after ``stop_self()``."""
    TRANSIENT = "transient"
    """Restarted after a crash only; ``stop_self()`` stops it for good. The default."""
    TEMPORARY = "temporary"
    """Never restarted: a crash stops it for good (watchers see the crash)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff between restarts: ``initial * factor**(n - 1)`` seconds before the
    n-th restart within the intensity window, capped at ``maximum``.

    It sleeps with ``trio.sleep``, so tests drive it with ``trio.testing.MockClock``.
    ``Backoff(initial=0)`` restarts at once.
    """

    initial: float = 0.01
    factor: float = 2.0
    maximum: float = 1.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0:
            raise ValueError(
                f"Backoff delays must be >= 0, got initial={self.initial}, maximum={self.maximum}"
            )
        if self.factor < 1:
            raise ValueError(
                f"Backoff factor must be >= 1 (delays never shrink), got {self.factor}"
            )

    def delay(self, restart: int) -> float:
        """Seconds to wait before the ``restart``-th restart (1-based) of the current window."""
        if restart < 1:
            raise ValueError(f"restart numbers start at 1, got {restart}")
        return float(min(self.maximum, self.initial * self.factor ** (restart - 1)))


class RestartIntensity:
    """Counts crashes in a sliding window of ``within`` seconds; more than ``max_restarts``
    crashes in the window means supervision gives up.
    """

    __slots__ = ("_crashes", "max_restarts", "within")

    def __init__(self, max_restarts: int, within: float) -> None:
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        if within <= 0:
            raise ValueError(f"within must be > 0 seconds, got {within}")
        self.max_restarts = max_restarts
        self.within = within
        self._crashes: deque[float] = deque()

    def record_crash(self, now: float) -> int:
        """Record a crash at ``now`` and return how many crashes the window holds, this one
        included. The caller gives up when that is more than ``max_restarts``.
        """
        crashes = self._crashes
        crashes.append(now)
        while crashes and crashes[0] <= now - self.within:
            crashes.popleft()
        return len(crashes)
