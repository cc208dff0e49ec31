"""Prometheus metrics of one proxy, in a registry of its own.

Each :class:`ProxyMetrics` owns a ``CollectorRegistry`` (two proxies in one process -- tests,
an embedding application -- never share counters). Counters and histograms are updated as
requests run; the slot's queue depth and preemption count are copied from a fresh
:class:`~forge_rt.runtime.SlotStats` snapshot each time ``/metrics`` is scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from forge_rt.runtime import LaneReport, SlotStats

__all__ = ["CONTENT_TYPE", "ProxyMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Latency buckets from sub-millisecond (the proxy's own overhead) to minutes (long generations).
_LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)


class _SlotCollector(Collector):
    """Exposes the last slot snapshot and tool-cache counts (taken just before each scrape)."""

    def __init__(self) -> None:
        self.stats: SlotStats | None = None
        self.tool_cache: tuple[int, int] | None = None
        self.lanes: Sequence[LaneReport] = ()

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self.stats
        if stats is None:
            return
        yield GaugeMetricFamily(
            "forge_proxy_queue_depth", "Inference calls waiting for the slot.", stats.queue_depth
        )
        yield GaugeMetricFamily(
            "forge_proxy_slot_busy", "1 while the slot is generating.", int(stats.running)
        )
        yield CounterMetricFamily(
            "forge_proxy_preemptions",
            "Running calls interrupted by a higher-priority call (re-run automatically).",
            stats.preemptions,
        )
        yield CounterMetricFamily(
            "forge_proxy_slot_cache_hits",
            "Calls that continued the prompt already in the slot's cache.",
            stats.cache_hits,
        )
        yield CounterMetricFamily(
            "forge_proxy_slot_rejected", "Calls refused because the queue was full.", stats.rejected
        )
        yield from _lane_families(self.lanes)
        if self.tool_cache is not None:
            hits, misses = self.tool_cache
            yield CounterMetricFamily(
                "forge_proxy_tool_specs_reused",
                "Requests whose tool list was already compiled (served from the tool cache).",
                hits,
            )
            yield CounterMetricFamily(
                "forge_proxy_tool_specs_compiled",
                "Tool lists compiled into validators (first sight of that exact list).",
                misses,
            )


class ProxyMetrics:
    """Every metric the proxy exposes on ``/metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.requests = Counter(
            "forge_proxy_requests",
            "Requests answered, by API, endpoint, streaming and HTTP status.",
            ["api", "endpoint", "stream", "status"],
            registry=reg,
        )
        self.retries = Counter(
            "forge_proxy_retries",
            "Server-side corrective retries, by why the reply was rejected.",
            ["reason"],
            registry=reg,
        )
        self.rules = Counter(
            "forge_proxy_rule_verdicts",
            "Replies decided by a guardrail rule (sent back, or taken as a text answer), by rule.",
            ["rule"],
            registry=reg,
        )
        self.rescues = Counter(
            "forge_proxy_rescues",
            "Tool calls recovered from text, by the dialect they were written in.",
            ["dialect"],
            registry=reg,
        )
        self.guardrail_failures = Counter(
            "forge_proxy_guardrail_failures",
            "Requests whose guardrail budget ran out (the client got an error).",
            ["reason"],
            registry=reg,
        )
        self.disconnects = Counter(
            "forge_proxy_client_disconnects",
            "Requests whose client went away before the answer; their inference was cancelled.",
            registry=reg,
        )
        self.resets = Counter(
            "forge_proxy_stream_restarts",
            "Streams whose call was preempted and restarted from scratch.",
            registry=reg,
        )
        self.in_flight = Gauge(
            "forge_proxy_requests_in_flight", "Requests being answered now.", registry=reg
        )
        self.latency = Histogram(
            "forge_proxy_request_duration_seconds",
            "Time from request to the end of the answer.",
            ["api", "stream"],
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.first_token = Histogram(
            "forge_proxy_time_to_first_token_seconds",
            "Streamed requests: time from request to the first content sent to the client.",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=reg,
        )
        self.attempts = Histogram(
            "forge_proxy_attempts_per_request",
            "Inference attempts one guarded request needed.",
            buckets=(1, 2, 3, 4, 5, 6, 8, 10),
            registry=reg,
        )
        self._slot = _SlotCollector()
        reg.register(self._slot)

    def render(
        self,
        stats: SlotStats,
        tool_cache: tuple[int, int],
        lanes: Sequence[LaneReport] = (),
    ) -> bytes:
        """The exposition text, with the slot figures taken from ``stats``, the tool cache's
        ``(hits, misses)`` and, for a fleet of backends, each backend's ``lanes``."""
        self._slot.stats = stats
        self._slot.tool_cache = tool_cache
        self._slot.lanes = lanes
        return generate_latest(self.registry)


def _lane_families(
    lanes: Sequence[LaneReport],
) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
    """Each backend of a fleet as its own series, labelled by its lane's name."""
    if not lanes:
        return
    families: list[tuple[GaugeMetricFamily | CounterMetricFamily, Callable[[LaneReport], int]]] = [
        (
            GaugeMetricFamily(
                "forge_proxy_lane_in_flight",
                "Calls placed on the backend, queued or running.",
                labels=["lane"],
            ),
            lambda lane: lane.in_flight,
        ),
        (
            GaugeMetricFamily(
                "forge_proxy_lane_in_rotation",
                "1 while the backend takes new calls.",
                labels=["lane"],
            ),
            lambda lane: int(lane.in_rotation),
        ),
        (
            GaugeMetricFamily(
                "forge_proxy_lane_busy", "1 while the backend is generating.", labels=["lane"]
            ),
            lambda lane: int(lane.stats.running),
        ),
        (
            CounterMetricFamily(
                "forge_proxy_lane_failovers",
                "Times the backend failed a call and left the rotation.",
                labels=["lane"],
            ),
            lambda lane: lane.failovers,
        ),
        (
            CounterMetricFamily(
                "forge_proxy_lane_completed", "Calls the backend completed.", labels=["lane"]
            ),
            lambda lane: lane.stats.completed,
        ),
    ]
    for family, value in families:
        for lane in lanes:
            family.add_metric([lane.name], value(lane))
        yield family
    info = GaugeMetricFamily(
        "forge_proxy_lane_info",
        "1 for each backend, labelled by the model it serves (empty where it names none).",
        labels=["lane", "model"],
    )
    for lane in lanes:
        info.add_metric([lane.name, lane.model or ""], 1)
    yield info
