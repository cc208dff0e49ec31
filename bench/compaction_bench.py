"""Cost of context management per inference, against serialising the history once.

    python bench/compaction_bench.py [--sizes 100 1000 10000] [--repeat N]

For histories of 100, 1,000 and 10,000 messages (a seeded tool-calling session: calls, JSON
results, reasoning, failed text replies and their nudges) it measures, as medians of ``--repeat``
runs:

- ``estimate warm``: ``TokenEstimator.count_messages`` on a history it has seen before (the
  steady state: each turn adds a message or two);
- ``estimate cold``: the same with a fresh estimator (first turn, or after a restart);
- ``tiered phase 2`` / ``tiered phase 3``: ``TieredCompact`` with a target that forces that phase
  (every phase before it is priced too);
- the baseline, ``msgspec.json.encode`` of the history: the serialisation every inference pays
  anyway when the request is sent. Ratios are against it, measured in the same run.

Times are this process's CPU time (single-threaded work, no I/O), so a busy shared machine
inflates them less than wall-clock time would.

Goal (from the issue): compaction of 1,000 messages in under 5 ms. ``main()`` is importable so
other benches can run it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forge_rt.context import TieredCompact, TokenEstimator
from forge_rt.core import Message, MessageType, Role, ToolCall

GOAL_MS = {1000: 5.0}


@dataclass(frozen=True)
class Row:
    """One measured figure."""

    name: str
    messages: int
    median_ms: float
    baseline_ms: float

    @property
    def ratio(self) -> float:
        return self.median_ms / self.baseline_ms


def session(size: int, seed: int = 7) -> list[Message]:
    """A tool-calling history of ``size`` messages, the same for the same seed."""
    rng = random.Random(seed)
    cities = ["Paris", "Lagos", "Lima", "Osaka", "Perth", "Quito"]
    history = [
        Message.system("You are a travel assistant. Use the tools; call report when done. " * 4),
        Message.user("Compare the weather this week in Paris, Lagos and Osaka."),
    ]
    turn = 0
    while len(history) < size:
        roll = rng.random()
        if roll < 0.1:
            history.append(Message.assistant_text("I think it is sunny. get_weather(Paris)"))
            history.append(
                Message(
                    role=Role.USER,
                    content="Reply with a tool call, not text. Example: "
                    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
                    type=MessageType.RETRY_NUDGE,
                )
            )
            continue
        if roll < 0.3:
            history.append(
                Message(
                    role=Role.ASSISTANT,
                    content="The forecast so far suggests rain in Paris; next I need Osaka. "
                    * rng.randint(1, 4),
                    type=MessageType.REASONING,
                )
            )
        call = ToolCall(
            tool=rng.choice(["get_weather", "get_forecast"]),
            args={"city": rng.choice(cities), "days": rng.randint(1, 7)},
            call_id=f"call_{turn}",
        )
        turn += 1
        history.append(Message.assistant_calls([call]))
        days = [
            {
                "day": d,
                "high_c": rng.randint(-5, 38),
                "low_c": rng.randint(-15, 20),
                "conditions": rng.choice(["sunny", "light rain", "overcast", "storms"]),
            }
            for d in range(rng.randint(1, 14))
        ]
        history.append(
            Message.tool_result(call, json.dumps({"city": call.args["city"], "days": days}))
        )
    return history[:size]


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """Median CPU time of ``fn`` in ms: this process's CPU time, so other load on a shared
    machine does not count (the work is single-threaded and does no I/O)."""
    times = []
    for _ in range(repeat):
        start = time.process_time_ns()
        fn()
        times.append(time.process_time_ns() - start)
    return statistics.median(times) / 1e6


def measure(size: int, repeat: int) -> list[Row]:
    """Every figure for one history size."""
    history = session(size)
    encode = msgspec.json.Encoder().encode
    baseline = median_ms(lambda: encode(history), repeat)

    warm = TokenEstimator()
    total = warm.count_messages(history)
    strategy = TieredCompact()
    phase1 = strategy.compact(history, total - 1, warm)
    phase2 = strategy.compact(history, phase1.tokens_after - 1, warm)
    phase3 = strategy.compact(history, phase2.tokens_after - 1, warm)
    if (phase1.phase, phase2.phase, phase3.phase) != (1, 2, 3):
        raise RuntimeError(
            f"targets did not force phases 1/2/3 at {size} messages: "
            f"got {phase1.phase}/{phase2.phase}/{phase3.phase}"
        )
    figures = {
        "estimate warm": median_ms(lambda: warm.count_messages(history), repeat),
        "estimate cold": median_ms(lambda: TokenEstimator().count_messages(history), repeat),
        "tiered phase 2": median_ms(
            lambda: strategy.compact(history, phase1.tokens_after - 1, warm), repeat
        ),
        "tiered phase 3": median_ms(
            lambda: strategy.compact(history, phase2.tokens_after - 1, warm), repeat
        ),
    }
    return [Row(name, size, ms, baseline) for name, ms in figures.items()]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Run the bench, print one line per figure, and return the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=15, help="runs per figure (median)")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    for size in args.sizes:
        measured = measure(size, args.repeat if size < 10_000 else max(3, args.repeat // 3))
        print(f"{size} msgs: json.encode baseline {measured[0].baseline_ms:.2f} ms")
        for row in measured:
            goal = GOAL_MS.get(size) if row.name.startswith("tiered") else None
            verdict = (
                f" (goal < {goal:g} ms: {'met' if row.median_ms < goal else 'MISSED'})"
                if goal
                else ""
            )
            print(
                f"  {row.name} {size} msgs: {row.median_ms:.2f} ms, "
                f"{row.ratio:.2f}x the baseline{verdict}"
            )
        rows.extend(measured)
    return rows


if __name__ == "__main__":
    main()
