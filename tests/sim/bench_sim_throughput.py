"""Benchmark: requests per second of the instant sim, and how closely it keeps modelled time.

Not a test (no timed asserts): it prints figures and ratios. The server runs in its own process
so the client's cost is not charged to it. The baseline is the sim's own HTTP layer answering a
canned body of the same size (the floor for this design); the ratio is what the sim's model,
tokenizer, slots and codecs cost on top. The time model is checked by timing requests against a
sim with prefill and decode rates and dividing by the time the model says they should take.
Run from the repository root::

    python tests/sim/bench_sim_throughput.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import h11
import httpx
import msgspec
import trio

BODY = msgspec.json.encode(
    {
        "model": "sim-model",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. " * 10},
            {"role": "user", "content": "What is the weather in Paris?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
    }
)

SIM = "from forge_rt.backends.sim._cli import sim_command; sim_command(['--port', '0'])"
CANNED = """
import sys, trio
from forge_rt.backends.sim._http import serve_connection
body = bytes.fromhex(sys.argv[1])
async def handler(ex):
    await ex.send(200, body)
async def main():
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    print(f"serving at http://127.0.0.1:{port} (Ctrl-C stops it)", flush=True)
    await trio.serve_listeners(lambda s: serve_connection(s, handler), listeners)
trio.run(main)
"""


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux ``/proc``), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(
    process: subprocess.Popen[bytes], url: str, n: int, stream: bool
) -> tuple[float, float]:
    """(requests per wall second, requests per server CPU second) of ``n`` raw requests."""
    before = _cpu_seconds(process.pid)
    rate = trio.run(_raw, url, n, stream)
    return rate, n / (_cpu_seconds(process.pid) - before)


def _start(code: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    while True:
        line = process.stdout.readline().decode()
        if not line:
            raise RuntimeError("server process exited before printing its URL")
        if " at http://" in line:
            return process, line.split(" at ")[1].split(" ")[0]


async def _raw(url: str, n: int, stream: bool) -> float:
    """Sequential keep-alive requests with a minimal h11 client: requests per second."""
    host, port = url.removeprefix("http://").split(":")
    body = BODY[:-1] + b',"stream":true}' if stream else BODY
    sock = await trio.open_tcp_stream(host, int(port))
    conn = h11.Connection(h11.CLIENT)
    headers = [
        ("host", host),
        ("content-type", "application/json"),
        ("content-length", str(len(body))),
    ]
    started = time.perf_counter()
    for _ in range(n):
        request = h11.Request(method="POST", target="/v1/chat/completions", headers=headers)
        await sock.send_all(
            conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        )
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await sock.receive_some(65536))
            elif isinstance(event, h11.Response):
                assert event.status_code == 200, event
            elif isinstance(event, h11.EndOfMessage):
                break
        conn.start_next_cycle()
    elapsed = time.perf_counter() - started
    await sock.aclose()
    return n / elapsed


async def _httpx(url: str, n: int) -> float:
    async with httpx.AsyncClient(base_url=url) as client:
        started = time.perf_counter()
        for _ in range(n):
            response = await client.post("/v1/chat/completions", content=BODY)
            assert response.status_code == 200
        return n / (time.perf_counter() - started)


async def _time_model() -> tuple[float, float]:
    """Measured / modelled seconds of a cold and of a fully cached streamed request."""
    from forge_rt.backends.sim import SimBackend, SimConfig

    text = " ".join(f"w{i}" for i in range(100))  # 100 completion tokens
    config = SimConfig(prefill_tps=2000, decode_tps=400, script={"*": [text] * 2})
    ratios = []
    async with SimBackend.serve(config) as sim, httpx.AsyncClient(base_url=sim.url) as client:
        for _ in range(2):
            started = time.perf_counter()
            async with client.stream(
                "POST", "/v1/chat/completions", content=BODY[:-1] + b',"stream":true}'
            ) as response:
                body = (await response.aread()).decode()
            elapsed = time.perf_counter() - started
            final = msgspec.json.decode(body.split("data: ")[-2])
            prefilled = final["timings"]["prompt_n"]
            ratios.append(elapsed / (prefilled / 2000 + 100 / 400))
    return ratios[0], ratios[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    n = parser.parse_args().requests
    sim, sim_url = _start(SIM)
    sample = httpx.post(f"{sim_url}/v1/chat/completions", content=BODY).content
    canned, canned_url = _start(CANNED, sample.hex())
    try:
        trio.run(_raw, canned_url, 200, False)
        trio.run(_raw, sim_url, 200, False)
        base, base_cpu = _measure(canned, canned_url, n, False)
        plain, plain_cpu = _measure(sim, sim_url, n, False)
        streamed, streamed_cpu = _measure(sim, sim_url, n // 3, True)
        via_httpx = trio.run(_httpx, sim_url, n // 3)
    finally:
        for process in (sim, canned):
            process.terminate()
            process.wait()
    print(f"{n} sequential requests on one kept-alive connection; server in its own process.")
    print("req/s by wall clock (depends on the client and machine load) and per server CPU second")
    print("(what the server itself can sustain):")
    print(f"  baseline, canned {len(sample)}-byte body on the same HTTP layer:")
    print(f"      {base:7.0f} req/s wall  {base_cpu:7.0f} req/CPU-s")
    print(
        f"  sim, non-streaming:  {plain:7.0f} req/s wall  {plain_cpu:7.0f} req/CPU-s"
        f"  ratio to baseline {plain_cpu / base_cpu:.2f}"
    )
    print(
        f"  sim, streaming SSE:  {streamed:7.0f} req/s wall  {streamed_cpu:7.0f} req/CPU-s"
        f"  ratio to baseline {streamed_cpu / base_cpu:.2f}"
    )
    print(f"  sim via an httpx client (client in this process): {via_httpx:.0f} req/s wall")
    cold, cached = trio.run(_time_model)
    print("time model (2000 prefill tok/s, 400 decode tok/s, 100-token reply), measured/modelled:")
    print(f"  cold prompt {cold:.3f}, cached prompt {cached:.3f}")


if __name__ == "__main__":
    main()
