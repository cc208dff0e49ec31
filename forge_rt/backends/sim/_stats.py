"""What a simulated backend has done so far, live: the facts tests and benchmarks assert on."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from forge_rt.backends.sim._config import Dialect, Intent

__all__ = ["ReplyRecord", "SimStats", "SlotStats"]


@dataclass
class SlotStats:
    """One slot's counters.

    ``prefilled_tokens`` are prompt tokens the slot had to process; ``cached_tokens`` prompt
    tokens served from its prefix cache; ``cache_tokens`` is how many tokens its cache holds now
    (prompt plus what was actually generated).
    """

    id: int
    requests: int = 0
    prefilled_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    cache_tokens: int = 0
    is_processing: bool = False


@dataclass(frozen=True)
class ReplyRecord:
    """One reply the sim produced: what was intended, how it was rendered, what went out.

    ``content`` and ``tool_calls`` (``(name, arguments JSON)`` pairs) are the full planned reply;
    ``completed`` is false when the client went away or a fault cut it short.
    """

    endpoint: str
    conversation: str
    turn: int
    dialect: Dialect
    intent: Intent | None
    content: str
    tool_calls: tuple[tuple[str, str], ...]
    constraint: str | None
    completed: bool


@dataclass
class SimStats:
    """Live counters of one :class:`SimBackend`; read them at any time, never write them.

    ``requests`` counts every HTTP request by path; ``completed`` generations that ran to the
    end; ``disconnects`` generations stopped because the client went away; ``faults`` injected
    faults by name; ``dialects`` replies by :class:`Dialect`; ``constraints`` requests by the
    field that constrained their output (``response_format``, ``json_schema``, ``grammar``,
    ``format``); ``priorities`` the ``priority`` values seen, in order; ``in_flight`` and
    ``waiting`` are inference requests being handled / waiting for a slot now, ``max_concurrent``
    the most in flight at once; ``ollama_num_ctx_changes`` how often an Ollama request's
    ``options.num_ctx`` differed from the context then loaded (Ollama reloads the model then).
    """

    slots: list[SlotStats]
    requests: Counter[str] = field(default_factory=Counter)
    completed: int = 0
    disconnects: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    dialects: Counter[str] = field(default_factory=Counter)
    constraints: Counter[str] = field(default_factory=Counter)
    priorities: list[int] = field(default_factory=list)
    in_flight: int = 0
    waiting: int = 0
    max_concurrent: int = 0
    restarts: int = 0
    ollama_num_ctx: int | None = None
    ollama_num_ctx_changes: int = 0
    replies: deque[ReplyRecord] = field(default_factory=deque)

    @property
    def prefilled_tokens(self) -> int:
        """Prompt tokens processed, all slots together."""
        return sum(s.prefilled_tokens for s in self.slots)

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens served from a prefix cache, all slots together."""
        return sum(s.cached_tokens for s in self.slots)

    @property
    def generated_tokens(self) -> int:
        """Tokens generated, all slots together."""
        return sum(s.generated_tokens for s in self.slots)
