"""Where the synthetic ``respond`` tool sits in the tool list, and what the prompt cache keeps.

A chat template writes the offered tools into the prompt in order, and llama-server keeps the
previous prompt of a slot: a new request prefills only from the first token where it differs.
Requests with different tools (a proxy's traffic, BFCL's cases) differ from the first tool on.
With ``respond`` last (what :func:`~forge_rt.guardrails.with_respond` does), each prefills it
again; with ``respond`` first, it would join the opening they share. That order was refused on
BFCL dev (the model then answers without calling where a call was needed: docs/eval/rules.md);
this measures what it would have saved.

This sends the first turn of each of ``--cases`` generated workflows (their own tools, no system
prompt, one token of reply) to the embedded model, in blocks of the two orders alternating, and
reports per request the prompt tokens the server evaluated (``timings.prompt_n``: the rest came
from its cache) and the prefill time (``timings.prompt_ms``); the first request of each block
only warms the cache and is not counted.

Run: ``python bench/respond_order_bench.py [--cases 12] [--blocks 2]`` (the ``local`` extra;
about 3 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Any

import httpx

from forge_rt.backends.local import LocalModelServer
from forge_rt.core import ToolSpec
from forge_rt.eval.generated import generate_suite
from forge_rt.guardrails import respond_spec
from forge_rt.wire import openai_tools_to_wire

ORDERS = ("last", "first")


def _requests(cases: int) -> list[tuple[str, tuple[ToolSpec, ...]]]:
    """The first turn and the tools of ``cases`` generated workflows (fixed seed)."""
    out = []
    for scenario in generate_suite(seed=11, count=cases):
        run = scenario.build()
        out.append((run.turns[0], tuple(tool.spec for tool in run.workflow.tools.values())))
    return out


def _ordered(tools: Sequence[ToolSpec], order: str) -> list[ToolSpec]:
    return [respond_spec(), *tools] if order == "first" else [*tools, respond_spec()]


def _prefill(http: httpx.Client, text: str, tools: Sequence[ToolSpec]) -> tuple[int, float]:
    """Prompt tokens evaluated and prefill milliseconds of one request."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": text}],
        "tools": openai_tools_to_wire(tools),
        "max_tokens": 1,
        "temperature": 0,
        "cache_prompt": True,
    }
    reply = http.post("/v1/chat/completions", json=body)
    reply.raise_for_status()
    timings = reply.json()["timings"]
    return int(timings["prompt_n"]), float(timings["prompt_ms"])


def measure(cases: int, blocks: int) -> dict[str, dict[str, list[float]]]:
    requests = _requests(cases)
    seen: dict[str, dict[str, list[float]]] = {o: {"tokens": [], "ms": []} for o in ORDERS}
    with (
        LocalModelServer.start_blocking(n_ctx=8192) as server,
        httpx.Client(base_url=server.url, timeout=300) as http,
    ):
        for block in range(blocks):
            for order in ORDERS if block % 2 == 0 else ORDERS[::-1]:
                text, tools = requests[-1]
                _prefill(http, text, _ordered(tools, order))  # warms this order's opening
                for text, tools in requests[:-1]:
                    tokens, ms = _prefill(http, text, _ordered(tools, order))
                    seen[order]["tokens"].append(tokens)
                    seen[order]["ms"].append(ms)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--blocks", type=int, default=2)
    args = parser.parse_args()
    seen = measure(args.cases, args.blocks)
    for order in ORDERS:
        tokens, ms = seen[order]["tokens"], seen[order]["ms"]
        print(
            f"respond {order:>5}: {statistics.median(tokens):.0f} prompt tokens evaluated a "
            f"request (median of {len(tokens)}), prefill {statistics.median(ms) / 1000:.2f} s"
            f" median, {sum(ms) / 1000:.1f} s in all"
        )
    saved = [a - b for a, b in zip(seen["last"]["tokens"], seen["first"]["tokens"], strict=True)]
    ratios = [b / a for a, b in zip(seen["last"]["ms"], seen["first"]["ms"], strict=True)]
    print(
        f"the same request, respond first against last: {min(saved):.0f}-{max(saved):.0f} "
        f"prompt tokens fewer, prefill time {statistics.median(ratios):.2f}x (median of "
        f"{len(ratios)}); in all {sum(seen['first']['ms']) / sum(seen['last']['ms']):.2f}x"
    )


if __name__ == "__main__":
    main()
