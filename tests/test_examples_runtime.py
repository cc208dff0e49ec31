"""examples/single_workflow.py and examples/shared_slot.py run the way a user runs them."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio
import trio.testing

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


async def _run(script: str, *args: str, limit: float) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(limit):
        return await trio.run_process(
            [sys.executable, str(EXAMPLES / script), *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_single_workflow_on_the_sim_is_rescued_nudged_and_done() -> None:
    """On the sim the fenced call is rescued, the prose answer nudged, and the report filed."""
    proc = await _run("single_workflow.py", "--backend", "sim", limit=60)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    assert "model calls: get_weather({'city': 'Oslo'})\n" in out
    assert "model wrote text: 'It is 4 C with light rain in Oslo.'\n" in out
    assert "guardrails nudge: Your reply was text, not a tool call." in out
    assert "outcome: done - report filed: Oslo has 4 C and light rain.\n" in out
    assert "steps: get_weather, file_report\n" in out
    assert "rescued calls: {'fenced_json': 1}; retries: {'no_call': 1}" in out


async def test_single_workflow_exits_1_when_the_backend_is_unreachable() -> None:
    """A URL nobody listens on is a backend failure: exit 1 with the typed error on stderr."""
    from forge_rt.backends.sim import SimBackend, SimConfig

    async with SimBackend.serve(SimConfig()) as sim:
        url = sim.url
    proc = await _run("single_workflow.py", "--backend", url, limit=60)
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("backend failed: BackendError: POST ")


def _example_module(script: str) -> ModuleType:
    """``examples/<script>`` imported as a module (its ``__main__`` block does not run)."""
    spec = importlib.util.spec_from_file_location(f"example_{Path(script).stem}", EXAMPLES / script)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_shared_slot_on_the_sim_runs_as_a_script() -> None:
    """Run as a user runs it, the example reports every agent and the slot, exit status 0."""
    proc = await _run("shared_slot.py", "--sim-speed", "50", limit=90)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()
    for name in ("researcher", "analyst", "writer"):
        assert re.search(rf"^{name} +priority 10  done ", out, re.MULTILINE), out
    assert re.search(r"^voice +priority  0  done ", out, re.MULTILINE), out
    # How many preemptions real time gives depends on the machine; the test below pins them.
    assert re.search(r"^slot: \d+ inferences, \d+ preemptions$", out, re.MULTILINE), out
    assert re.search(
        r"^voice first token [\d.]+ s after its request; background median [\d.]+ s$",
        out,
        re.MULTILINE,
    ), out


async def test_shared_slot_on_the_sim_puts_the_voice_first(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the sim the voice preempts and waits less for its first token than the background.

    Its ``main`` runs in this process on the autojump clock: the sim models time on trio's
    clock, so the comparison is of virtual seconds, the same however busy the machine is.
    """
    assert await _example_module("shared_slot.py").main([]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^slot: \d+ inferences, [1-9]\d* preemptions$", out, re.MULTILINE), out
    ttft = re.search(
        r"^voice first token ([\d.]+) s after its request; background median ([\d.]+) s$",
        out,
        re.MULTILINE,
    )
    assert ttft is not None, out
    assert float(ttft.group(1)) < float(ttft.group(2))


@pytest.mark.slow
async def test_single_workflow_on_the_embedded_model() -> None:
    """With no flags the example runs on the embedded 0.5B model and reports an outcome."""
    proc = await _run("single_workflow.py", limit=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert re.search(r"^outcome: (done|failed) - ", proc.stdout.decode(), re.MULTILINE)


@pytest.mark.slow
async def test_shared_slot_on_the_embedded_model() -> None:
    """With --backend local the four agents share the embedded model's one slot; all report."""
    proc = await _run("shared_slot.py", "--backend", "local", limit=1500)
    out = proc.stdout.decode()
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert "voice request arrives\n" in out
    for name in ("researcher", "analyst", "writer", "voice"):
        assert re.search(rf"^{name} +priority +\d+  (done|failed) ", out, re.MULTILINE), out
    assert re.search(r"^slot: \d+ inferences, \d+ preemptions$", out, re.MULTILINE), out
