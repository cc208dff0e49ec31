"""bench/gpu_check.py: the script prepared for the day a GPU is lent, on its CPU path.

The fast tests need no model: NVML here (no GPU, so ``unavailable``) and against a fake NVML
with a GPU, the report written to ``$OUT`` or ``--out``, the plan and offload decisions, the
figures each check derives from what it measured, and a check that breaks or hangs. The one
``slow`` test runs every model check of ``--quick`` for real on the embedded model (CPU).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio
import trio.testing

import forge_rt.context._hardware as hardware
from forge_rt.context import GpuAvailable, probe_gpu
from forge_rt.demo import AgentOutcome, DemoReport

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"
GIB = 2**30


def _load() -> ModuleType:
    """The script as a module (its dataclasses need it registered before it runs)."""
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


gpu_check = _load()


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError."""


@dataclass
class Memory:
    total: int
    used: int
    free: int


@dataclass
class FakeNvml:
    """The pynvml functions the script and forge_rt's probe call, over scripted devices."""

    devices: list[tuple[str | bytes, Memory]] = field(default_factory=list)
    init_error: str | None = None
    NVMLError: type[Exception] = FakeNVMLError

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str | bytes:
        return self.devices[handle][0]

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Memory:
        return self.devices[handle][1]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"


def _h100(total_gib: int = 80, used_gib: int = 1) -> FakeNvml:
    memory = Memory(total_gib * GIB, used_gib * GIB, (total_gib - used_gib) * GIB)
    return FakeNvml(devices=[(b"NVIDIA H100 80GB HBM3", memory)])


CPU_ONLY = [{"name": "CPU", "description": "x", "type": "cpu", "memory_total": 1}]
CUDA = [*CPU_ONLY, {"name": "CUDA0", "description": "H100", "type": "gpu", "memory_total": 1}]


# --- NVML ------------------------------------------------------------------------------------


def test_nvml_check_reports_what_this_machine_has() -> None:
    """Without a GPU (this machine, CI) the check is unavailable, with NVML's own reason, and
    forge_rt's NvmlSource agrees: Unavailable with a reason, never a made-up figure."""
    rec = gpu_check.nvml_check()
    expected = "ok" if isinstance(probe_gpu(), GpuAvailable) else "unavailable"
    assert rec["check"] == "nvml"
    assert rec["status"] == expected, rec
    if expected == "unavailable":
        assert rec["why"]
        assert rec["source_reading"]["available"] is False
        assert rec["source_reading"]["reason"]


def test_nvml_check_with_a_gpu_compares_forge_rt_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU NVML sees, read by the script and by forge_rt's source alike: ok, with its name
    (bytes from older pynvml decoded), memory and driver."""
    fake = _h100()
    monkeypatch.setattr(hardware, "pynvml", fake)
    rec = gpu_check.nvml_check(fake)
    assert rec["status"] == "ok", rec
    assert rec["gpus"] == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_bytes": 80 * GIB,
            "memory_used_bytes": 1 * GIB,
        }
    ]
    assert rec["driver"] == "580.159.04"
    assert rec["source_reading"]["gpu_total_bytes"] == 80 * GIB
    assert rec["why"] == ""


def test_nvml_check_fails_when_the_source_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source that reports other memory than NVML, or none where NVML sees a GPU, fails."""
    monkeypatch.setattr(hardware, "pynvml", _h100(total_gib=40))
    rec = gpu_check.nvml_check(_h100(total_gib=80))
    assert rec["status"] == "failed"
    assert f"{40 * GIB}" in rec["why"]
    assert f"{80 * GIB}" in rec["why"]

    monkeypatch.setattr(hardware, "pynvml", FakeNvml(init_error="Driver Not Loaded"))
    rec = gpu_check.nvml_check(_h100())
    assert rec["status"] == "failed"
    assert "NvmlSource reports Unavailable" in rec["why"]
    assert "Driver Not Loaded" in rec["why"]


def test_read_nvml_keeps_nvml_reasons() -> None:
    """No driver and no device are each said in words, with NVML's message."""
    assert (
        "Driver Not Loaded"
        in gpu_check.read_nvml(FakeNvml(init_error="Driver Not Loaded"))["unavailable"]
    )
    assert gpu_check.read_nvml(FakeNvml()) == {"unavailable": "NVML started and sees no GPU"}


# --- the report --------------------------------------------------------------------------------


def test_report_goes_to_out_and_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With $OUT set, every record is one JSON line in $OUT/gpu_check.jsonl and on stdout, in
    order; a report left by an earlier run is replaced."""
    monkeypatch.setenv("OUT", str(tmp_path))
    (tmp_path / "gpu_check.jsonl").write_text('{"check": "stale"}\n')
    stdout = io.StringIO()
    records = gpu_check.main(
        ["--checks", "nvml", "--out", str(tmp_path / "ignored")], stream=stdout
    )
    lines = (tmp_path / "gpu_check.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == records
    assert stdout.getvalue().splitlines() == lines
    assert [r["check"] for r in records] == ["environment", "nvml"]
    assert not (tmp_path / "ignored").exists()
    env = records[0]
    assert env["status"] == "ok"
    assert env["checks"] == ["nvml"]
    assert env["packages"]["trio"] is not None
    for rec in records:
        assert rec["status"] in ("ok", "unavailable", "failed")
        assert list(rec)[:2] == ["check", "status"]
        assert list(rec)[-1] == "why"


def test_report_goes_to_the_out_flag_without_out_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without $OUT, --out names the file; its folder is made."""
    monkeypatch.delenv("OUT", raising=False)
    target = tmp_path / "new" / "report.jsonl"
    records = gpu_check.main(["--checks", "nvml", "--out", str(target)], stream=io.StringIO())
    assert [json.loads(line) for line in target.read_text().splitlines()] == records


def test_model_checks_say_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine without xllamacpp (a lent one, bare) each model check is unavailable and
    names the package, and nothing is started."""
    monkeypatch.delenv("OUT", raising=False)

    def without_xllamacpp(names: list[str]) -> list[str]:
        return ["xllamacpp (pip: xllamacpp)"] if "xllamacpp" in names else []

    monkeypatch.setattr(gpu_check, "missing_modules", without_xllamacpp)
    records = gpu_check.main(
        ["--checks", "llama_cuda,continuation,voice_ttft"], stream=io.StringIO()
    )
    assert [(r["check"], r["status"]) for r in records[1:]] == [
        ("llama_cuda", "unavailable"),
        ("continuation", "unavailable"),
        ("voice_ttft", "unavailable"),
    ]
    assert all("xllamacpp" in r["why"] for r in records[1:])


def test_the_script_runs_as_a_program(tmp_path: Path) -> None:
    """``python bench/gpu_check.py``: exit 0 when nothing failed, the records in --out."""
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    out = tmp_path / "r.jsonl"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--checks", "nvml", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["check"] for line in done.stdout.splitlines()] == [
        "environment",
        "nvml",
    ]
    assert out.read_text().splitlines() == done.stdout.splitlines()


def test_unknown_checks_are_refused() -> None:
    """A misspelt check name stops the run before anything starts."""
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--checks", "nvml,gpu_magic"])


# --- the plan ----------------------------------------------------------------------------------


def test_offload_needs_a_gpu_and_a_gpu_build() -> None:
    """Every layer goes to the GPU only when NVML sees one and llama.cpp has a GPU device; a
    CPU-only xllamacpp build under a GPU is named, with how to install a CUDA build."""
    no_gpu = gpu_check.decide_offload({"unavailable": "NVML cannot start: x"}, CUDA)
    assert (no_gpu.on_gpu, no_gpu.args) == (False, ())
    assert no_gpu.why_not == "no GPU: NVML cannot start: x"

    gpu = {"gpus": [{"index": 0}], "driver": None}
    cpu_build = gpu_check.decide_offload(gpu, CPU_ONLY)
    assert not cpu_build.on_gpu
    assert "no GPU device" in cpu_build.why_not
    assert "whl/cu" in cpu_build.why_not

    cuda = gpu_check.decide_offload(gpu, CUDA)
    assert cuda.on_gpu
    assert cuda.args == ("--n-gpu-layers", "999")


def test_quick_is_the_default_without_a_gpu_and_full_with_one() -> None:
    """Without a GPU a run keeps to the CPU-sized plan; with one it measures 2 and 4 slots."""
    gpu = {"gpus": [{"index": 0}], "driver": None}
    no_gpu = {"unavailable": "none"}
    plan = gpu_check.make_plan(gpu_check.parse_args([]), no_gpu, CPU_ONLY)
    assert plan.quick
    assert plan.sizes.slot_counts == (2,)
    plan = gpu_check.make_plan(gpu_check.parse_args([]), gpu, CUDA)
    assert not plan.quick
    assert plan.sizes.slot_counts == (2, 4)
    plan = gpu_check.make_plan(gpu_check.parse_args(["--full"]), no_gpu, CPU_ONLY)
    assert not plan.quick
    assert plan.mode_why == "chosen by flag"


def test_cpu_runs_let_openmp_threads_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU the servers get OMP_WAIT_POLICY=PASSIVE for the run, and it is removed after;
    a value already set, or a GPU run, is left alone."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with gpu_check.cpu_threads_yield(True):
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ
    with gpu_check.cpu_threads_yield(False):
        assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with gpu_check.cpu_threads_yield(True):
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


# --- figures -----------------------------------------------------------------------------------


def _timings(
    prompt_tps: float, decode_tps: float, n: int = 128, ms: float = 1000
) -> dict[str, Any]:
    return {
        "prompt_n": 60,
        "prompt_per_second": prompt_tps,
        "predicted_n": n,
        "predicted_ms": ms,
        "predicted_per_second": decode_tps,
    }


def test_line_figures_sum_the_slots_and_flag_what_is_off() -> None:
    """Decode over every slot at once is the tokens of all of them over the longest decode,
    against one request alone; a short reply or a slot count forge_rt does not see fails."""
    together = [_timings(900, 128, ms=1000), _timings(800, 160, ms=800)]
    figures, problems = gpu_check.line_figures(
        2, _timings(1000, 100), together, wall_s=1.5, tokens=128, slots_seen=2
    )
    assert problems == []
    assert figures["together"]["decode_tokens_per_s_all_slots"] == 256.0
    assert figures["all_slots_vs_alone"] == 2.56

    _, problems = gpu_check.line_figures(
        4, _timings(1000, 100, n=90), together, wall_s=1.5, tokens=128, slots_seen=2
    )
    assert problems == [
        "4 slots: a request decoded 90 of 128",
        "4 slots started, forge_rt's LlamaServerSource sees 2",
    ]


def test_outcome_is_failed_ok_or_unavailable() -> None:
    """Problems fail a check wherever it ran; without them, only a GPU run is ok."""
    assert gpu_check.outcome(True, "", ["a", "b"]) == ("failed", "a; b")
    assert gpu_check.outcome(False, "no GPU: x", ["a"]) == ("failed", "a")
    assert gpu_check.outcome(True, "", []) == ("ok", "")
    status, why = gpu_check.outcome(False, "no GPU: x", [])
    assert status == "unavailable"
    assert why.startswith("no GPU: x")
    assert "CPU" in why


def test_cut_points_fall_one_in_each_part() -> None:
    """The preemption points: early, middle and late in the reply, the same every run."""
    cuts = gpu_check.cut_points(30, 3)
    assert len(cuts) == 3
    assert [c // 10 for c in cuts] == [0, 1, 2]
    assert cuts[0] >= 2
    assert gpu_check.cut_points(30, 3) == cuts  # seeded: the same cuts every run


def _demo_report(voice: float | None, idle: float | None, contended: bool = True) -> DemoReport:
    agents = (
        *(
            AgentOutcome(name=n, role="r", priority=10, background=True, ok=True, ttfts_s=(0.5,))
            for n in ("researcher", "analyst", "writer")
        ),
        AgentOutcome(
            name="voice",
            role="r",
            priority=0,
            background=False,
            ok=voice is not None,
            ttfts_s=() if voice is None else (voice,),
        ),
    )
    return DemoReport(
        backend="embedded",
        agents=agents,
        voice_arrived_s=1.0,
        contended=contended,
        preemptions=2,
        continued=2,
        restarted=0,
        tokens_redecoded=0,
        prompt_tokens_reprocessed=1,
        prompt_tokens_resumed=287,
        prewarm_tokens=120,
        voice_idle_ttft_s=idle,
        baseline_calls=2,
        slot_calls=20,
        slot_busy_s=10.0,
        wall_s=15.0,
        started_at_s=3.0,
    )


def test_demo_figures_are_ratios_in_the_same_run() -> None:
    """Voice TTFT under three background agents over the idle one of the same run; a run with
    no token, no baseline or nothing under load is a problem, not a figure."""
    figures, problems = gpu_check.demo_figures(
        [_demo_report(0.15, 0.12), _demo_report(0.2, 0.1), _demo_report(0.15, 0.1)]
    )
    assert problems == []
    assert [r["ratio"] for r in figures["runs"]] == [1.25, 2.0, 1.5]
    assert (figures["ratio_median"], figures["ratio_max"]) == (1.5, 2.0)
    assert figures["runs"][0]["background_agents"] == 3

    _, problems = gpu_check.demo_figures(
        [_demo_report(None, 0.1), _demo_report(0.2, None), _demo_report(0.2, 0.1, contended=False)]
    )
    assert problems == [
        "run 1: the voice request produced no token",
        "run 2: the idle-slot baseline produced no token",
        "run 3: the background agents had ended before the voice came",
    ]


# --- a check that breaks -----------------------------------------------------------------------


async def test_a_check_that_raises_or_hangs_is_failed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A check's fault, or a check past its limit, is its failed record (the next still runs)."""

    async def broken() -> dict[str, Any]:
        raise RuntimeError("server went away")

    async def hung() -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    rec = await gpu_check.guarded("llama_cuda", 60, broken)
    assert rec == {
        "check": "llama_cuda",
        "status": "failed",
        "why": "RuntimeError: server went away",
    }
    rec = await gpu_check.guarded("voice_ttft", 60, hung)
    assert rec == {"check": "voice_ttft", "status": "failed", "why": "did not finish within 60 s"}


def test_a_server_that_should_be_on_the_gpu_must_take_its_memory() -> None:
    """On a GPU run, a server whose start did not raise NVML's used memory is on the CPU."""
    assert gpu_check.off_gpu_problems(2, 900 * 2**20) == []
    (problem,) = gpu_check.off_gpu_problems(4, 2 * 2**20)
    assert problem.startswith("4 slots: GPU memory in use rose by 2097152 bytes")
    (problem,) = gpu_check.off_gpu_problems(2, None)
    assert "NVML could not be read" in problem


async def test_the_gpu_path_measures_2_and_4_lines_and_shares_the_2_line_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What runs once on a GPU, with the server and its measurements faked: the 2-slot server
    serves the throughput check and then the continuation; a 4-slot server is started and
    stopped in between; each check is written as it ends, all ``ok`` on a GPU."""
    gpu = {"gpus": [{"index": 0, "memory_used_bytes": 0}], "driver": None}
    plan = gpu_check.make_plan(gpu_check.parse_args([]), gpu, CUDA)
    assert plan.offload.on_gpu
    assert not plan.quick
    events: list[str] = []

    @asynccontextmanager
    async def fake_server(plan: Any, n: int) -> AsyncIterator[Any]:
        events.append(f"start {n}")
        yield gpu_check.Started(server=None, n_parallel=n, gpu_used_delta_bytes=2 * GIB)
        events.append(f"stop {n}")

    async def fake_lines(started: Any, plan: Any) -> tuple[dict[str, Any], list[str]]:
        events.append(f"measure {started.n_parallel}")
        return {"n_parallel": started.n_parallel}, []

    async def fake_continuation(two: Any, plan: Any) -> dict[str, Any]:
        events.append(f"continuation on {two.n_parallel}")
        return {"check": "continuation", "status": "ok", "why": ""}

    async def fake_voice(plan: Any) -> dict[str, Any]:
        events.append("demo")
        return {"check": "voice_ttft", "status": "ok", "why": ""}

    monkeypatch.setattr(gpu_check, "model_unavailable", lambda model: None)
    monkeypatch.setattr(gpu_check, "open_server", fake_server)
    monkeypatch.setattr(gpu_check, "measure_lines", fake_lines)
    monkeypatch.setattr(gpu_check, "continuation_check", fake_continuation)
    monkeypatch.setattr(gpu_check, "voice_check", fake_voice)
    report = gpu_check.Report(None, io.StringIO())
    await gpu_check.run_model_checks(plan, report)
    assert events == [
        "start 2",
        "measure 2",
        "start 4",
        "measure 4",
        "stop 4",
        "continuation on 2",
        "stop 2",
        "demo",
    ]
    llama, cont, voice = report.records
    assert (llama["check"], llama["status"], llama["ran_on"]) == ("llama_cuda", "ok", "gpu")
    assert [line["n_parallel"] for line in llama["lines"]] == [2, 4]
    assert llama["offload_args"] == ["--n-gpu-layers", "999"]
    assert (cont["check"], voice["check"]) == ("continuation", "voice_ttft")


async def test_a_server_that_will_not_start_fails_the_checks_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 2-slot server failing to start fails the throughput and continuation checks with its
    error; the demo, which starts its own server, still runs."""

    @asynccontextmanager
    async def no_server(plan: Any, n: int) -> AsyncIterator[Any]:
        raise RuntimeError("BackendStartError: the server exited with status 1")
        yield  # pragma: no cover

    async def fake_voice(plan: Any) -> dict[str, Any]:
        return {"check": "voice_ttft", "status": "unavailable", "why": "no GPU"}

    monkeypatch.setattr(gpu_check, "model_unavailable", lambda model: None)
    monkeypatch.setattr(gpu_check, "open_server", no_server)
    monkeypatch.setattr(gpu_check, "voice_check", fake_voice)
    plan = gpu_check.make_plan(gpu_check.parse_args([]), {"unavailable": "none"}, CPU_ONLY)
    report = gpu_check.Report(None, io.StringIO())
    await gpu_check.run_model_checks(plan, report)
    assert [(r["check"], r["status"]) for r in report.records] == [
        ("llama_cuda", "failed"),
        ("continuation", "failed"),
        ("voice_ttft", "unavailable"),
    ]
    assert "exited with status 1" in report.records[0]["why"]


# --- the embedded model ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_quick_cpu_path_runs_the_checks_of_one_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--quick`` on the embedded 0.5B, the checks that share one server (two slots for
    throughput and the continuation): nothing failed, and without a GPU each check is
    unavailable with its CPU figures -- both slots seen by forge_rt, every continued reply
    exact. (``voice_ttft`` runs the demo on the model, which tests/test_demo.py's slow test
    already does; its logic is tested above with a fake demo, and CI's time goes elsewhere.)"""
    monkeypatch.delenv("OUT", raising=False)
    out = tmp_path / "r.jsonl"
    records = gpu_check.main(
        ["--quick", "--checks", "llama_cuda,continuation", "--out", str(out)],
        stream=io.StringIO(),
    )
    by = {r["check"]: r for r in records}
    on_gpu = gpu_check.decide_offload(gpu_check.read_nvml(), gpu_check.llama_devices()).on_gpu
    expected = "ok" if on_gpu else "unavailable"
    checks = ("llama_cuda", "continuation")
    assert [by[c]["status"] for c in checks] == [expected] * 2, records

    (line,) = by["llama_cuda"]["lines"]
    assert line["slots_seen_by_forge_rt"] == 2
    assert line["alone"]["decode_tokens_per_s"] > 0
    assert all(t > 0 for t in line["together"]["decode_tokens_per_s"])

    cont = by["continuation"]
    assert cont["exact"] == len(cont["cuts"]) == 3
    assert (cont["continued"], cont["restarted"], cont["tokens_redecoded"]) == (3, 0, 0)

    assert [json.loads(x) for x in out.read_text().splitlines()] == records
