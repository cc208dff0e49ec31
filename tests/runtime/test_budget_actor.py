"""BudgetActor: real sources, unavailable sources reported as such, budgets and pressure."""

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from actors import ActorSystem
from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient, VLLMClient
from forge_rt.context import ContextManager, TieredCompact
from forge_rt.core import InferenceRequest, Message, ToolCall
from forge_rt.runtime import (
    Available,
    BudgetMonitor,
    ClientContextSource,
    LlamaServerSource,
    NvmlSource,
    Session,
    Unavailable,
    VLLMMetricsSource,
)
from forge_rt.testing import ScriptedClient


class FixedSource:
    """A source whose reading the test sets (a fake, for pressure logic)."""

    def __init__(self, name: str, reading: Available | Unavailable) -> None:
        self.name = name
        self.reading = reading

    async def read(self) -> Available | Unavailable:
        return self.reading


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    async with ActorSystem.open(shutdown="cancel") as system:
        yield system


async def test_nvml_without_gpu_is_unavailable_with_reason(system: ActorSystem) -> None:
    """On a machine without a GPU the NVML source reports why, never a made-up figure."""
    reading = await NvmlSource().read()
    assert isinstance(reading, Unavailable)
    assert reading.reason


async def test_llama_server_source_reads_the_sim(system: ActorSystem) -> None:
    """/props, /slots and /metrics, read through the LlamaServerClient, become one reading."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(n_ctx=3000, n_slots=2)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            reading = await LlamaServerSource(client).read()
    assert (
        Available(
            context_tokens=3000,
            pool_tokens=6000,
            kv_used_ratio=0.0,
            slots_busy=0,
            slots_total=2,
            detail="n_ctx=3000",
        )
        == reading
    )


async def test_vllm_source_reads_kv_use_and_max_model_len_from_the_sim(
    system: ActorSystem,
) -> None:
    """vLLM's KV-cache gauge from /metrics and max_model_len from /v1/models become a reading."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(n_ctx=3000, n_slots=2, script={"*": ["ok"]})) as sim,
            VLLMClient(sim.url) as client,
        ):
            await client.send(InferenceRequest(messages=(Message.user("hello " * 40),)))
            reading = await VLLMMetricsSource(client).read()
            cached = sum(slot.cache_tokens for slot in sim.stats.slots)
    assert cached > 0
    assert (
        Available(context_tokens=3000, kv_used_ratio=cached / 6000, detail="model sim-model")
        == reading
    )


async def test_vllm_source_reads_the_kv_gauge_under_its_newer_name(system: ActorSystem) -> None:
    """A vLLM exporting only vllm:kv_cache_usage_perc still reports its KV use."""

    def vllm(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text='vllm:kv_cache_usage_perc{model_name="m"} 0.25\n')
        return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 8192}]})

    async with VLLMClient("http://vllm.test", transport=httpx.MockTransport(vllm)) as client:
        reading = await VLLMMetricsSource(client).read()
    assert Available(context_tokens=8192, kv_used_ratio=0.25, detail="model m") == reading


async def test_a_metrics_page_that_is_not_prometheus_text_is_unavailable(
    system: ActorSystem,
) -> None:
    """A /metrics answered by something else (an HTML page) is an unreadable source, not a crash."""

    def proxy_page(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>Sign in to continue</html>")

    async with VLLMClient("http://vllm.test", transport=httpx.MockTransport(proxy_page)) as client:
        reading = await VLLMMetricsSource(client).read()
    assert isinstance(reading, Unavailable)
    assert re.fullmatch(
        r"vLLM state unreadable: http://vllm\.test/metrics: the backend's response is not a "
        r"valid reply: not Prometheus text \(.+\); is the base URL pointing at the right kind "
        r"of server\?",
        reading.reason,
    )


@pytest.mark.parametrize(
    ("client_type", "source_type", "first_read"),
    [
        (LlamaServerClient, LlamaServerSource, "llama-server state unreadable: GET {url}/props"),
        (VLLMClient, VLLMMetricsSource, "vLLM state unreadable: GET {url}/metrics"),
    ],
    ids=["llama-server", "vllm"],
)
async def test_unreachable_backend_is_unavailable(
    system: ActorSystem, client_type: Any, source_type: Any, first_read: str
) -> None:
    """A backend that refuses connections is reported unavailable, with the client's error."""
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with client_type(url) as client:
        reading = await source_type(client).read()
    assert isinstance(reading, Unavailable)
    assert re.fullmatch(
        re.escape(first_read.format(url=url))
        + r": could not connect \(.+\); is the backend running and listening on that address\?",
        reading.reason,
    )


async def test_budget_is_smallest_context_and_shrinks_under_pressure(
    system: ActorSystem,
) -> None:
    """The budget is the smallest known context; KV pressure halves it; unknown means None."""
    kv = FixedSource("kv", Available(context_tokens=4000, kv_used_ratio=0.2))
    client = ClientContextSource(ScriptedClient([], context=8000))
    monitor = await BudgetMonitor.start(system, [kv, client], interval=None)
    assert await monitor.budget_for("w") == 4000
    kv.reading = Available(context_tokens=4000, kv_used_ratio=0.95)
    report = await monitor.refresh()
    assert report.under_pressure
    assert await monitor.budget_for("w") == 2000
    kv.reading = Unavailable("metrics endpoint gone")
    report = await monitor.refresh()
    assert report.readings["kv"] == Unavailable("metrics endpoint gone")
    assert await monitor.budget_for("w") == 8000


async def test_no_source_knows_a_budget(system: ActorSystem) -> None:
    """With every source unavailable the budget is None (no default is invented)."""
    monitor = await BudgetMonitor.start(
        system, [FixedSource("x", Unavailable("down"))], interval=None
    )
    assert await monitor.budget_for("w") is None


async def test_ticker_refreshes_periodically(system: ActorSystem, autojump_clock: Any) -> None:
    """With an interval the monitor re-reads its sources on its own."""
    source = FixedSource("kv", Available(context_tokens=1000))
    monitor = await BudgetMonitor.start(system, [source], interval=5.0)
    source.reading = Available(context_tokens=500)
    await trio.sleep(6)
    assert (await monitor.report()).context_tokens == 500


async def test_workflow_compacts_against_the_published_budget(autojump_clock: Any) -> None:
    """A workflow actor takes its budget from the BudgetActor and usage is reported back."""
    from runtime_support import Tools

    tools = Tools()
    replies: list[Any] = [[ToolCall(tool="get_weather", args={"city": f"C{i}"})] for i in range(5)]
    replies.append([ToolCall(tool="respond", args={"message": "ok"})])
    client = ScriptedClient(replies)
    source = FixedSource("kv", Available(context_tokens=180))
    context = ContextManager(budget_tokens=100_000, strategy=TieredCompact(keep_recent=1))
    async with Session.open(client, budget_sources=[source], budget_interval=None) as session:
        handle = await session.start(tools.workflow(), context=context)
        result = await handle.send("Weather everywhere")
        assert session.budget is not None
        report = await session.budget.report()
    assert context.budget_tokens == 180
    assert result.stats.compactions >= 1
    assert report.workflow_tokens[handle.name] > 0


async def test_client_source_of_a_dead_backend_is_unavailable(system: ActorSystem) -> None:
    """A client whose backend refuses connections is reported unavailable, not a crash."""
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with LlamaServerClient(f"http://127.0.0.1:{port}") as client:
        reading = await ClientContextSource(client).read()
    assert isinstance(reading, Unavailable)
    assert reading.reason.startswith("the backend could not be asked for its context")
