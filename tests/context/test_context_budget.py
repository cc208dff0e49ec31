"""resolve_budget: the four modes, Ollama's VRAM tiers, failures that refuse to guess."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import pytest
from structlog.testing import capture_logs

from forge_rt.context import (
    Budget,
    BudgetMode,
    GpuAvailable,
    GpuDeviceError,
    GpuMemory,
    HardwareProfile,
    NoGpu,
    NvmlUnavailable,
    ollama_context_for_vram,
    resolve_budget,
)
from forge_rt.core import ClientCapabilities, InferenceRequest, LLMResponse, StreamChunk
from forge_rt.errors import ContextBudgetError

GIB = 2**30


class FakeClient:
    """An LLMClient whose only working part is context_length(), which budgets use."""

    def __init__(self, context: int | None, model: str | None = "qwen2.5-coder-0.5b") -> None:
        self._context = context
        self._model = model
        self.asked = 0

    @property
    def model(self) -> str | None:
        return self._model

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities()

    async def send(self, request: InferenceRequest) -> LLMResponse:
        raise AssertionError("budget resolution must not run inference")

    def stream(
        self, request: InferenceRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[StreamChunk]]:
        raise AssertionError("budget resolution must not run inference")

    async def context_length(self) -> int | None:
        self.asked += 1
        return self._context

    async def aclose(self) -> None:
        return None


def gpus(*sizes_gib: float) -> HardwareProfile:
    return HardwareProfile(
        gpu=GpuAvailable(
            devices=tuple(
                GpuMemory(
                    index=i,
                    name=f"GPU {i}",
                    total_bytes=int(s * GIB),
                    used_bytes=0,
                    free_bytes=int(s * GIB),
                )
                for i, s in enumerate(sizes_gib)
            )
        )
    )


async def test_backend_mode_uses_the_backends_context() -> None:
    """backend: the client's context length, sourced and logged."""
    with capture_logs() as logs:
        budget = await resolve_budget(BudgetMode.BACKEND, client=FakeClient(8192))
    assert budget == Budget(
        tokens=8192,
        mode=BudgetMode.BACKEND,
        source="backend",
        detail="backend reports 8192 tokens of context for qwen2.5-coder-0.5b",
    )
    assert logs == [
        {
            "event": "context budget resolved",
            "log_level": "info",
            "tokens": 8192,
            "mode": "backend",
            "source": "backend",
            "detail": budget.detail,
        }
    ]


async def test_backend_mode_refuses_to_guess() -> None:
    """backend: a client that does not know its context raises, naming what to do instead."""
    with pytest.raises(
        ContextBudgetError, match=r"did not report a context length; use budget mode 'manual'"
    ) as info:
        await resolve_budget("backend", client=FakeClient(None))
    assert info.value.source == "backend"


async def test_backend_mode_needs_a_client() -> None:
    """backend without a client is a typed error, not a default."""
    with pytest.raises(ContextBudgetError, match=r"no client was given"):
        await resolve_budget(BudgetMode.BACKEND)


async def test_backend_mode_rejects_a_nonsense_length() -> None:
    """A context length of 0 from the backend is refused."""
    with pytest.raises(ContextBudgetError, match=r"reported an unusable context length 0$"):
        await resolve_budget(BudgetMode.BACKEND, client=FakeClient(0))


async def test_manual_mode_takes_the_callers_number() -> None:
    """manual: the given token count, without asking the backend."""
    client = FakeClient(32768)
    budget = await resolve_budget("manual", manual_tokens=6000, client=client)
    assert (budget.tokens, budget.source, client.asked) == (6000, "manual", 0)


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (None, r"^budget mode 'manual' needs manual_tokens \(e.g. --budget-tokens 8192\)$"),
        (0, r"^manual_tokens must be a positive token count, got 0$"),
    ],
    ids=["missing", "zero"],
)
async def test_manual_mode_needs_a_positive_number(tokens: int | None, message: str) -> None:
    """manual without a usable number is a typed error."""
    with pytest.raises(ContextBudgetError, match=message):
        await resolve_budget(BudgetMode.MANUAL, manual_tokens=tokens)


@pytest.mark.parametrize(
    "kind", ["llama-server", "vllm", None], ids=["llama-server", "vllm", "unnamed"]
)
async def test_full_mode_uses_the_server_context(kind: str | None) -> None:
    """full: servers that fix their context at start give their n_ctx / max_model_len."""
    budget = await resolve_budget(BudgetMode.FULL, client=FakeClient(16384), backend_kind=kind)
    assert (budget.tokens, budget.mode, budget.source) == (16384, BudgetMode.FULL, "backend")


async def test_fast_mode_is_half_of_full() -> None:
    """fast: half the server's context, with the full figure in the detail."""
    budget = await resolve_budget(BudgetMode.FAST, client=FakeClient(16384), backend_kind="vllm")
    assert budget == Budget(
        tokens=8192,
        mode=BudgetMode.FAST,
        source="backend",
        detail="half of the full budget (backend reports 16384 tokens of context for qwen2.5-coder-0.5b)",
    )


@pytest.mark.parametrize(
    ("sizes", "tokens"),
    [
        ((8,), 4096),
        ((23.99,), 32768),  # a "24 GB" card reports a little under 24 GiB
        ((22.9,), 4096),
        ((24, 24), 262144),  # summed across GPUs
        ((80,), 262144),
    ],
    ids=["8GiB", "24GB-card", "under-23GiB", "2x24GiB", "80GiB"],
)
async def test_full_mode_for_ollama_uses_vram_tiers(sizes: tuple[float, ...], tokens: int) -> None:
    """full with Ollama: the VRAM tier Ollama itself would pick from the total across GPUs."""
    budget = await resolve_budget(BudgetMode.FULL, hardware=gpus(*sizes), backend_kind="ollama")
    assert (budget.tokens, budget.source) == (tokens, "vram-tier")


async def test_ollama_tier_is_capped_by_the_models_context() -> None:
    """A tier larger than the model's own context length is capped, and the detail says so."""
    budget = await resolve_budget(
        BudgetMode.FULL, client=FakeClient(32768), hardware=gpus(80), backend_kind="Ollama"
    )
    assert budget.tokens == 32768
    assert budget.detail.endswith(", capped at the model's context length 32768")


async def test_ollama_fast_mode_halves_the_tier() -> None:
    """fast with Ollama: half the VRAM tier."""
    budget = await resolve_budget(BudgetMode.FAST, hardware=gpus(24), backend_kind="ollama")
    assert (budget.tokens, budget.source) == (16384, "vram-tier")


async def test_ollama_without_a_gpu_uses_the_lowest_tier() -> None:
    """NVML working with no GPU is a fact (0 VRAM): the lowest tier, reported as such."""
    hardware = HardwareProfile(gpu=NoGpu(reason="NVML initialised and reported 0 devices"))
    budget = await resolve_budget(BudgetMode.FULL, hardware=hardware, backend_kind="ollama")
    assert budget.tokens == 4096
    assert "no GPU (NVML initialised and reported 0 devices)" in budget.detail


async def test_ollama_with_nvml_unavailable_refuses_to_guess() -> None:
    """NVML unavailable means VRAM is unknown: a typed error carrying NVML's reason."""
    hardware = HardwareProfile(gpu=NvmlUnavailable(reason="nvmlInit failed: Driver Not Loaded"))
    with pytest.raises(ContextBudgetError, match=r"Driver Not Loaded.*manual_tokens") as info:
        await resolve_budget(BudgetMode.FULL, hardware=hardware, backend_kind="ollama")
    assert info.value.source == "vram-tier"


async def test_ollama_with_no_readable_gpu_refuses_to_guess() -> None:
    """GPUs that all failed their memory query give no VRAM figure: a typed error."""
    failed = GpuDeviceError(index=0, call="nvmlDeviceGetMemoryInfo", reason="Not Supported")
    hardware = HardwareProfile(gpu=GpuAvailable(devices=(), failed=(failed,)))
    with pytest.raises(ContextBudgetError, match=r"^no GPU memory could be read"):
        await resolve_budget(BudgetMode.FULL, hardware=hardware, backend_kind="ollama")


async def test_ollama_without_hardware_says_how_to_get_it() -> None:
    """Ollama's full mode without a hardware profile names HardwareProfile.detect()."""
    with pytest.raises(ContextBudgetError, match=r"pass hardware=HardwareProfile.detect\(\)$"):
        await resolve_budget(BudgetMode.FULL, backend_kind="ollama")


async def test_unknown_mode_is_refused() -> None:
    """A mode string that is not a BudgetMode is a ValueError."""
    with pytest.raises(ValueError, match=r"'turbo' is not a valid BudgetMode"):
        await resolve_budget("turbo", client=FakeClient(4096))


@pytest.mark.parametrize(
    ("gib", "tokens"),
    [(0, 4096), (23, 32768), (46.99, 32768), (47, 262144)],
    ids=["zero", "23GiB", "just-under-47GiB", "47GiB"],
)
def test_vram_tier_boundaries(gib: float, tokens: int) -> None:
    """Tier edges sit at 23 and 47 GiB, as in Ollama."""
    assert ollama_context_for_vram(int(gib * GIB)) == tokens


def test_vram_must_not_be_negative() -> None:
    """A negative VRAM figure is a caller bug."""
    with pytest.raises(ValueError, match=r"^total_vram_bytes must be >= 0, got -1$"):
        ollama_context_for_vram(-1)
