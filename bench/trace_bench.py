"""Run traces: bytes per turn, what writing them costs, and that replay reproduces them.

1. The eval's sim suite (every scenario, several ablations, the ``qwen-0.5b`` failure rates):
   each run once with its trace and once without, alternately. Prints trace bytes per turn
   (median, p95, mean), the share of each event kind, the run time with traces against without
   (a ratio: the sim is instant, so this is the CPU cost of tracing), and replay's verdict over
   every trace (it must find every decision the same).
2. ``--local``: a few turns on the embedded model (the ``local`` extra), traced and replayed.

Run: ``python bench/trace_bench.py [--runs 2] [--local]`` (about a minute on 2 cores; --local
adds a minute or two).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import tempfile
import time
from pathlib import Path

import msgspec
import trio

from forge_rt.eval import ablation, run_scenario, sim_client
from forge_rt.eval._presets import SIM_RATE_PRESETS
from forge_rt.eval.scenarios import SCENARIOS
from forge_rt.trace import TurnStarted, read_trace, replay

ABLATIONS = ("full", "unconstrained", "no_nudge", "bare")


def _per_turn(files: list[Path]) -> tuple[list[float], collections.Counter[str], int]:
    """Bytes per turn of each trace, bytes by event kind, and the number of turns."""
    per_turn: list[float] = []
    by_kind: collections.Counter[str] = collections.Counter()
    turns = 0
    for path in files:
        events = read_trace(path)
        n = sum(isinstance(e, TurnStarted) for e in events)
        turns += n
        per_turn.append(path.stat().st_size / max(1, n))
        for event in events:
            tag = str(type(event).__struct_config__.tag)
            by_kind[tag] += len(msgspec.json.encode(event)) + 1
    return per_turn, by_kind, turns


async def _sim_suite(runs: int, folder: Path) -> None:
    rates = SIM_RATE_PRESETS["qwen-0.5b"]
    traced_s = plain_s = 0.0
    files: list[Path] = []
    for run in range(runs):
        for name in ABLATIONS:
            preset = ablation(name)
            for scenario in SCENARIOS.values():
                for traced in (True, False) if run % 2 == 0 else (False, True):
                    path = folder / name / f"{scenario.name}-{run}.jsonl" if traced else None
                    async with sim_client(scenario, run, rates=rates) as client:
                        started = time.perf_counter()
                        await run_scenario(
                            scenario, preset, run, client, backend="sim", model="sim", trace=path
                        )
                        took = time.perf_counter() - started
                    if path is not None:
                        traced_s += took
                        files.append(path)
                    else:
                        plain_s += took
    per_turn, by_kind, turns = _per_turn(files)
    total = sum(by_kind.values())
    differences = replies = 0
    for path in files:
        report = replay(path)
        differences += len(report.differences)
        replies += report.replies
    per_turn.sort()
    print(f"sim suite: {len(files)} runs, {turns} turns, {replies} replies replayed")
    print(
        f"  trace bytes per turn: median {statistics.median(per_turn):,.0f}, p95 "
        f"{per_turn[int(0.95 * (len(per_turn) - 1))]:,.0f}, mean {total / turns:,.0f}"
    )
    shares = ", ".join(f"{k} {v / total:.0%}" for k, v in by_kind.most_common())
    print(f"  bytes by event: {shares}")
    print(f"  run time with traces / without: {traced_s / plain_s:.3f}")
    print(f"  replay differences with unchanged guardrails: {differences}")


async def _local(folder: Path) -> None:
    from forge_rt.backends.local import DEFAULT_MODEL, LocalModelServer
    from forge_rt.clients import LlamaServerClient
    from forge_rt.core import Sampling
    from forge_rt.errors import ForgeError
    from forge_rt.runtime import Session

    scenarios = [SCENARIOS["single_lookup"], SCENARIOS["basic_2step"]]
    sampling = Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=96, seed=7)
    async with (
        LocalModelServer.start(DEFAULT_MODEL, n_ctx=4096, n_parallel=1) as server,
        LlamaServerClient(server.url) as client,
        Session.open(client, sampling=sampling, max_iterations=4, trace=folder) as session,
    ):
        for scenario in scenarios:
            instance = scenario.build()
            handle = await session.start(instance.workflow, name=f"local.{scenario.name}")
            for turn in instance.turns:
                try:
                    await handle.send(turn)
                except ForgeError as exc:
                    print(f"  {scenario.name}: ended with {type(exc).__name__}")


def _report_local(folder: Path) -> None:
    files = sorted(folder.glob("*.jsonl"))
    per_turn, _, turns = _per_turn(files)
    report = replay(folder)
    print(
        f"embedded model: {turns} turns, {report.replies} replies, trace bytes per turn "
        f"{sum(p.stat().st_size for p in files) / turns:,.0f} (per trace: "
        f"{', '.join(f'{b:,.0f}' for b in per_turn)}), replay differences "
        f"{len(report.differences)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--local", action="store_true", help="also trace the embedded model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trio.run(_sim_suite, args.runs, Path(tmp) / "sim")
        if args.local:
            trio.run(_local, Path(tmp) / "local")
            _report_local(Path(tmp) / "local")


if __name__ == "__main__":
    main()
