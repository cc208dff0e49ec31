"""examples/guardrails_loop.py runs the way a user runs it and finishes its task."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import trio

from forge_rt.backends.sim import SimBackend, SimConfig

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "guardrails_loop.py"


async def _run_example(*args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(60):
        return await trio.run_process(
            [sys.executable, str(EXAMPLE), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_example_with_embedded_sim_recovers_and_completes() -> None:
    """Against the in-process sim, the loop is corrected along the way and files the report."""
    proc = await _run_example()
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "outcome: done - report filed: Oslo has 4 C and light rain.\n" in out
    assert "steps: get_weather, report\n" in out
    assert re.search(r"^turn \d+: (retry|tool errors)", out, re.MULTILINE), out


async def test_example_against_a_given_url() -> None:
    """With --url the example talks to that server (a sim on 127.0.0.1 here) and completes."""
    async with SimBackend.serve(SimConfig()) as sim:
        proc = await _run_example("--url", f"{sim.url}/v1", "--model", "sim-model")
        requests = sim.stats.requests["/v1/chat/completions"]
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.splitlines()[-2].startswith("outcome: done - report filed: ")
    assert requests == 2
