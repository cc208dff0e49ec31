"""A prompt the backend refuses as longer than its context: compacted to fit and sent again.

The token estimate can be wrong (a new model, a template that adds much); the backend's own count
is not. Tested over HTTP on the sim, which answers an over-long prompt with llama-server's 400.
"""

from __future__ import annotations

import pytest
import structlog
import trio

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient
from forge_rt.context import ContextManager, TieredCompact, TokenEstimator
from forge_rt.core import ToolDef, ToolSpec, Workflow
from forge_rt.errors import BudgetExhaustedError, ContextExhaustedError, ContextOverflowError
from forge_rt.eval.scenarios._kit import call, plan_oracle
from forge_rt.runtime import WorkflowRunner

RECORD = {"type": "object", "properties": {"index": {"type": "integer"}}, "required": ["index"]}
PLAN = [call("get_record", index=i) for i in range(1, 5)] + [call("respond", message="7319")]


async def get_record(index: int) -> str:
    return f"record {index}: " + " ".join(f"field{n}=value{n}" for n in range(60))


def _workflow() -> Workflow:
    return Workflow(
        name="records",
        tools=[ToolDef(spec=ToolSpec(name="get_record", parameters=RECORD), callable=get_record)],
        required_steps=["get_record"],
        system_prompt_template="Read the records, then respond.",
        constrain="never",
    )


def _underestimating() -> TokenEstimator:
    """An estimator that counts about a quarter of the real tokens (a ratio far too high)."""
    return TokenEstimator(ratio=16.0, usage_alpha=0.01)


async def test_an_overflowing_prompt_is_compacted_to_the_backends_count_and_sent_again() -> None:
    config = SimConfig(oracle=plan_oracle(PLAN), n_ctx=1000)
    context = ContextManager(10_000, TieredCompact(keep_recent=1), estimator=_underestimating())
    with trio.fail_after(30), structlog.testing.capture_logs() as logs:
        async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
            result = await WorkflowRunner(client, context=context).run(_workflow(), "Records?")
    assert result.output == "7319"
    overflows = [e for e in logs if e["event"] == "workflow.context_overflow"]
    assert len(overflows) >= 1
    assert overflows[0]["backend_context"] == 1000
    assert overflows[0]["prompt_tokens"] > 1000
    assert result.stats.compactions >= 1


async def test_a_history_compaction_cannot_fit_ends_in_the_overflow_error() -> None:
    """Each kept record alone is near the context: compaction cannot make room, and the run
    ends typed with the backend's counts instead of looping on the 400."""
    config = SimConfig(oracle=plan_oracle(PLAN), n_ctx=700)
    context = ContextManager(10_000, TieredCompact(keep_recent=1), estimator=_underestimating())
    with trio.fail_after(30):
        async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
            with pytest.raises(ContextExhaustedError) as info:
                await WorkflowRunner(client, context=context).run(_workflow(), "Records?")
    # A budget of the run ran out (an outcome, as an eval records it), not a broken backend.
    assert isinstance(info.value, BudgetExhaustedError)
    assert isinstance(info.value.__cause__, ContextOverflowError)
    assert info.value.context_tokens == 700
    assert info.value.messages


async def test_without_a_context_manager_the_overflow_ends_the_run_typed() -> None:
    config = SimConfig(oracle=plan_oracle(PLAN), n_ctx=900)
    with trio.fail_after(30):
        async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
            with pytest.raises(ContextExhaustedError) as info:
                await WorkflowRunner(client).run(_workflow(), "Records?")
    assert info.value.context_tokens == 900
    assert info.value.prompt_tokens is not None
    assert info.value.prompt_tokens > 900
