"""``GET /metrics``: llama-server's (and vLLM's) Prometheus gauges and counters, read live."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from forge_rt.backends.sim._stats import SimStats

__all__ = ["metrics_registry", "metrics_text"]


class _SimCollector(Collector):
    """Turns :class:`SimStats` into metric families at scrape time (nothing to keep in sync)."""

    def __init__(self, stats: SimStats, n_ctx: Callable[[], int]) -> None:
        self._stats = stats
        self._n_ctx = n_ctx

    def collect(self) -> Iterator[Metric]:
        stats = self._stats
        capacity = self._n_ctx() * len(stats.slots)
        cached = sum(s.cache_tokens for s in stats.slots)
        busy = sum(1 for s in stats.slots if s.is_processing)
        counters: dict[str, tuple[str, float]] = {
            "llamacpp:prompt_tokens": ("Prompt tokens processed.", stats.prefilled_tokens),
            "llamacpp:tokens_predicted": ("Generation tokens.", stats.generated_tokens),
            "llamacpp:n_decode": ("Completed generations.", stats.completed),
        }
        for name, (doc, value) in counters.items():
            yield CounterMetricFamily(name, doc, value=value)
        gauges: dict[str, tuple[str, float]] = {
            "llamacpp:kv_cache_usage_ratio": ("KV-cache usage (1 = full).", cached / capacity),
            "llamacpp:kv_cache_tokens": ("Tokens held in the KV cache.", cached),
            "llamacpp:requests_processing": ("Requests being processed.", busy),
            "llamacpp:requests_deferred": ("Requests waiting for a slot.", stats.waiting),
            # The sim's own: every inference request being served, a hanging one included.
            "forge_sim:requests_in_flight": ("Inference requests in flight.", stats.in_flight),
            "vllm:num_requests_running": ("Requests running (vLLM name).", busy),
            "vllm:num_requests_waiting": ("Requests waiting (vLLM name).", stats.waiting),
            "vllm:gpu_cache_usage_perc": ("KV-cache usage (vLLM name).", cached / capacity),
            "vllm:kv_cache_usage_perc": ("KV-cache usage (vLLM name).", cached / capacity),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(name, doc, value=value)


def metrics_registry(stats: SimStats, n_ctx: Callable[[], int]) -> CollectorRegistry:
    """A registry exposing ``stats`` (``n_ctx`` reads the current context size per slot)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SimCollector(stats, n_ctx))
    return registry


def metrics_text(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of ``registry``."""
    return generate_latest(registry)
