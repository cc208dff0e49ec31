"""End to end on the embedded real model: two workflows of different priority share one slot.

These tests assert forge_rt's behaviour (scheduling, preemption, typed outcomes), never that the
0.5B model answers correctly.
"""

from typing import Any

import pytest
import trio
from runtime_support import Tools

from forge_rt.clients import LlamaServerClient
from forge_rt.core import FinalChunk, Sampling, StreamChunk, TextDeltaChunk, ToolCallDeltaChunk
from forge_rt.errors import ForgeError
from forge_rt.runtime import Session, WorkflowResult

pytestmark = pytest.mark.slow

SAMPLING = Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=48, seed=7)


async def test_high_priority_preempts_background_on_the_real_model(local_model_url: str) -> None:
    """A priority-0 call arriving mid-generation starts at once; both workflows end typed."""
    low_tools, high_tools = Tools(), Tools()
    outcomes: dict[str, WorkflowResult | ForgeError] = {}
    first_token: dict[str, float] = {}
    sequence: list[str] = []  # what happened, in order

    low_generating = trio.Event()

    async def run(
        session: Session, label: str, tools: Tools, priority: int, text: str, wait: bool
    ) -> None:
        if wait:
            await low_generating.wait()  # arrive while the background call is mid-generation
        sent = trio.current_time()

        async def on_chunk(chunk: StreamChunk) -> None:
            if isinstance(chunk, FinalChunk):
                sequence.append(f"{label} call done")
            elif isinstance(chunk, TextDeltaChunk | ToolCallDeltaChunk):
                if label not in first_token:
                    first_token[label] = trio.current_time() - sent
                    sequence.append(f"{label} first token")
                if label == "low":
                    low_generating.set()

        handle = await session.start(tools.workflow(required_steps=[]), priority=priority)
        try:
            outcomes[label] = await handle.send(text, on_chunk=on_chunk)
        except ForgeError as exc:
            outcomes[label] = exc

    with trio.fail_after(600):
        async with (
            LlamaServerClient(local_model_url) as client,
            Session.open(client, sampling=SAMPLING, max_iterations=2) as session,
        ):
            async with trio.open_nursery() as nursery:
                long_ask = (
                    "Write a long, detailed paragraph about the history of weather "
                    "forecasting, then check the weather in Paris."
                )
                nursery.start_soon(run, session, "low", low_tools, 10, long_ask, False)
                nursery.start_soon(run, session, "high", high_tools, 0, "Weather in Rome?", True)
            stats = await session.slot.stats()
    assert set(outcomes) == {"low", "high"}
    # The high-priority call never waited for the low one: it streamed, and finished its first
    # call, before the background call it interrupted was done.
    assert sequence.index("high first token") < sequence.index("low call done")
    assert sequence.index("high call done") < sequence.index("low call done")
    assert stats.preemptions >= 1
    assert stats.completed >= 2
    for outcome in outcomes.values():
        assert isinstance(outcome, WorkflowResult | ForgeError)


async def test_single_workflow_runs_to_a_typed_end(local_model_url: str, tools: Any) -> None:
    """A one-step workflow on the real model ends in a result or a typed error, never a hang."""
    outcome: WorkflowResult | ForgeError
    with trio.fail_after(300):
        async with (
            LlamaServerClient(local_model_url) as client,
            Session.open(client, sampling=SAMPLING, max_iterations=2) as session,
        ):
            handle = await session.start(tools.workflow(required_steps=[]))
            try:
                outcome = await handle.send("What's the weather in Oslo?")
            except ForgeError as exc:
                outcome = exc
    if isinstance(outcome, WorkflowResult):
        assert outcome.stats.inferences >= 1
    else:
        assert str(outcome)
