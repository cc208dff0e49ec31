"""One prepared script for the day a GPU is lent: what forge_rt does on it, checked once.

A lent accelerator machine comes for minutes, bare, with nothing reachable outside it, so
everything worth knowing about forge_rt on a GPU is asked in one run, and each answer is written
the moment it is known (a run cut short at its time limit keeps what it finished). Four checks,
run in this order:

- ``nvml``: does NVML (``pynvml``) see a GPU -- name, memory total and used -- and does
  forge_rt's budget source that reads it (``forge_rt.runtime.NvmlSource``) report the same
  memory? ``unavailable`` when ``pynvml`` is missing or there is no NVIDIA driver or device.
- ``llama_cuda``: the embedded llama.cpp server (``LocalModelServer``) with every layer offloaded
  to the GPU, with 2 and 4 parallel slots (the KV cache lines the runtime schedules over): prompt
  and decode tokens/s from the server's own ``timings``, one request alone and one per slot at
  once, and whether forge_rt's ``LlamaServerSource`` sees that many slots.
- ``continuation``: a constrained tool call preempted at three points and continued gives the
  same text as the call unpreempted (``tests/runtime/test_continuation_local_model.py``, here on
  whatever device the server runs on).
- ``voice_ttft``: the demo (``forge_rt.demo``): three background agents and a voice request on
  one slot over four cache lines; the voice request's time to first token under load against the
  same agent's second question on the idle slot, in the same run, as a ratio.

Each check prints one JSON object, ``{"check", "status", ...figures, "why"}``, to stdout and
appends it to ``$OUT/gpu_check.jsonl`` when ``$OUT`` is set (the device tool's result folder),
else to ``--out`` when given. ``status`` is ``ok`` (measured on a GPU), ``unavailable`` (no GPU,
or no GPU build of llama.cpp, or a package missing: ``why`` says which; a check that still ran on
the CPU to exercise its path carries ``"ran_on": "cpu"`` and its CPU figures) or ``failed`` (it
broke, or what it measured is wrong, wherever it ran: ``why`` says how). A first
``environment`` record names the interpreter, the packages and the devices llama.cpp sees.

Run: ``python bench/gpu_check.py`` (``--quick``, the default without a GPU: two slots, a few
tokens, one demo run, ~2 minutes on 2 cores; ``--full``, the default with one: 2 and 4 slots,
longer prompts and replies, three demo runs). ``--checks nvml,voice_ttft`` runs a subset. Only
the standard library is needed to start: on a machine without forge_rt's dependencies the
checks that need them say which are missing.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from forge_rt.backends.local import LocalModelServer
    from forge_rt.core import InferenceRequest

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("forge_rt") is None:
    # A lent machine runs a copy of the checkout with its own Python, where forge_rt is not
    # installed: import it from the copy.
    sys.path.insert(0, str(ROOT))

Status = Literal["ok", "unavailable", "failed"]
Record = dict[str, Any]

CHECKS = ("nvml", "llama_cuda", "continuation", "voice_ttft")
"""Every check, in the order they run (the two that share a server run back to back)."""

MODEL_CHECKS = ("llama_cuda", "continuation", "voice_ttft")
"""The checks that run the embedded model."""

REPORT_NAME = "gpu_check.jsonl"

_MODULES = {
    "trio": "trio",
    "httpx": "httpx",
    "msgspec": "msgspec",
    "pydantic": "pydantic",
    "structlog": "structlog",
    "pynvml": "nvidia-ml-py",
    "xllamacpp": "xllamacpp",
}
"""Import name -> distribution of what the checks need beyond the standard library."""

FORGE_RT_NEEDS = ("trio", "httpx", "msgspec", "pydantic", "structlog", "pynvml")
"""What importing forge_rt's runtime needs beyond the standard library (``forge_rt.context``
imports ``pynvml`` itself)."""

_CUDA_WHEEL = (
    "pip install xllamacpp --force-reinstall --index-url "
    "https://xorbitsai.github.io/xllamacpp/whl/cu128"
)


def record(check: str, status: Status, why: str = "", **figures: Any) -> Record:
    """One check's result: its name, status, figures, and why it is not ``ok`` (or ``""``)."""
    return {"check": check, "status": status, **figures, "why": why}


def outcome(on_gpu: bool, not_gpu_why: str, problems: Sequence[str]) -> tuple[Status, str]:
    """The status of a check that ran: ``failed`` when it found problems, wherever it ran;
    else ``ok`` on a GPU, and ``unavailable`` (with the reason there was no GPU) on the CPU."""
    if problems:
        return "failed", "; ".join(problems)
    if on_gpu:
        return "ok", ""
    return "unavailable", f"{not_gpu_why} (ran on the CPU to exercise the path)"


class Report:
    """Writes each record as one JSON line to ``stream`` and, when ``path`` is set, to that file
    (truncated when the report opens, flushed after every line so a killed run keeps them)."""

    def __init__(self, path: Path | None, stream: IO[str]) -> None:
        self.path = path
        self.stream = stream
        self.records: list[Record] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("", encoding="utf-8")

    def write(self, rec: Record) -> None:
        """Emit ``rec`` now."""
        line = json.dumps(rec, default=str)
        self.records.append(rec)
        print(line, file=self.stream, flush=True)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")

    def written(self) -> set[str]:
        """Names of the checks reported so far."""
        return {r["check"] for r in self.records}


def report_path(out_env: str | None, out_arg: Path | None) -> Path | None:
    """``$OUT/gpu_check.jsonl`` when ``$OUT`` is set (the device tool's folder), else ``--out``."""
    if out_env:
        return Path(out_env) / REPORT_NAME
    return out_arg


# --- environment ---------------------------------------------------------------------------------


def _version(module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    try:
        return importlib.metadata.version(_MODULES.get(module, module))
    except importlib.metadata.PackageNotFoundError:
        return "installed (no distribution metadata)"


def missing_modules(names: Iterable[str]) -> list[str]:
    """Those of ``names`` that cannot be imported here, as ``module (pip: distribution)``."""
    return [
        f"{name} (pip: {_MODULES.get(name, name)})"
        for name in names
        if importlib.util.find_spec(name) is None
    ]


def llama_devices() -> list[dict[str, Any]] | str:
    """The devices the installed llama.cpp build can use (``xllamacpp.get_device_info``, which
    loads no model), or why they cannot be listed."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install 'forge-rt[local]')"
    import xllamacpp

    devices = []
    for info in xllamacpp.get_device_info():
        kind = getattr(info.get("type"), "name", str(info.get("type")))
        devices.append(
            {
                "name": str(info.get("name")),
                "description": str(info.get("description")),
                "type": kind.removeprefix("GGML_BACKEND_DEVICE_TYPE_").lower(),
                "memory_total": info.get("memory_total"),
            }
        )
    return devices


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def environment_record(plan: Plan) -> Record:
    """What ran the checks: interpreter, machine, packages, llama.cpp's devices, the mode."""
    return record(
        "environment",
        "ok",
        python=platform.python_version(),
        executable=sys.executable,
        machine=f"{platform.system()} {platform.machine()}",
        cpus=os.cpu_count(),
        commit=_commit(),
        packages={name: _version(name) for name in _MODULES},
        llama_devices=plan.offload.devices,
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY")
        or (None if plan.offload.on_gpu else "PASSIVE (set for the servers this run starts)"),
        mode="quick" if plan.quick else "full",
        mode_why=plan.mode_why,
        checks=list(plan.checks),
    )


# --- NVML ----------------------------------------------------------------------------------------


def read_nvml(nvml: Any | None = None) -> Record:
    """Every GPU NVML sees, read directly through ``pynvml`` (independently of forge_rt, whose
    reading it is compared with): ``{"gpus": [...]}`` or ``{"unavailable": reason}``.

    ``nvml`` defaults to the real module; tests pass a fake with the same functions.
    """
    if nvml is None:
        if importlib.util.find_spec("pynvml") is None:
            return {"unavailable": "pynvml is not installed (pip: nvidia-ml-py)"}
        import pynvml

        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return {"unavailable": f"NVML cannot start: {exc} (no NVIDIA driver here?)"}
    try:
        count = int(nvml.nvmlDeviceGetCount())
        gpus = []
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                {
                    "index": index,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "memory_total_bytes": int(memory.total),
                    "memory_used_bytes": int(memory.used),
                }
            )
        driver = getattr(nvml, "nvmlSystemGetDriverVersion", None)
        version = driver() if driver is not None else None
    except nvml.NVMLError as exc:
        return {"unavailable": f"NVML failed reading its devices: {exc}"}
    finally:
        nvml.nvmlShutdown()
    if not gpus:
        return {"unavailable": "NVML started and sees no GPU"}
    if isinstance(version, bytes):
        version = version.decode()
    return {"gpus": gpus, "driver": version}


def _source_reading() -> Record:
    """forge_rt's ``NvmlSource`` reading, or why forge_rt could not be asked."""
    missing = missing_modules(FORGE_RT_NEEDS)
    if missing:
        return {"error": f"forge_rt cannot run here: missing {', '.join(missing)}"}
    import trio

    from forge_rt.runtime import Available, NvmlSource

    reading = trio.run(NvmlSource().read)
    if isinstance(reading, Available):
        return {
            "available": True,
            "gpu_total_bytes": reading.gpu_total_bytes,
            "gpu_used_bytes": reading.gpu_used_bytes,
            "detail": reading.detail,
        }
    return {"available": False, "reason": reading.reason}


def nvml_check(nvml: Any | None = None) -> Record:
    """Check (a): what NVML sees, and whether forge_rt's NVML budget source says the same.

    ``ok`` when a GPU is seen and the source reports its total memory; ``unavailable`` when NVML
    sees none and the source, too, reports ``Unavailable`` with a reason; ``failed`` when the two
    disagree (a source that invents memory, or misses a GPU NVML sees).
    """
    raw = read_nvml(nvml)
    source = _source_reading()
    figures: Record = {"source": "forge_rt.runtime.NvmlSource", "source_reading": source}
    if "unavailable" in raw:
        if source.get("available"):
            return record(
                "nvml",
                "failed",
                f"NVML is unavailable here ({raw['unavailable']}) but NvmlSource reports memory",
                **figures,
            )
        return record("nvml", "unavailable", raw["unavailable"], **figures)
    gpus = raw["gpus"]
    total = sum(g["memory_total_bytes"] for g in gpus)
    figures.update(gpus=gpus, driver=raw["driver"])
    if "error" in source:
        return record(
            "nvml", "unavailable", f"NVML sees {len(gpus)} GPU(s); {source['error']}", **figures
        )
    if not source["available"]:
        return record(
            "nvml",
            "failed",
            f"NVML sees {len(gpus)} GPU(s) but NvmlSource reports Unavailable: {source['reason']}",
            **figures,
        )
    if source["gpu_total_bytes"] != total:
        return record(
            "nvml",
            "failed",
            f"NvmlSource reports {source['gpu_total_bytes']} bytes in all, NVML {total}",
            **figures,
        )
    return record("nvml", "ok", **figures)


# --- the plan ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Offload:
    """Whether llama.cpp runs on a GPU here, the server flags that put it there, and why not."""

    on_gpu: bool
    args: tuple[str, ...]
    why_not: str
    devices: list[dict[str, Any]] | str


def decide_offload(nvml: Record, devices: list[dict[str, Any]] | str) -> Offload:
    """Every layer on the GPU when NVML sees one and the llama.cpp build has a GPU device;
    otherwise the CPU, with the reason (no GPU, or a CPU-only build of xllamacpp)."""
    if "unavailable" in nvml:
        return Offload(False, (), f"no GPU: {nvml['unavailable']}", devices)
    if isinstance(devices, str):
        return Offload(False, (), devices, devices)
    gpu_devices = [d for d in devices if d["type"] in ("gpu", "igpu")]
    if not gpu_devices:
        kinds = ", ".join(sorted({d["type"] for d in devices})) or "none"
        return Offload(
            False,
            (),
            f"NVML sees a GPU but the installed xllamacpp build has no GPU device (its devices: "
            f"{kinds}); a CUDA build: `{_CUDA_WHEEL}`",
            devices,
        )
    # More layers than the packaged models have: llama.cpp puts every one on the GPU.
    return Offload(True, ("--n-gpu-layers", "999"), "", devices)


@dataclass(frozen=True)
class Sizes:
    """How much each check does: ``--quick`` keeps a CPU run to about two minutes."""

    slot_counts: tuple[int, ...]
    prompt_items: int  # ~10 prompt tokens each
    decode_tokens: int
    cuts: int
    demo_runs: int
    limit_s: float  # each check's time limit


QUICK = Sizes(slot_counts=(2,), prompt_items=6, decode_tokens=8, cuts=3, demo_runs=1, limit_s=240)
FULL = Sizes(
    slot_counts=(2, 4), prompt_items=150, decode_tokens=128, cuts=3, demo_runs=3, limit_s=360
)


@dataclass(frozen=True)
class Plan:
    """What this run does, decided once from the flags and what NVML and llama.cpp see."""

    checks: tuple[str, ...]
    quick: bool
    mode_why: str
    offload: Offload
    nvml: Record
    model: str
    log_dir: Path | None

    @property
    def sizes(self) -> Sizes:
        """How much each check does in this mode."""
        return QUICK if self.quick else FULL


def make_plan(args: argparse.Namespace, nvml: Record, devices: list[dict[str, Any]] | str) -> Plan:
    """The plan for ``args``: ``--quick``/``--full`` when given, else quick unless NVML sees a GPU."""
    gpu = "unavailable" not in nvml
    if args.quick or args.full:
        quick, why = bool(args.quick), "chosen by flag"
    else:
        quick = not gpu
        why = "NVML sees a GPU" if gpu else "no GPU, so --quick"
    checks = tuple(c for c in CHECKS if c in args.checks)
    return Plan(
        checks=checks,
        quick=quick,
        mode_why=why,
        offload=decide_offload(nvml, devices),
        nvml=nvml,
        model=args.model,
        log_dir=args.log_dir,
    )


def model_unavailable(model: str) -> str | None:
    """Why the embedded model cannot run here (a package or a model part missing), or None."""
    missing = missing_modules([*FORGE_RT_NEEDS, "xllamacpp"])
    if missing:
        return f"missing {', '.join(missing)}"
    from forge_rt.backends.local import locate_parts
    from forge_rt.errors import ModelPartsMissingError

    try:
        locate_parts(model)
    except ModelPartsMissingError as exc:
        return str(exc)
    return None


# --- the embedded server -------------------------------------------------------------------------


@dataclass
class Started:
    """A running embedded server, and how much GPU memory it took (``None`` without NVML)."""

    server: LocalModelServer
    n_parallel: int
    gpu_used_delta_bytes: int | None


def _gpu_used() -> int | None:
    read = read_nvml()
    if "unavailable" in read:
        return None
    return int(sum(g["memory_used_bytes"] for g in read["gpus"]))


N_CTX_PER_SLOT = 4096


@asynccontextmanager
async def open_server(plan: Plan, n_parallel: int) -> AsyncIterator[Started]:
    """The embedded server with ``n_parallel`` slots of ``N_CTX_PER_SLOT`` tokens each, offloaded
    as ``plan`` says; on a GPU, NVML's used memory before and after says whether it landed there."""
    import trio

    from forge_rt.backends.local import LocalModelServer

    gpu = "unavailable" not in plan.nvml
    before = await trio.to_thread.run_sync(_gpu_used) if gpu else None
    async with LocalModelServer.start(
        plan.model,
        n_ctx=N_CTX_PER_SLOT * n_parallel,
        n_parallel=n_parallel,
        threads=None if plan.offload.on_gpu else 2,
        log_dir=plan.log_dir,
        extra_args=plan.offload.args,
        restart=None,
    ) as server:
        after = await trio.to_thread.run_sync(_gpu_used) if gpu else None
        delta = None if before is None or after is None else after - before
        yield Started(server, n_parallel, delta)


def _prompt(tag: str, items: int) -> str:
    """A prompt of about ``10 * items`` tokens that no other request shares a prefix with."""
    lines = " ".join(f"{tag} item{i} costs {i * 3} euros;" for i in range(items))
    return f"{lines}\nThe total of every cost above is"


async def _complete(http: Any, prompt: str, slot: int, tokens: int) -> Record:
    """One raw completion on ``slot``, exactly ``tokens`` decoded; the server's ``timings``."""
    body = {
        "prompt": prompt,
        "n_predict": tokens,
        "ignore_eos": True,
        "id_slot": slot,
        "cache_prompt": False,
        "temperature": 0,
    }
    response = await http.post("/completion", json=body)
    response.raise_for_status()
    timings: Record = response.json()["timings"]
    return timings


def line_figures(
    n_parallel: int,
    alone: Record,
    together: Sequence[Record],
    wall_s: float,
    tokens: int,
    slots_seen: int | None,
) -> tuple[Record, list[str]]:
    """The figures of one server (one request alone, then one per slot at once) and what is
    wrong with them: a request that decoded fewer tokens than asked, a slot count forge_rt's
    ``LlamaServerSource`` does not see."""
    problems = []
    for t in (alone, *together):
        if t["predicted_n"] != tokens:
            problems.append(f"{n_parallel} slots: a request decoded {t['predicted_n']} of {tokens}")
    if slots_seen != n_parallel:
        problems.append(
            f"{n_parallel} slots started, forge_rt's LlamaServerSource sees {slots_seen}"
        )
    decode_ms = max(t["predicted_ms"] for t in together)
    aggregate = sum(t["predicted_n"] for t in together) / (decode_ms / 1000)
    figures = {
        "n_parallel": n_parallel,
        "alone": {
            "prompt_tokens": alone["prompt_n"],
            "prompt_tokens_per_s": round(alone["prompt_per_second"], 1),
            "decode_tokens_per_s": round(alone["predicted_per_second"], 1),
        },
        "together": {
            "prompt_tokens_per_s": [round(t["prompt_per_second"], 1) for t in together],
            "decode_tokens_per_s": [round(t["predicted_per_second"], 1) for t in together],
            "decode_tokens_per_s_all_slots": round(aggregate, 1),
            "wall_s": round(wall_s, 3),
        },
        "all_slots_vs_alone": round(aggregate / alone["predicted_per_second"], 2),
        "slots_seen_by_forge_rt": slots_seen,
    }
    return figures, problems


async def measure_lines(started: Started, plan: Plan) -> tuple[Record, list[str]]:
    """Prompt and decode rates of one request alone, then of one request per slot at once."""
    import httpx
    import trio

    from forge_rt.clients import LlamaServerClient
    from forge_rt.runtime import Available, LlamaServerSource

    sizes, n = plan.sizes, started.n_parallel
    together: list[Record] = [{} for _ in range(n)]
    async with httpx.AsyncClient(base_url=started.server.url, timeout=600) as http:
        alone = await _complete(http, _prompt("alone", sizes.prompt_items), 0, sizes.decode_tokens)

        async def one(slot: int) -> None:
            prompt = _prompt(f"slot{slot}", sizes.prompt_items)
            together[slot] = await _complete(http, prompt, slot, sizes.decode_tokens)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for slot in range(n):
                nursery.start_soon(one, slot)
        wall = time.perf_counter() - start
    async with LlamaServerClient(started.server.url) as client:
        reading = await LlamaServerSource(client).read()
    slots_seen = reading.slots_total if isinstance(reading, Available) else None
    figures, problems = line_figures(n, alone, together, wall, sizes.decode_tokens, slots_seen)
    figures["gpu_used_delta_bytes"] = started.gpu_used_delta_bytes
    if plan.offload.on_gpu:
        problems += off_gpu_problems(n, started.gpu_used_delta_bytes)
    return figures, problems


ON_GPU_MIN_BYTES = 100 * 2**20
"""GPU memory a server offloaded to the GPU takes at least: the 0.5B model's weights alone are
~0.4 GB, its KV cache more."""


def off_gpu_problems(n_parallel: int, delta: int | None) -> list[str]:
    """Why a server that should be on the GPU is not: NVML's used memory did not rise when it
    started (a CUDA build can fall back to the CPU silently, e.g. on a driver it cannot use)."""
    if delta is None:
        return [f"{n_parallel} slots: NVML could not be read around the server's start"]
    if delta < ON_GPU_MIN_BYTES:
        return [
            f"{n_parallel} slots: GPU memory in use rose by {delta} bytes when the server "
            "started: the model is not on the GPU"
        ]
    return []


async def llama_check(two: Started, plan: Plan) -> Record:
    """Check (b): the 2-slot server ``two`` is measured, then each larger slot count in a server
    of its own (stopped before the next check)."""
    lines: list[Record] = []
    problems: list[str] = []
    figures, found = await measure_lines(two, plan)
    lines.append(figures)
    problems += found
    for n in plan.sizes.slot_counts:
        if n == two.n_parallel:
            continue
        async with open_server(plan, n) as more:
            figures, found = await measure_lines(more, plan)
        lines.append(figures)
        problems += found
    status, why = outcome(plan.offload.on_gpu, plan.offload.why_not, problems)
    return record(
        "llama_cuda",
        status,
        why,
        ran_on="gpu" if plan.offload.on_gpu else "cpu",
        offload_args=list(plan.offload.args),
        prompt_items=plan.sizes.prompt_items,
        decode_tokens=plan.sizes.decode_tokens,
        lines=lines,
    )


# --- continuation --------------------------------------------------------------------------------


def _booking_request() -> InferenceRequest:
    """The constrained tool call of ``tests/runtime/test_continuation_local_model.py``."""
    from forge_rt.core import (
        InferenceRequest,
        JsonSchemaConstraint,
        Message,
        Sampling,
        ToolSpec,
    )
    from forge_rt.guardrails import respond_spec, tool_call_schema

    tools = (
        ToolSpec(
            name="book_table",
            description="Book a restaurant table.",
            parameters={
                "type": "object",
                "properties": {
                    "restaurant": {"type": "string"},
                    "party_size": {"type": "integer"},
                    "time": {"type": "string", "description": "HH:MM, 24-hour"},
                },
                "required": ["restaurant", "party_size", "time"],
            },
        ),
        respond_spec(),
    )
    return InferenceRequest(
        messages=(
            Message.system("You book tables. Reply with one tool call as JSON."),
            Message.user("Book Chez Marie for 4 people at 19:30 tonight."),
        ),
        tools=tools,
        sampling=Sampling(temperature=0.0, top_k=1, max_tokens=96, seed=3),
        constraint=JsonSchemaConstraint(schema=tool_call_schema(list(tools))),
    )


def cut_points(tokens: int, cuts: int, seed: int = 11) -> list[int]:
    """One cut in each of ``cuts`` equal parts of a ``tokens``-chunk reply, drawn from ``seed``
    (the test's draw): early, middle, late."""
    draw, part = random.Random(seed), tokens // cuts
    return [draw.randrange(max(2, i * part), (i + 1) * part) for i in range(cuts)]


async def continuation_check(two: Started, plan: Plan) -> Record:
    """Check (d): the reference reply on a warm cache line, then the same call preempted after
    each cut point by a voice call on the other line and continued; every text must match."""
    from actors import ActorSystem
    from forge_rt.clients import LlamaServerClient
    from forge_rt.core import InferenceRequest, Message, Sampling, StreamChunk, TextDeltaChunk
    from forge_rt.runtime import SlotWorker
    from forge_rt.testing import preempted_reply

    background = _booking_request()
    voice = InferenceRequest(
        messages=(Message.user("Say hi."),), sampling=Sampling(temperature=0.0, max_tokens=4)
    )
    problems: list[str] = []
    mismatches: list[Record] = []
    async with LlamaServerClient(two.server.url) as client, ActorSystem.open() as system:
        slot = await SlotWorker.start(system, client, cache_lines=two.n_parallel)
        chunks: list[str] = []

        async def count(chunk: StreamChunk) -> None:
            if isinstance(chunk, TextDeltaChunk):
                chunks.append(chunk.text)

        # The reference runs on a warm line, as every resumed call does (see the test).
        await slot.infer(background, priority=10)
        whole = await slot.infer(background, priority=10, on_chunk=count)
        if len(chunks) <= plan.sizes.cuts * 2:
            problems.append(f"the reply is too short to cut: {whole.raw_text!r}")
            cuts: list[int] = []
        else:
            cuts = cut_points(len(chunks), plan.sizes.cuts)
        for cut in cuts:
            text = await preempted_reply(slot, background, voice, after_chunks=cut)
            if text != whole.raw_text:
                mismatches.append({"cut": cut, "text": text})
        stats = await slot.stats()
    if mismatches:
        problems.append(f"{len(mismatches)} of {len(cuts)} continued replies differ")
    if cuts and (stats.preemptions, stats.continued) != (len(cuts), len(cuts)):
        problems.append(
            f"{stats.preemptions} preemptions, {stats.continued} continued, for {len(cuts)} cuts"
        )
    if stats.restarted or stats.tokens_redecoded:
        problems.append(
            f"{stats.restarted} restarted, {stats.tokens_redecoded} tokens decoded again"
        )
    status, why = outcome(plan.offload.on_gpu, plan.offload.why_not, problems)
    return record(
        "continuation",
        status,
        why,
        ran_on="gpu" if plan.offload.on_gpu else "cpu",
        reference=whole.raw_text,
        chunks=len(chunks),
        cuts=cuts,
        exact=len(cuts) - len(mismatches),
        mismatches=mismatches,
        preemptions=stats.preemptions,
        continued=stats.continued,
        restarted=stats.restarted,
        tokens_redecoded=stats.tokens_redecoded,
        prompt_tokens_reprocessed=stats.prompt_tokens_reprocessed,
        prompt_tokens_resumed=stats.prompt_tokens_resumed,
    )


# --- voice TTFT ----------------------------------------------------------------------------------


def demo_figures(reports: Sequence[Any]) -> tuple[Record, list[str]]:
    """The voice TTFT under load and idle of each demo run (``DemoReport``), their ratios, and
    what makes a run's figure meaningless: no token, no idle baseline, or nothing under load."""
    runs, problems = [], []
    for i, rep in enumerate(reports):
        voice, idle = rep.voice_ttft_s, rep.voice_idle_ttft_s
        ratio = voice / idle if voice is not None and idle else None
        runs.append(
            {
                "voice_ttft_s": voice,
                "idle_ttft_s": idle,
                "ratio": None if ratio is None else round(ratio, 2),
                "contended": rep.contended,
                "background_agents": sum(1 for a in rep.agents if a.background),
                "completions": rep.completions,
                "agents": len(rep.agents),
                "preemptions": rep.preemptions,
                "continued": rep.continued,
                "restarted": rep.restarted,
                "wall_s": round(rep.wall_s, 2),
            }
        )
        if voice is None:
            problems.append(f"run {i + 1}: the voice request produced no token")
        elif idle is None:
            problems.append(f"run {i + 1}: the idle-slot baseline produced no token")
        elif not rep.contended:
            problems.append(f"run {i + 1}: the background agents had ended before the voice came")
    ratios = [r["ratio"] for r in runs if r["ratio"] is not None]
    figures: Record = {
        "runs": runs,
        "ratio_median": round(statistics.median(ratios), 2) if ratios else None,
        "ratio_max": max(ratios) if ratios else None,
    }
    return figures, problems


async def voice_check(plan: Plan) -> Record:
    """Check (c): the demo on the embedded model, ``sizes.demo_runs`` times. The demo starts its
    own server (four slots as cache lines) with llama.cpp's default offload (``-1``: every layer
    a GPU build can place)."""
    from forge_rt.demo import DemoConfig, run_demo

    config = DemoConfig(backend="local", model=plan.model)
    reports = [await run_demo(config) for _ in range(plan.sizes.demo_runs)]
    figures, problems = demo_figures(reports)
    status, why = outcome(plan.offload.on_gpu, plan.offload.why_not, problems)
    return record(
        "voice_ttft", status, why, ran_on="gpu" if plan.offload.on_gpu else "cpu", **figures
    )


# --- running ---------------------------------------------------------------------------------------


async def guarded(check: str, limit_s: float, run: Callable[[], Awaitable[Record]]) -> Record:
    """``run()``'s record, or a ``failed`` one when it raises or outlasts ``limit_s``: a check
    that breaks is itself a result, and the checks after it still run."""
    import trio

    try:
        with trio.fail_after(limit_s):
            return await run()
    except trio.TooSlowError:
        return record(check, "failed", f"did not finish within {limit_s:g} s")
    except Exception as exc:  # noqa: BLE001 -- any fault is this check's result, reported
        return record(check, "failed", f"{type(exc).__name__}: {exc}")


async def run_model_checks(plan: Plan, report: Report) -> None:
    """Checks (b), (d) and (c): the first two on one 2-slot server, then the demo on its own."""
    wanted = [c for c in plan.checks if c in MODEL_CHECKS]
    why = model_unavailable(plan.model)
    if why is not None:
        for check in wanted:
            report.write(record(check, "unavailable", why))
        return
    limit = plan.sizes.limit_s
    shared = [c for c in wanted if c in ("llama_cuda", "continuation")]
    if shared:
        try:
            async with open_server(plan, 2) as two:
                if "llama_cuda" in shared:
                    report.write(await guarded("llama_cuda", limit, lambda: llama_check(two, plan)))
                if "continuation" in shared:
                    report.write(
                        await guarded("continuation", limit, lambda: continuation_check(two, plan))
                    )
        except Exception as exc:  # noqa: BLE001 -- a server that will not start fails its checks
            for check in shared:
                if check not in report.written():
                    report.write(
                        record(check, "failed", f"the embedded server: {type(exc).__name__}: {exc}")
                    )
    if "voice_ttft" in wanted:
        report.write(
            await guarded("voice_ttft", limit * plan.sizes.demo_runs, lambda: voice_check(plan))
        )


@contextmanager
def cpu_threads_yield(on_cpu: bool) -> Iterator[None]:
    """On the CPU, the servers started meanwhile get ``OMP_WAIT_POLICY=PASSIVE`` (unless it is
    set): llama.cpp's OpenMP threads then sleep at a barrier instead of spinning.

    Two llama.cpp processes spinning on two cores stall each other: with the eval's server
    running beside this script on the 2-core development machine, the 2-slot server decoded
    0.4 tokens/s alone; with passive waiting, 12.3 tokens/s (2026-12-06, one run each). On a GPU
    the CPU threads hardly work, and nothing is changed.
    """
    if not on_cpu or "OMP_WAIT_POLICY" in os.environ:
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        yield
    finally:
        del os.environ["OMP_WAIT_POLICY"]


def _quiet_logs() -> None:
    """forge_rt's logs go to stderr, warnings and worse only: stdout carries the records."""
    if importlib.util.find_spec("structlog") is None:
        return
    import logging

    import structlog

    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short CPU-sized run (default: no GPU)")
    mode.add_argument(
        "--full", action="store_true", help="2 and 4 slots, 3 demo runs (default: GPU)"
    )
    parser.add_argument(
        "--checks",
        type=lambda s: [c.strip() for c in s.split(",") if c.strip()],
        default=list(CHECKS),
        help=f"comma-separated subset of {','.join(CHECKS)}",
    )
    parser.add_argument("--out", type=Path, default=None, help="report file when $OUT is unset")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="packaged model to run")
    parser.add_argument(
        "--log-dir", type=Path, default=None, help="server logs (default: $OUT/logs, or forge_rt's)"
    )
    args = parser.parse_args(argv)
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}")
    return args


def main(argv: Sequence[str] | None = None, *, stream: IO[str] | None = None) -> list[Record]:
    """Run the chosen checks, writing each record as it comes; returns every record."""
    args = parse_args(argv)
    out_env = os.environ.get("OUT")
    if args.log_dir is None and out_env:
        args.log_dir = Path(out_env) / "logs"
    report = Report(report_path(out_env, args.out), sys.stdout if stream is None else stream)
    _quiet_logs()
    nvml = read_nvml()
    plan = make_plan(args, nvml, llama_devices())
    report.write(environment_record(plan))
    if "nvml" in plan.checks:
        report.write(nvml_check())
    if any(c in MODEL_CHECKS for c in plan.checks):
        missing = missing_modules(["trio"])
        if missing:
            for check in (c for c in plan.checks if c in MODEL_CHECKS):
                report.write(record(check, "unavailable", f"missing {', '.join(missing)}"))
        else:
            import trio

            with cpu_threads_yield(not plan.offload.on_gpu):
                trio.run(run_model_checks, plan, report)
    return report.records


if __name__ == "__main__":
    records = main()
    sys.exit(1 if any(r["status"] == "failed" for r in records) else 0)
