"""Trace events as OpenTelemetry spans: one span per turn, each event a span event.

Runs where opentelemetry-sdk is installed (``pip install forge-rt[otel] opentelemetry-sdk``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from trace_support import NUDGED_AND_BLOCKED, record, shop

from forge_rt.errors import ToolCallError
from forge_rt.runtime import Session
from forge_rt.testing import ScriptedClient
from forge_rt.trace import JsonlTraceSink, OtelTraceSink, TeeSink, read_trace

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
export = pytest.importorskip("opentelemetry.sdk.trace.export")


@pytest.fixture
def exporter() -> object:
    return in_memory.InMemorySpanExporter()


def _sink(exporter: object) -> OtelTraceSink:
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    return OtelTraceSink(provider.get_tracer("test"))


async def test_a_turn_is_one_span_with_its_events(tmp_path: Path, exporter: object) -> None:
    """The turn's span carries the actor and workflow, and one event per trace event but the
    turn's own start and end, in the trace's order."""
    jsonl = JsonlTraceSink(tmp_path / "t.jsonl")
    with trio.fail_after(10):
        await record(TeeSink(jsonl, _sink(exporter)), NUDGED_AND_BLOCKED)
    jsonl.close()
    (span,) = exporter.get_finished_spans()  # type: ignore[attr-defined]
    assert (
        span.name,
        span.attributes["forge_rt.actor"],
        span.attributes["forge_rt.workflow"],
    ) == ("forge_rt.turn", "shop1", "shop")
    tags = [str(type(e).__struct_config__.tag) for e in read_trace(tmp_path / "t.jsonl")]
    assert tags[2:-1] == [e.name for e in span.events]
    verdicts = [e for e in span.events if e.name == "verdict"]
    assert '"kind":"retry_nudge"' in verdicts[0].attributes["forge_rt.decision"]
    assert span.attributes["forge_rt.inferences"] == 5


async def test_a_failed_turn_has_an_error_status(exporter: object) -> None:
    """A turn that ends with an error ends its span with status ERROR and the error's type."""
    replies = ["no call"] * 5
    with trio.fail_after(10):
        async with Session.open(ScriptedClient(replies), trace=_sink(exporter)) as session:
            with pytest.raises(ToolCallError):
                await session.run(shop(), "order tea", name="shop1")
    (span,) = exporter.get_finished_spans()  # type: ignore[attr-defined]
    assert (span.status.status_code.name, span.status.description) == ("ERROR", "ToolCallError")
