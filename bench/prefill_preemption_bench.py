"""A voice request that arrives during a background prefill, on the embedded model.

llama.cpp handles a cancelled request only between prompt batches. The SlotWorker cancels a
background call the moment a voice request arrives (its connection closes), so how long the
voice request then waits for its first token depends on the server's batch size. For each batch
size this starts the embedded server (two slots: cache lines, as the runtime uses them) and
reports, against the idle-slot voice time-to-first-token measured in the same server:

- a background call with a long prompt (~2,300 tokens here) is sent, and 0.5 s later, in its
  prefill, its connection is closed and the voice request sent;
- the prefill rate of that long prompt on its own (``timings.prompt_per_second``).

Run: ``python bench/prefill_preemption_bench.py [--reps 3]`` (the ``local`` extra; ~3 minutes on
2 cores). It compares :data:`~forge_rt.backends.local.PREEMPTIBLE_BATCH` with llama.cpp's
default (2,048).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
from typing import Any

import httpx

from forge_rt.backends.local import PREEMPTIBLE_BATCH, LocalModelServer

VOICE = "What's the weather in Rome? Answer in one word."
LONG = " ".join(f"item{i} costs {i * 3} euros;" for i in range(220))


def _body(text: str, slot: int, max_tokens: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": True,
        "id_slot": slot,
        "cache_prompt": True,
        "temperature": 0,
    }


def _ttft(http: httpx.Client, text: str) -> float:
    """Seconds from sending ``text`` on slot 1 to its first content chunk."""
    start = time.perf_counter()
    with http.stream("POST", "/v1/chat/completions", json=_body(text, 1, 8)) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                return time.perf_counter() - start
    raise RuntimeError(f"no content chunk for {text!r}")


def _cut_background(port: int, text: str, after_s: float) -> None:
    """Send a background call on slot 0, and close its connection ``after_s`` later."""
    payload = json.dumps(_body(text, 0, 64)).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head + payload)
        time.sleep(after_s)


def _prefill_rate(http: httpx.Client, text: str) -> float:
    body = {**_body(text, 0, 1), "stream": False, "cache_prompt": False}
    reply = http.post("/v1/chat/completions", json=body).json()
    return float(reply["timings"]["prompt_per_second"])


def measure(batch_size: int | None, reps: int) -> dict[str, Any]:
    with (
        LocalModelServer.start_blocking(n_ctx=8192, n_parallel=2, batch_size=batch_size) as server,
        httpx.Client(base_url=server.url, timeout=300) as http,
    ):
        _ttft(http, VOICE)  # the voice prompt's prefix is warm, as a prewarmed line is
        idle = [_ttft(http, f"{VOICE} ({k})") for k in range(reps)]
        loaded = []
        for k in range(reps):
            _cut_background(server.port, f"run {k}: {LONG} Sum all costs.", after_s=0.5)
            loaded.append(_ttft(http, f"{VOICE} [{k}]"))
        rates = [_prefill_rate(http, f"rate {k}: {LONG}") for k in range(reps)]
    return {
        "batch_size": batch_size or 2048,
        "idle_ttft_s": idle,
        "during_prefill_ttft_s": loaded,
        "ratio_median": statistics.median(loaded) / statistics.median(idle),
        "prefill_tokens_per_s": rates,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    for batch_size in (PREEMPTIBLE_BATCH, None):
        result = measure(batch_size, args.reps)
        print(
            f"batch {result['batch_size']:>5}: voice TTFT during a background prefill "
            f"{min(result['during_prefill_ttft_s']):.2f}-{max(result['during_prefill_ttft_s']):.2f} s"
            f" against {min(result['idle_ttft_s']):.2f}-{max(result['idle_ttft_s']):.2f} s idle "
            f"(median ratio {result['ratio_median']:.1f}x); prefill "
            f"{min(result['prefill_tokens_per_s']):.0f}-{max(result['prefill_tokens_per_s']):.0f} "
            "tokens/s"
        )


if __name__ == "__main__":
    main()
