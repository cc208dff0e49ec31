"""Run scenarios under ablations against a backend, appending one JSONL record per run.

A re-run with the same output file skips every (backend, model, ablation, scenario, run) already
recorded, so a long headline run can be interrupted and resumed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import structlog
import trio

from forge_rt.backends.sim import FailureRates, SimBackend, SimConfig
from forge_rt.clients.base import (
    LLMClient,
    ReasoningDeltaChunk,
    Sampling,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
)
from forge_rt.context import ContextManager, TieredCompact
from forge_rt.core import RESPOND_TOOL_NAME
from forge_rt.errors import ForgeError
from forge_rt.eval._ablation import Ablation
from forge_rt.eval._record import RunRecord, append_record, read_records
from forge_rt.eval._scenario import Scenario, ScenarioRun
from forge_rt.runtime import Session, WorkflowResult

__all__ = ["EvalPlan", "run_eval", "run_scenario"]

_log = structlog.get_logger(__name__)

ClientFactory = Callable[[Scenario, int], AbstractAsyncContextManager[LLMClient]]


class EvalPlan(msgspec.Struct, kw_only=True):
    """What to run: scenarios x ablations x runs, against one backend/model."""

    backend: str
    model: str
    scenarios: Sequence[Scenario]
    ablations: Sequence[Ablation]
    runs: int
    out: Path
    sampling: Sampling = Sampling()
    default_budget: int = 4096
    run_deadline_s: float = 600.0


class _FirstToken:
    """Records when the first generated token of a turn arrived."""

    def __init__(self) -> None:
        self.started = trio.current_time()
        self.at: float | None = None

    async def __call__(self, chunk: StreamChunk) -> None:
        if self.at is None and isinstance(
            chunk, TextDeltaChunk | ReasoningDeltaChunk | ToolCallDeltaChunk
        ):
            self.at = trio.current_time()

    @property
    def seconds(self) -> float | None:
        return None if self.at is None else self.at - self.started


def _completed(result: WorkflowResult, instance: ScenarioRun) -> bool:
    if result.terminal_call is not None:
        return True
    # With retry nudges off, plain text ends the run: that is an answer only where the
    # scenario's terminal tool is the respond tool (the model "responded" in text).
    return result.answer_only and instance.workflow.terminal_tools == frozenset({RESPOND_TOOL_NAME})


async def _run_turns(
    session: Session,
    instance: ScenarioRun,
    *,
    priority: int,
    context: ContextManager | None,
    track: _FirstToken | None = None,
) -> WorkflowResult:
    handle = await session.start(instance.workflow, priority=priority, context=context)
    result: WorkflowResult | None = None
    for turn in instance.turns:
        result = await handle.send(turn, on_chunk=track)
    assert result is not None, "a scenario has at least one turn"
    return result


async def run_scenario(
    scenario: Scenario,
    ablation: Ablation,
    run: int,
    client: LLMClient,
    *,
    backend: str,
    model: str,
    sampling: Sampling | None = None,
    default_budget: int = 4096,
    deadline_s: float = 600.0,
) -> RunRecord:
    """One run of ``scenario`` under ``ablation``; every outcome, including errors, is a record."""
    instance = scenario.build()
    workflow = instance.workflow.model_copy(update={"constrain": ablation.constrain})
    instance = msgspec.structs.replace(instance, workflow=workflow)
    context = (
        ContextManager(scenario.budget_tokens or default_budget, TieredCompact())
        if ablation.compact
        else None
    )
    record = RunRecord(
        scenario=scenario.name,
        tags=scenario.tags,
        run=run,
        ablation=ablation.name,
        backend=backend,
        model=model,
        completed=False,
        correct=False,
        ideal_calls=scenario.ideal_calls,
    )
    started = trio.current_time()
    track = _FirstToken()
    contender_tracks: list[_FirstToken] = []
    contender_ok: list[bool] = []
    result: WorkflowResult | None = None
    try:
        with trio.fail_after(deadline_s):
            async with (
                Session.open(
                    client,
                    guardrails=ablation.guardrails,
                    max_iterations=scenario.max_iterations,
                    sampling=sampling or Sampling(),
                ) as session,
                trio.open_nursery() as nursery,
            ):
                for contender in scenario.contenders:

                    async def background(c: Any = contender) -> None:
                        await trio.sleep(c.start_after_s)
                        ctrack = _FirstToken()
                        contender_tracks.append(ctrack)
                        try:
                            out = await _run_turns(
                                session,
                                c.build(),
                                priority=c.priority,
                                context=None,
                                track=ctrack,
                            )
                            contender_ok.append(out.terminal_call is not None)
                        except ForgeError:
                            contender_ok.append(False)

                    nursery.start_soon(background)
                if scenario.contenders:
                    await trio.sleep(max(c.start_after_s for c in scenario.contenders) + 0.2)
                track = _FirstToken()
                # Caught here, inside the nursery, so the error stays itself (not a group).
                try:
                    result = await _run_turns(
                        session, instance, priority=scenario.priority, context=context, track=track
                    )
                except ForgeError as exc:
                    record.error_type = type(exc).__name__
                    record.error = str(exc)[:500]
    except trio.TooSlowError:
        record.error_type = "RunDeadline"
        record.error = f"the run did not finish within {deadline_s:g} s"
    record.wall_s = trio.current_time() - started
    if result is not None:
        stats = result.stats
        record.output = result.output[:500]
        record.completed = _completed(result, instance) and all(contender_ok)
        verdict = instance.judge(result.output)
        record.correct = record.completed and verdict.correct
        record.reason = verdict.reason
        record.iterations = result.iteration
        record.inferences = stats.inferences
        record.tool_calls = stats.tool_calls
        record.tool_errors = stats.tool_errors
        record.retries = dict(stats.retries)
        record.rescued = dict(stats.rescued)
        record.collapsed = stats.collapsed
        record.compactions = stats.compactions
        record.prompt_tokens = stats.prompt_tokens
        record.completion_tokens = stats.completion_tokens
        record.constraint = stats.constraint
    if scenario.contenders:
        record.high_priority_ttft_s = track.seconds
        firsts = [t.seconds for t in contender_tracks if t.seconds is not None]
        record.background_ttft_s = sum(firsts) / len(firsts) if firsts else None
    return record


@asynccontextmanager
async def sim_client(
    scenario: Scenario, run: int, *, rates: FailureRates, timing: dict[str, float] | None = None
) -> AsyncIterator[LLMClient]:
    """A simulated backend driven by the scenario's oracle, seeded by the run number."""
    from forge_rt.clients import LlamaServerClient

    config = SimConfig(oracle=scenario.oracle, rates=rates, seed=run, **(timing or {}))
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        yield client


async def run_eval(
    plan: EvalPlan,
    client_for: ClientFactory,
    *,
    on_record: Callable[[RunRecord, int, int], None] | None = None,
) -> list[RunRecord]:
    """Run the plan, skipping records already in ``plan.out``; returns the new records."""
    done = {r.key for r in read_records(plan.out)}
    todo = [
        (scenario, ablation, run)
        for run in range(plan.runs)
        for ablation in plan.ablations
        for scenario in plan.scenarios
        if (plan.backend, plan.model, ablation.name, scenario.name, run) not in done
    ]
    total = len(todo)
    new: list[RunRecord] = []
    for index, (scenario, ablation, run) in enumerate(todo, 1):
        async with client_for(scenario, run) as client:
            record = await run_scenario(
                scenario,
                ablation,
                run,
                client,
                backend=plan.backend,
                model=plan.model,
                sampling=plan.sampling,
                default_budget=plan.default_budget,
                deadline_s=plan.run_deadline_s,
            )
        append_record(plan.out, record)
        new.append(record)
        if on_record is not None:
            on_record(record, index, total)
    _log.info("eval.done", runs=len(new), skipped=len(done), out=str(plan.out))
    return new
