"""The proxy under bad input and a faulty backend: clear answers fast, nothing hung, nothing lost.

Three processes, like a real deployment: a simulated backend (``forge-rt sim``, instant, with
injected faults in the soak), the proxy (``forge-rt proxy``, stall limit 2 s) and this load
generator. Two phases, each against a baseline measured in the same run:

- **bad input**: ``/health`` latency on the idle proxy (the baseline), then each payload class
  below sent while ``/health`` is polled back to back. Reported: every class's status and time
  to its answer, whether the answer is JSON in the API's shape, and ``/health``'s p99 during the
  phase against idle.
- **soak**: ``--seconds`` of ``--concurrency`` clients mixing streamed and whole requests while
  the sim fails a share of them (503, resets, malformed SSE, hangs). Reported: requests sent,
  answered 2xx, answered with a typed error, hung (no answer within the client's 30 s timeout),
  lost (sent minus answered), and the proxy's RSS and open file descriptors at start and end.

Every request has a timeout and every phase a bound, so the bench cannot hang::

    python bench/hardening_bench.py                 # 60 s soak
    python bench/hardening_bench.py --seconds 600   # the 10-minute soak
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import trio
from _processes import free_port, spawn

CHAT = "/v1/chat/completions"
BASE: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
JSON_TYPE = {"content-type": "application/json"}
SOAK_FAULTS = {
    "http_503": 0.02,
    "reset_before_first_byte": 0.02,
    "reset_mid_stream": 0.02,
    "malformed_sse": 0.02,
    "truncated_json": 0.01,
    "hang": 0.01,
}
CLIENT_TIMEOUT_S = 30.0


def _deep_json(depth: int) -> bytes:
    schema = '{"type":"string"}'
    for _ in range(depth):
        schema = '{"type":"object","properties":{"a":' + schema + "}}"
    tool = '{"type":"function","function":{"name":"f","parameters":' + schema + "}}"
    return (
        '{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[' + tool + "]}"
    ).encode()


def _tool(params: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": params}}


# Accepted on purpose: a structural keyword that breaks JSON Schema is dropped and named.
SERVED = frozenset({"properties: 'nope'"})


def bad_inputs() -> dict[str, dict[str, Any]]:
    """Payload classes: what was sent, as ``httpx.request`` keyword arguments."""
    one = b'{"role":"user","content":"x"}'
    many = b'{"model":"m","messages":[' + b",".join([one] * 1_000_000) + b"]}"
    fits = b'{"model":"m","messages":[' + b",".join([one] * 250_000) + b"]}"
    return {
        "1e6 messages (28 MB)": {"content": many, "headers": JSON_TYPE},
        "250k messages (7 MB, under the size limit)": {"content": fits, "headers": JSON_TYPE},
        "JSON 3000 deep": {"content": _deep_json(3000), "headers": JSON_TYPE},
        "schema 100 deep": {"content": _deep_json(100), "headers": JSON_TYPE},
        "properties: 'nope'": {
            "json": {**BASE, "tools": [_tool({"type": "object", "properties": "nope"})]}
        },
        "two tools one name": {
            "json": {**BASE, "tools": [_tool({"type": "object"}), _tool({"type": "object"})]}
        },
        "orphan tool result": {
            "json": {
                **BASE,
                "messages": [
                    *BASE["messages"],
                    {"role": "tool", "tool_call_id": "x", "content": "r"},
                ],
            }
        },
        "not JSON": {"content": b"{not json", "headers": JSON_TYPE},
        "text/plain (CSRF)": {
            "content": json.dumps(BASE).encode(),
            "headers": {"content-type": "text/plain", "origin": "http://evil.example"},
        },
        "Host: attacker (rebinding)": {"json": BASE, "headers": {"host": "attacker.example"}},
        "priority -1e18": {"json": BASE, "headers": {"x-forge-priority": "-1000000000000000000"}},
        "33 MB body": {"content": b" " * (33 * 1024 * 1024), "headers": JSON_TYPE},
    }


# --- processes ---------------------------------------------------------------------------------


def _forge_rt() -> str:
    found = shutil.which("forge-rt")
    if found is None:
        raise SystemExit("forge-rt is not on PATH: install the project first (pip install -e .)")
    return found


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not come up within 60 s")


def _proc_usage(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    return {"rss_mb": rss_kb // 1024, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


# --- phases ------------------------------------------------------------------------------------


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_POLLER = """
import sys, time, httpx
url, seconds = sys.argv[1], float(sys.argv[2])
end = time.time() + seconds
with httpx.Client(base_url=url, timeout=10) as http:
    while time.time() < end:
        start = time.time()
        http.get("/health").raise_for_status()
        print(start, time.time() - start, flush=True)
"""


def _poll_health(url: str, seconds: float) -> subprocess.Popen[str]:
    """A separate process polling ``/health`` back to back (the load generator's own work must
    not show up as the proxy's latency); each line is ``start latency`` in seconds."""
    return subprocess.Popen(
        [sys.executable, "-c", _POLLER, url, str(seconds)], stdout=subprocess.PIPE, text=True
    )


def _probe_pairs(poller: subprocess.Popen[str]) -> list[tuple[float, float]]:
    out, _ = poller.communicate(timeout=60)
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [(float(start), float(latency)) for start, latency in rows]


def _probes(poller: subprocess.Popen[str], since: float, until: float) -> list[float]:
    return [lat for start, lat in _probe_pairs(poller) if since <= start <= until]


async def bad_input_phase(url: str) -> dict[str, Any]:
    idle_poller = _poll_health(url, 2.0)
    idle_from = time.time()
    idle = _probes(idle_poller, idle_from, idle_from + 2.0)
    answers: dict[str, dict[str, Any]] = {}
    payloads = bad_inputs()  # built before the window: building them is the generator's work
    poller = _poll_health(url, 8.0)
    await trio.sleep(0.5)  # the poller is up and probing
    since = time.time()
    spans: dict[str, tuple[float, float]] = {}
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S) as http:
        for name, kwargs in payloads.items():
            began = time.time()
            start = time.perf_counter()
            response = await http.post(CHAT, **kwargs)
            took = time.perf_counter() - start
            try:
                shaped = "error" in response.json()
            except json.JSONDecodeError:
                shaped = False
            answers[name] = {
                "status": response.status_code,
                "ms": round(took * 1000, 1),
                "json": shaped,
            }
            spans[name] = (began, time.time())
    until = time.time()
    pairs = _probe_pairs(poller)
    during = [lat for start, lat in pairs if since <= start <= until]
    for name, (began, ended) in spans.items():
        # The slowest /health probe that overlapped this payload's request.
        overlapping = [lat for start, lat in pairs if start <= ended and start + lat >= began]
        answers[name]["health_max_ms"] = round(max(overlapping, default=0.0) * 1000, 2)
    return {
        "health_idle_p50_ms": round(_p(idle, 0.5) * 1000, 2),
        "health_idle_p99_ms": round(_p(idle, 0.99) * 1000, 2),
        "health_during_p50_ms": round(_p(during, 0.5) * 1000, 2),
        "health_during_p99_ms": round(_p(during, 0.99) * 1000, 2),
        "health_during_max_ms": round(max(during) * 1000, 2),
        "health_probes_during": len(during),
        "bad_input_window_s": round(until - since, 2),
        "answers": answers,
    }


async def soak_phase(url: str, seconds: float, concurrency: int, proxy_pid: int) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    draw = random.Random(1)
    start_usage = _proc_usage(proxy_pid)
    end_at = trio.current_time() + seconds
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S, limits=limits) as http:

        async def client() -> None:
            while trio.current_time() < end_at:
                stream = draw.random() < 0.5
                counts["sent"] += 1
                try:
                    response = await http.post(
                        CHAT, json={**BASE, "stream": stream, "max_tokens": 16}
                    )
                except httpx.TimeoutException:
                    counts["hung"] += 1
                    continue
                except httpx.TransportError:
                    counts["transport_error"] += 1
                    continue
                if response.is_success:
                    counts["ok"] += 1
                else:
                    counts["typed_error" if "error" in response.json() else "untyped_error"] += 1
                    counts[f"status_{response.status_code}"] += 1

        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(client)
    await trio.sleep(6.0)  # past the proxy's 5 s keep-alive: closed connections are gone
    answered = counts["ok"] + counts["typed_error"] + counts["untyped_error"]
    return {
        "seconds": seconds,
        "concurrency": concurrency,
        **dict(counts),
        "lost": counts["sent"] - answered - counts["hung"] - counts["transport_error"],
        "proxy_start": start_usage,
        "proxy_end": _proc_usage(proxy_pid),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="soak duration")
    parser.add_argument("--concurrency", type=int, default=32, help="soak clients")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args()
    cli = _forge_rt()
    sim_port, proxy_port = free_port(), free_port()
    logs = Path(os.environ.get("TMPDIR", "/tmp"))
    faults = [f"--fault-rate={k}={v}" for k, v in SOAK_FAULTS.items()]
    with ExitStack() as stack:
        spawn(stack, [cli, "sim", "--port", str(sim_port), *faults], logs / "hardening-sim.log")
        backend = f"http://127.0.0.1:{sim_port}"
        _wait_ready(backend + "/health")
        proxy = spawn(
            stack,
            [
                cli,
                "proxy",
                "--backend",
                backend,
                "--backend-kind",
                "llamaserver",
                "--port",
                str(proxy_port),
                "--stall-timeout",
                "2",
                "--max-queue",
                "256",
            ],
            logs / "hardening-proxy.log",
        )
        url = f"http://127.0.0.1:{proxy_port}"
        _wait_ready(url + "/health")
        figures = {
            "bad_input": trio.run(bad_input_phase, url),
            "soak": trio.run(soak_phase, url, args.seconds, args.concurrency, proxy.pid),
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    bad = figures["bad_input"]
    refused = {k: a for k, a in bad["answers"].items() if k not in SERVED}
    worst = max(a["ms"] for a in refused.values())
    served = ", ".join(f"{k} ({bad['answers'][k]['status']})" for k in SERVED)
    print(
        f"\nbad input: {len(refused)} refused classes, worst answer {worst} ms, all JSON "
        f"{all(a['json'] for a in refused.values())}, all 4xx "
        f"{all(400 <= a['status'] < 500 for a in refused.values())}; served as designed: "
        f"{served}; /health p99 "
        f"{bad['health_during_p99_ms']} ms during (idle {bad['health_idle_p99_ms']} ms)",
        file=sys.stderr,
    )
    soak = figures["soak"]
    print(
        f"soak: {soak.get('sent', 0)} sent, {soak.get('ok', 0)} ok, {soak.get('typed_error', 0)} "
        f"typed errors, {soak.get('hung', 0)} hung, {soak['lost']} lost; proxy RSS "
        f"{soak['proxy_start']['rss_mb']} -> {soak['proxy_end']['rss_mb']} MB, fds "
        f"{soak['proxy_start']['fds']} -> {soak['proxy_end']['fds']}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
