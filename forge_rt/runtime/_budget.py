"""BudgetActor: tracks KV-cache and memory pressure from every source that exists, and publishes budgets.

Sources are read on a timer (a ticker actor sends ``Refresh``) and on demand: NVML GPU memory,
the backend's context and slot state (llama-server ``/props``, ``/slots`` and ``/metrics``, vLLM
``/metrics`` and ``/v1/models``, each read through the backend's client adapter, which types the
replies and turns every fault into a ``BackendError``), the client's honest ``context_length()``,
and each workflow's observed token use. A source that cannot be read is reported as
``Unavailable`` with its reason -- never replaced by a default.
Workflow actors ask for their budget before compacting; the SlotWorker asks the published
``BudgetBoard`` whether a call fits in the shared KV pool (``admit``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec
import trio

from actors import Actor, ActorRef, ActorSystem, handles, quiet_logger
from forge_rt.clients import LlamaServerClient, VLLMClient
from forge_rt.context import GpuAvailable, NoGpu, NvmlUnavailable, probe_gpu
from forge_rt.core import LLMClient
from forge_rt.errors import BackendError
from forge_rt.runtime._scheduling import InferenceJob

__all__ = [
    "Available",
    "BudgetActor",
    "BudgetBoard",
    "BudgetMonitor",
    "BudgetReport",
    "BudgetSource",
    "ClientContextSource",
    "GetBudget",
    "LlamaServerSource",
    "NvmlSource",
    "ObservedUsage",
    "Unavailable",
    "VLLMMetricsSource",
]

_log = quiet_logger(__name__)


class Available(msgspec.Struct, frozen=True, kw_only=True):
    """A source's reading. Token figures are per slot unless named ``pool``."""

    context_tokens: int | None = None  # usable context of one slot
    pool_tokens: int | None = None  # KV pool shared by all slots
    kv_used_ratio: float | None = None  # 0..1, how full the backend's KV cache is
    gpu_total_bytes: int | None = None
    gpu_used_bytes: int | None = None
    slots_busy: int | None = None
    slots_total: int | None = None
    detail: str = ""


class Unavailable(msgspec.Struct, frozen=True):
    """The source could not be read; ``reason`` says why (kept verbatim for operators)."""

    reason: str


Reading = Available | Unavailable


class BudgetSource(Protocol):
    """Something that reports memory or context pressure."""

    name: str

    async def read(self) -> Reading: ...


class NvmlSource:
    """GPU memory through NVML; "no GPU" and "NVML unavailable" are reported as such."""

    name = "nvml"

    async def read(self) -> Reading:
        probe = await trio.to_thread.run_sync(probe_gpu)
        if isinstance(probe, GpuAvailable):
            total = sum(d.total_bytes for d in probe.devices)
            used = sum(d.used_bytes for d in probe.devices)
            return Available(
                gpu_total_bytes=total,
                gpu_used_bytes=used,
                detail=f"{len(probe.devices)} GPU(s)",
            )
        if isinstance(probe, NoGpu | NvmlUnavailable):
            return Unavailable(probe.reason)
        raise AssertionError(f"unexpected GPU probe {probe!r}")


class ClientContextSource:
    """The client's own ``context_length()`` (a real value or ``None``, never a guess)."""

    name = "client"

    def __init__(self, client: LLMClient) -> None:
        self._client = client

    async def read(self) -> Reading:
        try:
            length = await self._client.context_length()
        except BackendError as exc:  # a backend not up yet is a source to report, not a crash
            return Unavailable(f"the backend could not be asked for its context: {exc}")
        if length is None:
            return Unavailable("the backend does not report its context length")
        return Available(context_tokens=length, detail=f"model {self._client.model}")


class LlamaServerSource:
    """llama-server's ``/props`` (n_ctx, total slots), ``/slots`` (busy) and ``/metrics`` (KV use),
    read through ``client`` -- the backend's own client, whose owner closes it."""

    name = "llama-server"

    def __init__(self, client: LlamaServerClient) -> None:
        self._client = client

    async def read(self) -> Reading:
        try:
            props = await self._client.props()
            slots = await self._client.slots()
            metrics = await self._client.metrics()
        except BackendError as exc:  # a server not up, or without --slots/--metrics, is a reading
            return Unavailable(f"llama-server state unreadable: {exc}")
        n_ctx = props.n_ctx_per_slot
        per_slot = [s.n_ctx for s in slots]
        return Available(
            context_tokens=per_slot[0] if per_slot else n_ctx,
            pool_tokens=sum(per_slot) if per_slot else n_ctx,
            kv_used_ratio=metrics.get("llamacpp:kv_cache_usage_ratio"),
            slots_busy=sum(1 for s in slots if s.is_processing),
            slots_total=props.total_slots or len(slots) or None,
            detail=f"n_ctx={n_ctx}",
        )


class VLLMMetricsSource:
    """vLLM's ``/metrics`` KV-cache usage and the served model's ``max_model_len``, read through
    ``client`` -- the backend's own client, whose owner closes it."""

    name = "vllm"

    def __init__(self, client: VLLMClient) -> None:
        self._client = client

    async def read(self) -> Reading:
        try:
            metrics = await self._client.metrics()
            model = await self._client.served_model()
        except BackendError as exc:  # a server not up yet is a reading, not a crash
            return Unavailable(f"vLLM state unreadable: {exc}")
        ratio = metrics.get("vllm:gpu_cache_usage_perc")
        if ratio is None:  # the name newer vLLM releases use
            ratio = metrics.get("vllm:kv_cache_usage_perc")
        return Available(
            context_tokens=model.max_model_len,
            kv_used_ratio=ratio,
            detail=f"model {model.id}",
        )


class BudgetReport(msgspec.Struct, kw_only=True):
    """Everything the BudgetActor knows: each source's last reading and each workflow's use."""

    readings: dict[str, Reading]
    workflow_tokens: dict[str, int]
    context_tokens: int | None
    pool_tokens: int | None
    kv_used_ratio: float | None
    under_pressure: bool
    refreshed_at: float | None


class BudgetBoard:
    """The BudgetActor's published state, read synchronously by the SlotWorker's admission test."""

    def __init__(self) -> None:
        self.context_tokens: int | None = None
        self.pool_tokens: int | None = None
        self.kv_used_ratio: float | None = None
        self.in_flight: dict[int, int] = {}
        self.deferred = 0

    def admit(self, job: InferenceJob, estimate: int) -> bool:
        """Whether a call of ``estimate`` tokens fits next to the calls already running."""
        if self.pool_tokens is None:
            return True  # no pool is known, so there is nothing to defer against
        used = sum(tokens for jid, tokens in self.in_flight.items() if jid != job.id)
        fits = used + estimate <= self.pool_tokens
        if not fits:
            self.deferred += 1
        return fits


# --- messages ----------------------------------------------------------------------------------


class GetBudget(msgspec.Struct):
    """Ask for a workflow's context budget in tokens (``None``: no source knows one)."""

    workflow: str


class ObservedUsage(msgspec.Struct):
    """A workflow's last prompt+completion tokens, as the backend reported them."""

    workflow: str
    tokens: int


class Refresh(msgspec.Struct):
    """Read every source now."""


class _GetReport(msgspec.Struct):
    pass


class _Tick(msgspec.Struct):
    pass


class BudgetActor(Actor):
    """Keeps the latest reading of every source and answers budget questions."""

    def __init__(
        self,
        sources: Sequence[BudgetSource],
        board: BudgetBoard,
        *,
        manual_tokens: int | None,
        high_water: float,
        pressure_fraction: float,
        read_timeout: float,
    ) -> None:
        self._sources = list(sources)
        self._board = board
        self._manual = manual_tokens
        self._high_water = high_water
        self._pressure_fraction = pressure_fraction
        self._read_timeout = read_timeout
        self._readings: dict[str, Reading] = {}
        self._workflow_tokens: dict[str, int] = {}
        self._refreshed_at: float | None = None

    @handles(Refresh)
    async def on_refresh(self, msg: Refresh) -> BudgetReport:
        for source in self._sources:
            with trio.move_on_after(self._read_timeout) as scope:
                reading = await source.read()
            if scope.cancelled_caught:
                reading = Unavailable(f"no answer within {self._read_timeout:g} s")
            previous = self._readings.get(source.name)
            if type(previous) is not type(reading):
                _log.info("budget.source", source=source.name, reading=msgspec.to_builtins(reading))
            self._readings[source.name] = reading
        self._refreshed_at = trio.current_time()
        self._publish()
        return self._report()

    @handles(ObservedUsage)
    async def on_usage(self, msg: ObservedUsage) -> None:
        self._workflow_tokens[msg.workflow] = msg.tokens

    @handles(GetBudget)
    async def on_get_budget(self, msg: GetBudget) -> int | None:
        base = self._context_tokens()
        if base is None:
            return None
        if self._under_pressure():
            return max(1, math.floor(base * self._pressure_fraction))
        return base

    @handles(_GetReport)
    async def on_report(self, msg: _GetReport) -> BudgetReport:
        return self._report()

    def _values(self, field: str) -> list[Any]:
        return [
            getattr(r, field)
            for r in self._readings.values()
            if isinstance(r, Available) and getattr(r, field) is not None
        ]

    def _context_tokens(self) -> int | None:
        known = self._values("context_tokens")
        if self._manual is not None:
            known.append(self._manual)
        return min(known) if known else None

    def _under_pressure(self) -> bool:
        ratios = self._values("kv_used_ratio")
        gpu = [
            r.gpu_used_bytes / r.gpu_total_bytes
            for r in self._readings.values()
            if isinstance(r, Available) and r.gpu_total_bytes and r.gpu_used_bytes is not None
        ]
        return any(x >= self._high_water for x in (*ratios, *gpu))

    def _publish(self) -> None:
        board = self._board
        board.context_tokens = self._context_tokens()
        pools = self._values("pool_tokens")
        board.pool_tokens = min(pools) if pools else None
        ratios = self._values("kv_used_ratio")
        board.kv_used_ratio = max(ratios) if ratios else None

    def _report(self) -> BudgetReport:
        pools = self._values("pool_tokens")
        ratios = self._values("kv_used_ratio")
        return BudgetReport(
            readings=dict(self._readings),
            workflow_tokens=dict(self._workflow_tokens),
            context_tokens=self._context_tokens(),
            pool_tokens=min(pools) if pools else None,
            kv_used_ratio=max(ratios) if ratios else None,
            under_pressure=self._under_pressure(),
            refreshed_at=self._refreshed_at,
        )


class _Ticker(Actor):
    """Sends ``Refresh`` to the budget actor every ``interval`` seconds."""

    def __init__(self, target: ActorRef[Any], interval: float) -> None:
        self._target = target
        self._interval = interval

    async def on_start(self) -> None:
        self.context.self_ref.send_nowait(_Tick())

    @handles(_Tick)
    async def on_tick(self, msg: _Tick) -> None:
        await trio.sleep(self._interval)
        await self._target.send(Refresh())
        self.context.self_ref.send_nowait(_Tick())


class BudgetMonitor:
    """A handle on a running BudgetActor (and its ticker). Start with ``BudgetMonitor.start``."""

    def __init__(self, ref: ActorRef[Any], board: BudgetBoard) -> None:
        self.ref = ref
        self.board = board

    @classmethod
    async def start(
        cls,
        system: ActorSystem,
        sources: Sequence[BudgetSource],
        *,
        name: str = "budget",
        interval: float | None = 5.0,
        manual_tokens: int | None = None,
        high_water: float = 0.9,
        pressure_fraction: float = 0.5,
        read_timeout: float = 2.0,
    ) -> BudgetMonitor:
        """Spawn the actor, read every source once, then re-read every ``interval`` seconds.

        Under pressure (any KV or GPU use at or above ``high_water``) workflow budgets shrink
        to ``pressure_fraction`` of the context so their actors compact early.
        """
        board = BudgetBoard()
        ref = await system.spawn(
            lambda: BudgetActor(
                sources,
                board,
                manual_tokens=manual_tokens,
                high_water=high_water,
                pressure_fraction=pressure_fraction,
                read_timeout=read_timeout,
            ),
            name=name,
        )
        await ref.ask(Refresh())
        if interval is not None:
            await system.spawn(lambda: _Ticker(ref, interval), name=f"{name}.ticker")
        return cls(ref, board)

    async def report(self) -> BudgetReport:
        result: BudgetReport = await self.ref.ask(_GetReport())
        return result

    async def refresh(self) -> BudgetReport:
        result: BudgetReport = await self.ref.ask(Refresh())
        return result

    async def budget_for(self, workflow: str) -> int | None:
        result: int | None = await self.ref.ask(GetBudget(workflow))
        return result
