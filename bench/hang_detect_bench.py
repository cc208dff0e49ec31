"""How fast a hung llama-server is found: the embedded model stopped (SIGSTOP) in mid-prefill.

The SlotWorker learns how far apart the server's progress reports come (``return_progress``:
one when it starts on a prompt, one after each batch) and takes silence of a few times that for
a stall (``StallLimits.report_gap_factor``). This starts the embedded 0.5B, runs ``--warm``
calls with ~600-token prompts so the slot learns the pace, then sends another, stops the server
``--stop-after`` seconds into its prefill and measures how long the slot takes to fail the call
as stalled. Baseline, in the same run: the limit that applied before the learned pace (the
first-token limit for the prompt, at least 30 s). The server is then continued and a call
behind the stalled one is served.

Run: ``python bench/hang_detect_bench.py [--reps 3]`` (the ``local`` extra; ~2 minutes on 2
cores). Prints one JSON line per repetition and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics

import trio

from actors import ActorSystem
from forge_rt.backends.local import LocalModelServer
from forge_rt.clients import LlamaServerClient
from forge_rt.core import InferenceRequest, Message, Sampling
from forge_rt.errors import InferenceStalledError
from forge_rt.runtime import SlotWorker, StallLimits


def _prompt(tag: str) -> InferenceRequest:
    """A prompt of ~600 tokens, different per ``tag`` so no earlier call's cache covers it."""
    text = " ".join(f"{tag} line {i}: crate {i * 7} holds {i * 3} jars." for i in range(60))
    return InferenceRequest(
        messages=(Message.user(text + " How many jars in crate 14?"),),
        sampling=Sampling(max_tokens=8, temperature=0.0),
    )


async def _one(slot: SlotWorker, pid: int, rep: int, stop_after: float) -> dict[str, float]:
    request = _prompt(f"stalled{rep}")
    outcome: dict[str, float] = {}
    failed = trio.Event()

    async def call() -> None:
        try:
            await slot.infer(request)
        except InferenceStalledError:
            outcome["failed_at"] = trio.current_time()
            failed.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call)
        await trio.sleep(stop_after)
        os.kill(pid, signal.SIGSTOP)
        stopped_at = trio.current_time()
        with trio.move_on_after(120):
            await failed.wait()
        os.kill(pid, signal.SIGCONT)
    behind_start = trio.current_time()
    await slot.infer(_prompt(f"behind{rep}"))
    return {
        "detected_s": round(outcome["failed_at"] - stopped_at, 2),
        "baseline_limit_s": round(StallLimits().first_token_limit(request), 1),
        "behind_served_s": round(trio.current_time() - behind_start, 2),
    }


async def main(reps: int, warm: int, stop_after: float) -> None:
    async with (
        LocalModelServer.start(n_ctx=4096) as server,
        LlamaServerClient(server.url) as client,
        ActorSystem.open() as system,
    ):
        slot = await SlotWorker.start(system, client)
        warm_s = []
        for i in range(warm):
            start = trio.current_time()
            await slot.infer(_prompt(f"warm{i}"))
            warm_s.append(trio.current_time() - start)
        rows = []
        for rep in range(reps):
            row = await _one(slot, server.pid, rep, stop_after)
            print(json.dumps(row), flush=True)
            rows.append(row)
    detected = [r["detected_s"] for r in rows]
    print(
        json.dumps(
            {
                "reps": reps,
                "warm_call_s": [round(s, 2) for s in warm_s],
                "detected_median_s": statistics.median(detected),
                "detected_max_s": max(detected),
                "baseline_limit_s": rows[0]["baseline_limit_s"],
                "ratio_max_to_baseline": round(max(detected) / rows[0]["baseline_limit_s"], 3),
            }
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--stop-after", type=float, default=1.5)
    args = parser.parse_args()
    trio.run(main, args.reps, args.warm, args.stop_after)
