"""BudgetActor: real sources, unavailable sources reported as such, budgets and pressure."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from actors import ActorSystem
from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.context import ContextManager, TieredCompact
from forge_rt.core import ToolCall
from forge_rt.runtime import (
    Available,
    BudgetMonitor,
    ClientContextSource,
    LlamaServerSource,
    NvmlSource,
    Session,
    Unavailable,
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
    """/props, /slots and /metrics of a llama-server-like backend become a reading."""
    async with SimBackend.serve(SimConfig(n_ctx=3000, n_slots=2)) as sim:
        source = LlamaServerSource(sim.url)
        try:
            reading = await source.read()
        finally:
            await source.aclose()
    assert isinstance(reading, Available)
    assert reading.context_tokens == 3000
    assert reading.slots_total == 2
    assert reading.kv_used_ratio is not None


async def test_unreachable_backend_is_unavailable(system: ActorSystem) -> None:
    """A backend that refuses connections is reported unavailable, with the error."""
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = LlamaServerSource(f"http://127.0.0.1:{port}")
    try:
        reading = await source.read()
    finally:
        await source.aclose()
    assert isinstance(reading, Unavailable)
    assert "ConnectError" in reading.reason


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
    from forge_rt.clients import LlamaServerClient

    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with LlamaServerClient(f"http://127.0.0.1:{port}") as client:
        reading = await ClientContextSource(client).read()
    assert isinstance(reading, Unavailable)
    assert reading.reason.startswith("the backend could not be asked for its context")
