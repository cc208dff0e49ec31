"""Context management: token estimation, compaction, budgets and the GPU memory they rest on.

A :class:`ContextManager` keeps one history under a token budget with a deterministic
:class:`CompactStrategy` (:class:`TieredCompact` by default); a :class:`TokenEstimator` counts
tokens fast and learns from the backend's real counts; :func:`resolve_budget` picks the budget
(backend, manual, full, fast) and :func:`probe_gpu` reads GPU memory through NVML.
"""

from forge_rt.context._budget import OLLAMA_VRAM_TIERS as OLLAMA_VRAM_TIERS
from forge_rt.context._budget import Budget as Budget
from forge_rt.context._budget import BudgetMode as BudgetMode
from forge_rt.context._budget import ollama_context_for_vram as ollama_context_for_vram
from forge_rt.context._budget import resolve_budget as resolve_budget
from forge_rt.context._compact import CompactResult as CompactResult
from forge_rt.context._compact import CompactStrategy as CompactStrategy
from forge_rt.context._compact import NoCompact as NoCompact
from forge_rt.context._compact import SlidingWindowCompact as SlidingWindowCompact
from forge_rt.context._compact import TieredCompact as TieredCompact
from forge_rt.context._compact import protected_window_start as protected_window_start
from forge_rt.context._compact import unanswered_calls as unanswered_calls
from forge_rt.context._estimate import CALIBRATION_TEXTS as CALIBRATION_TEXTS
from forge_rt.context._estimate import DEFAULT_RATIO as DEFAULT_RATIO
from forge_rt.context._estimate import TokenEstimator as TokenEstimator
from forge_rt.context._hardware import GpuAvailable as GpuAvailable
from forge_rt.context._hardware import GpuDeviceError as GpuDeviceError
from forge_rt.context._hardware import GpuMemory as GpuMemory
from forge_rt.context._hardware import GpuProbe as GpuProbe
from forge_rt.context._hardware import HardwareProfile as HardwareProfile
from forge_rt.context._hardware import NoGpu as NoGpu
from forge_rt.context._hardware import NvmlModule as NvmlModule
from forge_rt.context._hardware import NvmlUnavailable as NvmlUnavailable
from forge_rt.context._hardware import probe_gpu as probe_gpu
from forge_rt.context._manager import CompactEvent as CompactEvent
from forge_rt.context._manager import ContextManager as ContextManager
from forge_rt.context._manager import ContextUsage as ContextUsage
from forge_rt.context._manager import ThresholdCallback as ThresholdCallback

__all__ = [
    "CALIBRATION_TEXTS",
    "DEFAULT_RATIO",
    "OLLAMA_VRAM_TIERS",
    "Budget",
    "BudgetMode",
    "CompactEvent",
    "CompactResult",
    "CompactStrategy",
    "ContextManager",
    "ContextUsage",
    "GpuAvailable",
    "GpuDeviceError",
    "GpuMemory",
    "GpuProbe",
    "HardwareProfile",
    "NoCompact",
    "NoGpu",
    "NvmlModule",
    "NvmlUnavailable",
    "SlidingWindowCompact",
    "ThresholdCallback",
    "TieredCompact",
    "TokenEstimator",
    "ollama_context_for_vram",
    "probe_gpu",
    "protected_window_start",
    "resolve_budget",
    "unanswered_calls",
]
