"""Budget resolution: how many tokens of context a workflow may use, and where that number came from.

Four modes. ``backend`` asks the backend for its context length (llama-server's ``/props``
``n_ctx``, vLLM's ``max_model_len``) and fails rather than guess. ``manual`` takes the caller's
number. ``full`` is the most the setup can hold: the backend's context for servers that fix it at
start (llama-server, llamafile, vLLM), and for Ollama, which sizes the context per request, the
tier Ollama itself picks from total VRAM. ``fast`` is half of ``full``: a shorter prompt
processes faster and leaves KV cache for other slots. The chosen budget is logged with its source.
"""

from __future__ import annotations

import enum

import msgspec

from actors import quiet_logger
from forge_rt.context._hardware import GpuAvailable, HardwareProfile, NoGpu
from forge_rt.core import LLMClient
from forge_rt.errors import ContextBudgetError

__all__ = ["OLLAMA_VRAM_TIERS", "Budget", "BudgetMode", "ollama_context_for_vram", "resolve_budget"]

log = quiet_logger(__name__)

_GIB = 2**30

OLLAMA_VRAM_TIERS: tuple[tuple[int, int], ...] = (
    (47 * _GIB, 262_144),
    (23 * _GIB, 32_768),
    (0, 4_096),
)
"""(minimum total VRAM in bytes, context tokens), largest first.

Ollama's own default: under 24 GB → 4,096; 24-48 GB → 32,768; 48 GB and more → 262,144. The
cut-offs are 23 and 47 GiB, as in Ollama, because a "24 GB" card reports a little less than
24 GiB once the driver has reserved its share.
"""


class BudgetMode(enum.StrEnum):
    """Where the context budget comes from."""

    BACKEND = "backend"
    MANUAL = "manual"
    FULL = "full"
    FAST = "fast"


class Budget(msgspec.Struct, frozen=True, kw_only=True):
    """A resolved budget: ``tokens``, the ``mode`` asked for, the ``source`` that supplied the
    number (``backend``, ``manual`` or ``vram-tier``) and a human ``detail`` line."""

    tokens: int
    mode: BudgetMode
    source: str
    detail: str


def ollama_context_for_vram(total_vram_bytes: int) -> int:
    """The context Ollama would default to with ``total_vram_bytes`` of VRAM (all GPUs summed)."""
    if total_vram_bytes < 0:
        raise ValueError(f"total_vram_bytes must be >= 0, got {total_vram_bytes}")
    for minimum, tokens in OLLAMA_VRAM_TIERS[:-1]:
        if total_vram_bytes >= minimum:
            return tokens
    return OLLAMA_VRAM_TIERS[-1][1]


async def resolve_budget(
    mode: BudgetMode | str,
    *,
    client: LLMClient | None = None,
    manual_tokens: int | None = None,
    hardware: HardwareProfile | None = None,
    backend_kind: str | None = None,
) -> Budget:
    """Resolve a context budget for ``mode``; raises :class:`ContextBudgetError` when the source
    it needs cannot give a number.

    ``backend_kind`` names the backend family (``"ollama"``, ``"llama-server"``, ``"vllm"``, ...);
    only ``"ollama"`` changes anything (``full`` and ``fast`` then use the VRAM tier from
    ``hardware``, capped at the model's own context length when ``client`` reports one).
    """
    mode = BudgetMode(mode)
    if mode is BudgetMode.MANUAL:
        if manual_tokens is None:
            raise ContextBudgetError(
                "budget mode 'manual' needs manual_tokens (e.g. --budget-tokens 8192)",
                source="manual",
            )
        if manual_tokens <= 0:
            raise ContextBudgetError(
                f"manual_tokens must be a positive token count, got {manual_tokens}",
                source="manual",
            )
        budget = Budget(
            tokens=manual_tokens, mode=mode, source="manual", detail="set by the caller"
        )
    elif mode is BudgetMode.BACKEND:
        tokens = await _backend_context(client)
        budget = Budget(
            tokens=tokens, mode=mode, source="backend", detail=_client_detail(client, tokens)
        )
    else:
        full = await _full(client, hardware, backend_kind)
        if mode is BudgetMode.FULL:
            budget = msgspec.structs.replace(full, mode=mode)
        else:
            half = full.tokens // 2
            if half <= 0:
                raise ContextBudgetError(
                    f"budget mode 'fast' halves {full.tokens} tokens to nothing", source=full.source
                )
            budget = Budget(
                tokens=half,
                mode=mode,
                source=full.source,
                detail=f"half of the full budget ({full.detail})",
            )
    log.info(
        "context budget resolved",
        tokens=budget.tokens,
        mode=budget.mode.value,
        source=budget.source,
        detail=budget.detail,
    )
    return budget


def _client_detail(client: LLMClient | None, tokens: int) -> str:
    model = client.model if client is not None else None
    return f"backend reports {tokens} tokens of context" + (f" for {model}" if model else "")


async def _backend_context(client: LLMClient | None) -> int:
    if client is None:
        raise ContextBudgetError(
            "budget mode needs the backend's context length, but no client was given; pass "
            "client=, or use budget mode 'manual' with manual_tokens",
            source="backend",
        )
    tokens = await client.context_length()
    if tokens is None:
        raise ContextBudgetError(
            f"the backend ({type(client).__name__}) did not report a context length; use budget "
            "mode 'manual' with manual_tokens, or a backend that exposes it (llama-server "
            "/props, vLLM /v1/models)",
            source="backend",
        )
    if tokens <= 0:
        raise ContextBudgetError(
            f"the backend ({type(client).__name__}) reported an unusable context length {tokens}",
            source="backend",
        )
    return tokens


async def _full(
    client: LLMClient | None, hardware: HardwareProfile | None, backend_kind: str | None
) -> Budget:
    if (backend_kind or "").lower() != "ollama":
        tokens = await _backend_context(client)
        return Budget(
            tokens=tokens,
            mode=BudgetMode.FULL,
            source="backend",
            detail=_client_detail(client, tokens),
        )
    if hardware is None:
        raise ContextBudgetError(
            "budget mode for Ollama sizes the context from VRAM, but no hardware profile was "
            "given; pass hardware=HardwareProfile.detect()",
            source="vram-tier",
        )
    gpu = hardware.gpu
    if isinstance(gpu, GpuAvailable):
        if not gpu.devices:
            raise ContextBudgetError(
                f"no GPU memory could be read for the Ollama VRAM tier: {hardware.describe()}",
                source="vram-tier",
            )
        vram = gpu.total_bytes
        seen = f"{vram / _GIB:.1f} GiB VRAM ({hardware.describe()})"
    elif isinstance(gpu, NoGpu):
        vram = 0
        seen = f"0 GiB VRAM: {hardware.describe()}"
    else:
        raise ContextBudgetError(
            f"cannot size the Ollama context from VRAM: {hardware.describe()}; use budget mode "
            "'manual' with manual_tokens",
            source="vram-tier",
        )
    tier = ollama_context_for_vram(vram)
    detail = f"Ollama VRAM tier {tier} tokens for {seen}"
    if client is not None:
        model_max = await client.context_length()
        if model_max is None:
            detail += "; the backend did not report the model's context length to cap it"
        elif model_max <= 0:
            raise ContextBudgetError(
                f"the backend ({type(client).__name__}) reported an unusable context length "
                f"{model_max}",
                source="backend",
            )
        elif model_max < tier:
            detail += f", capped at the model's context length {model_max}"
            tier = model_max
    return Budget(tokens=tier, mode=BudgetMode.FULL, source="vram-tier", detail=detail)
