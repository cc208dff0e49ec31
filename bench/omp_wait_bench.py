"""The embedded llama.cpp server's speed with OpenMP's default wait policy and with PASSIVE.

llama.cpp's CPU threads wait for each other through OpenMP; by default a waiting thread spins. On
a machine of two cores that runs anything else -- a second embedded server, the test suite --
the spinning threads take the cores the working ones need (a second server decoded at 0.4
tokens/s beside an eval's, 12.3 with ``OMP_WAIT_POLICY=PASSIVE``; bench/gpu_check.py's notes).
This measures what PASSIVE costs when the server is alone: for each policy it starts the
embedded 0.5B and sends the same ``--reps`` requests (a ~400-token prompt each, different so no
cache covers it, 32 tokens generated), and reports llama-server's own prompt and decode tokens/s,
and the ratio PASSIVE / default of their medians, measured in the same run.

Run on an idle machine: ``python bench/omp_wait_bench.py [--reps 3]`` (the ``local`` extra; about
two minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any

import httpx

from forge_rt.backends.local import LocalModelServer

POLICY = "OMP_WAIT_POLICY"


def _prompt(tag: str) -> str:
    return " ".join(f"{tag} row {i}: bin {i * 11} holds {i * 4} bolts." for i in range(40))


def _speeds(url: str, tag: str) -> dict[str, float]:
    body: dict[str, Any] = {
        "prompt": _prompt(tag) + " How many bolts in bin 77?",
        "n_predict": 32,
        "temperature": 0.0,
        "cache_prompt": False,
        "ignore_eos": True,  # always 32 tokens: a reply that ends at once has no decode speed
    }
    timings = httpx.post(f"{url}/completion", json=body, timeout=300).json()["timings"]
    return {
        "prompt_tps": float(timings["prompt_per_second"]),
        "decode_tps": float(timings["predicted_per_second"]),
    }


def _measure(policy: str | None, reps: int) -> dict[str, float]:
    if policy is None:
        os.environ.pop(POLICY, None)
    else:
        os.environ[POLICY] = policy
    with LocalModelServer.start_blocking(n_ctx=4096) as server:
        _speeds(server.url, "warm")
        rows = [_speeds(server.url, f"{policy}{i}") for i in range(reps)]
    return {
        "prompt_tps": statistics.median(r["prompt_tps"] for r in rows),
        "decode_tps": statistics.median(r["decode_tps"] for r in rows),
    }


def main(reps: int) -> None:
    default = _measure(None, reps)
    passive = _measure("PASSIVE", reps)
    print(
        json.dumps(
            {
                "reps": reps,
                "default": default,
                "passive": passive,
                "prompt_ratio": round(passive["prompt_tps"] / default["prompt_tps"], 3),
                "decode_ratio": round(passive["decode_tps"] / default["decode_tps"], 3),
            }
        )
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    main(parser.parse_args().reps)
