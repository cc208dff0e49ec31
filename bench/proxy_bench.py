"""What the proxy costs: added latency and throughput over calling an instant backend directly.

Three processes, like a real deployment: an instant simulated backend (``forge_rt.backends.sim``
with no modelled prefill or decode time), the proxy under test, and this load generator. Every
figure is measured in the same run against the same backend:

- **direct**: the load generator calls the backend itself (the baseline);
- **forge_rt**: through ``forge_rt.proxy`` (``serve_proxy`` in its own process);
- **forge 0.9.3**: through forge's own proxy (``python -m forge.proxy``), when a Python 3.12
  venv with ``forge-guardrails==0.9.3`` is found (``--forge-python`` or ``$FORGE_PYTHON``,
  default ``~/.cache/forge-0.9.3-venv/bin/python``); otherwise the comparison is skipped and the
  reason printed.

Measured per target: sequential non-streamed requests (p50/p99 latency, requests/s, and the
CPU time the serving process spent per request -- the figure a busy shared machine disturbs
least), sequential streamed requests (p50/p99 time to the first text) and concurrent
non-streamed requests (requests/s with ``--concurrency`` workers). Added latency is the proxy's
figure minus the direct one. A second phase streams from a backend that decodes at
``--decode-tps`` tokens/s, where live streaming (or its absence) shows in time to first text. Every request has a timeout and the counts are bounded, so the bench cannot hang::

    python bench/proxy_bench.py                  # 300 requests per measurement
    python bench/proxy_bench.py --requests 1000 --concurrency 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import httpx
import trio
from _processes import free_port, spawn

BODY = {"model": "bench", "messages": [{"role": "user", "content": "Say something short."}]}
STREAM_BODY = {**BODY, "stream": True}
TOOLS_BODY = {
    **BODY,
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ],
}
REQUEST_TIMEOUT_S = 10.0
STARTUP_TIMEOUT_S = 60.0
DEFAULT_FORGE_PYTHON = Path.home() / ".cache" / "forge-0.9.3-venv" / "bin" / "python"


# --- child processes ---------------------------------------------------------------------------


def _serve_backend(port: int, decode_tps: float | None) -> None:
    from forge_rt._logging import configure_logging
    from forge_rt.backends.sim import SimBackend, SimConfig

    configure_logging(json=False, level="info")  # what `forge-rt sim` runs with

    async def main() -> None:
        # reply_log_size=0: the sim's reply log would only cost memory here.
        config = SimConfig(port=port, reply_log_size=0, decode_tps=decode_tps)
        async with SimBackend.serve(config):
            await trio.sleep_forever()

    trio.run(main)


def _serve_proxy(backend_url: str, port: int) -> None:
    from forge_rt._logging import configure_logging
    from forge_rt.proxy import BackendConfig, ProxyConfig, serve_proxy

    configure_logging(json=False, level="info")  # what `forge-rt proxy` runs with

    config = ProxyConfig(port=port, backend=BackendConfig(url=backend_url, kind="openai"))

    async def main() -> None:
        async with serve_proxy(config):
            await trio.sleep_forever()

    trio.run(main)


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: the server exited ({proc.returncode}); see {log}")
        try:
            response = httpx.post(f"{url}/v1/chat/completions", json=BODY, timeout=2.0)
            if response.status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)  # a child process is starting: there is no event to wait on
    raise SystemExit(f"{url} was not ready within {STARTUP_TIMEOUT_S:g} s; see {log}")


# --- measurements ------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Result:
    """The figures of one target, accumulated over the rounds."""

    def __init__(self, name: str, base: str, pid: int) -> None:
        self.name = name
        self.base = base
        self.pid = pid
        self.cpu_s: float | None = 0.0
        self.latency: list[float] = []
        self.seq_time = 0.0
        self.ttft: list[float] = []
        self.conc_requests = 0
        self.conc_time = 0.0
        self.tools_latency: list[float] = []
        self.resets = 0

    @property
    def seq_rps(self) -> float:
        return len(self.latency) / self.seq_time

    @property
    def conc_rps(self) -> float:
        return self.conc_requests / self.conc_time

    @property
    def cpu_ms(self) -> str:
        """CPU time the serving process used per sequential request, in ms."""
        if self.cpu_s is None:
            return "n/a"
        return f"{self.cpu_s / len(self.latency) * 1000:.2f}"


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process ``pid`` (Linux /proc); None where unavailable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _round(result: Result, requests: int, concurrency: int, *, warm: bool) -> None:
    """One round of every measurement on one target (rounds alternate between targets, so a
    noisy neighbour on the machine weighs on every target alike)."""
    limits = httpx.Limits(
        max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2
    )
    async with httpx.AsyncClient(
        base_url=result.base, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as http:

        async def timed(request: Callable[[float], Awaitable[float]]) -> float:
            for attempt in (1, 2):
                t0 = time.perf_counter()
                try:
                    return await request(t0)
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    # forge 0.9.3 resets a kept-alive connection after a stream; count it and
                    # retry once on a fresh connection (what a client would have to do).
                    result.resets += 1
                    if attempt == 2:
                        raise
            raise AssertionError("unreachable")

        async def post(body: Mapping[str, object], t0: float) -> float:
            response = await http.post("/v1/chat/completions", json=body)
            response.raise_for_status()
            return time.perf_counter() - t0

        async def plain() -> float:
            return await timed(partial(post, BODY))

        async def first_token() -> float:
            return await timed(partial(_first_token, http))

        async def with_tools() -> float:
            return await timed(partial(post, TOOLS_BODY))

        if warm:
            for _ in range(min(50, requests)):  # warm connections, caches and code paths
                await plain()
        cpu_before = _cpu_seconds(result.pid)
        start = time.perf_counter()
        for _ in range(requests):
            result.latency.append(await plain())
        result.seq_time += time.perf_counter() - start
        cpu_after = _cpu_seconds(result.pid)
        if cpu_before is None or cpu_after is None or result.cpu_s is None:
            result.cpu_s = None
        else:
            result.cpu_s += cpu_after - cpu_before
        for _ in range(requests):
            result.ttft.append(await first_token())
        for _ in range(max(1, requests // 2)):
            result.tools_latency.append(await with_tools())

        per_worker = max(1, requests // concurrency)

        async def worker() -> None:
            for _ in range(per_worker):
                await plain()

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(worker)
        result.conc_time += time.perf_counter() - start
        result.conc_requests += per_worker * concurrency


async def _first_token(http: httpx.AsyncClient, t0: float) -> float:
    """Seconds from ``t0`` to the first frame that carries text (not just the role)."""
    async with http.stream("POST", "/v1/chat/completions", json=STREAM_BODY) as response:
        response.raise_for_status()
        first: float | None = None
        async for line in response.aiter_lines():
            if first is None and line.startswith("data: {") and _has_text(line[6:]):
                first = time.perf_counter() - t0
    if first is None:
        raise AssertionError("the stream carried no content")
    return first


def _has_text(data: str) -> bool:
    choices = json.loads(data).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f}"


def _report(results: list[Result], skipped: str | None, concurrency: int) -> None:
    direct = results[0]
    print()
    print(
        f"{'target':<12} {'p50 ms':>8} {'p99 ms':>8} {'seq r/s':>8} {'cpu ms/req':>10} "
        f"{'ttft p50':>9} {'ttft p99':>9} {f'conc{concurrency} r/s':>11} {'tools p50':>10}"
    )
    for r in results:
        print(
            f"{r.name:<12} {_ms(_pct(r.latency, 0.5)):>8} {_ms(_pct(r.latency, 0.99)):>8} "
            f"{r.seq_rps:8.0f} {r.cpu_ms:>10} {_ms(_pct(r.ttft, 0.5)):>9} "
            f"{_ms(_pct(r.ttft, 0.99)):>9} {r.conc_rps:11.0f} "
            f"{_ms(_pct(r.tools_latency, 0.5)):>10}"
        )
    print()
    for r in results[1:]:
        print(
            f"{r.name}: added latency p50 {_ms(_pct(r.latency, 0.5) - _pct(direct.latency, 0.5))} ms, "
            f"p99 {_ms(_pct(r.latency, 0.99) - _pct(direct.latency, 0.99))} ms; "
            f"added TTFT p50 {_ms(_pct(r.ttft, 0.5) - _pct(direct.ttft, 0.5))} ms; "
            f"throughput {r.seq_rps / direct.seq_rps:.2f}x direct sequential, "
            f"{r.conc_rps / direct.conc_rps:.2f}x direct concurrent"
        )
    if len(results) == 3:
        ours, forge = results[1], results[2]
        print(
            f"forge_rt / forge 0.9.3: sequential r/s {ours.seq_rps / forge.seq_rps:.2f}x, "
            f"concurrent r/s {ours.conc_rps / forge.conc_rps:.2f}x, "
            f"p50 latency {statistics.median(ours.latency) / statistics.median(forge.latency):.2f}x"
        )
    for r in results:
        if r.resets:
            print(
                f"{r.name}: {r.resets} request(s) were reset on a kept-alive connection and "
                "retried on a new one (the retry is counted in their time)"
            )
    if skipped:
        print(f"forge 0.9.3 comparison skipped: {skipped}")


def _forge_python(explicit: str | None) -> tuple[Path | None, str | None]:
    path = Path(explicit or os.environ.get("FORGE_PYTHON") or DEFAULT_FORGE_PYTHON)
    if not path.exists():
        return None, (
            f"no forge venv at {path} (create one with Python 3.12: python3.12 -m venv "
            f"{path.parent.parent} && {path.parent}/pip install forge-guardrails==0.9.3, or pass "
            "--forge-python)"
        )
    probe = subprocess.run(
        [str(path), "-c", "import forge.proxy"], capture_output=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        return None, f"{path} cannot import forge.proxy: {probe.stderr.decode()[-300:]}"
    return path, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent workers")
    parser.add_argument("--rounds", type=int, default=5, help="rounds alternating the targets")
    parser.add_argument("--forge-python", default=None, help="python of a forge 0.9.3 venv")
    parser.add_argument(
        "--decode-tps",
        type=float,
        default=100.0,
        help="decode rate of the second backend, for streaming time to first token",
    )
    parser.add_argument("--serve-backend", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--backend-tps", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--serve-proxy", nargs=2, metavar=("BACKEND_URL", "PORT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.serve_backend is not None:
        _serve_backend(args.serve_backend, args.backend_tps)
        return
    if args.serve_proxy is not None:
        _serve_proxy(args.serve_proxy[0], int(args.serve_proxy[1]))
        return
    if not 1 <= args.requests <= 100_000 or not 1 <= args.concurrency <= 256:
        raise SystemExit("--requests must be 1..100000 and --concurrency 1..256")
    if not 1 <= args.rounds <= args.requests:
        raise SystemExit("--rounds must be 1..--requests")
    if not 1.0 <= args.decode_tps <= 10_000.0:
        raise SystemExit("--decode-tps must be 1..10000")

    logs = Path(os.environ.get("TMPDIR", "/tmp")) / "forge_rt_proxy_bench"
    logs.mkdir(parents=True, exist_ok=True)
    forge_python, skipped = _forge_python(args.forge_python)
    with ExitStack() as stack:
        targets = _start_targets(stack, logs, forge_python, decode_tps=None, tag="instant")
        print(
            f"{args.requests} requests per measurement in {args.rounds} alternating rounds, "
            f"{args.concurrency} concurrent workers, instant sim backend; logs in {logs}"
        )
        results = [Result(name, url, pid) for name, url, pid in targets]
        per_round = max(1, args.requests // args.rounds)

        async def run_all() -> None:
            with trio.fail_after(900):
                for i in range(args.rounds):
                    for result in results:
                        await _round(result, per_round, args.concurrency, warm=i == 0)

        trio.run(run_all)
    _report(results, skipped, args.concurrency)

    with ExitStack() as stack:
        targets = _start_targets(
            stack, logs, forge_python, decode_tps=args.decode_tps, tag="decoding"
        )
        count = max(5, min(40, args.requests // 10))
        live = [Result(name, url, pid) for name, url, pid in targets]

        async def run_live() -> None:
            with trio.fail_after(900):
                for result in live:
                    await _ttft_only(result, count)

        trio.run(run_live)
    _report_live(live, args.decode_tps, count)


def _start_targets(
    stack: ExitStack, logs: Path, forge_python: Path | None, *, decode_tps: float | None, tag: str
) -> list[tuple[str, str, int]]:
    """Start a sim backend and the proxies in front of it; ``(name, url, pid)`` of each."""
    me = [sys.executable, str(Path(__file__).resolve())]
    backend_port = free_port()
    backend = f"http://127.0.0.1:{backend_port}"
    argv = [*me, "--serve-backend", str(backend_port)]
    if decode_tps is not None:
        argv += ["--backend-tps", str(decode_tps)]
    proc = spawn(stack, argv, logs / f"backend-{tag}.log")
    _wait_ready(backend, proc, logs / f"backend-{tag}.log")
    targets = [("direct", backend, proc.pid)]

    ours_port = free_port()
    ours = f"http://127.0.0.1:{ours_port}"
    log = logs / f"forge_rt-{tag}.log"
    proc = spawn(stack, [*me, "--serve-proxy", backend, str(ours_port)], log)
    _wait_ready(ours, proc, log)
    targets.append(("forge_rt", ours, proc.pid))

    if forge_python is not None:
        forge_port = free_port()
        forge = f"http://127.0.0.1:{forge_port}"
        argv = [str(forge_python), "-m", "forge.proxy", "--backend-url", backend]
        log = logs / f"forge-{tag}.log"
        proc = spawn(stack, [*argv, "--port", str(forge_port)], log)
        _wait_ready(forge, proc, log)
        targets.append(("forge 0.9.3", forge, proc.pid))
    return targets


async def _ttft_only(result: Result, count: int) -> None:
    """Time to first content byte of ``count`` streamed requests (and their total time)."""
    async with httpx.AsyncClient(base_url=result.base, timeout=REQUEST_TIMEOUT_S) as http:
        for _ in range(count):
            for attempt in (1, 2):
                t0 = time.perf_counter()
                try:
                    result.ttft.append(await _first_token(http, t0))
                    result.latency.append(time.perf_counter() - t0)
                    break
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    result.resets += 1
                    if attempt == 2:
                        raise


def _report_live(results: list[Result], decode_tps: float, count: int) -> None:
    print()
    print(
        f"streaming from a backend that decodes {decode_tps:g} tokens/s ({count} streamed "
        "requests each): time to first content byte, and to the end of the stream"
    )
    print(f"{'target':<12} {'ttft p50':>9} {'ttft p99':>9} {'total p50':>10}")
    for r in results:
        print(
            f"{r.name:<12} {_ms(_pct(r.ttft, 0.5)):>9} {_ms(_pct(r.ttft, 0.99)):>9} "
            f"{_ms(_pct(r.latency, 0.5)):>10}"
        )


if __name__ == "__main__":
    main()
