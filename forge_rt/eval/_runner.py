"""Run scenarios under ablations against a backend, appending one JSONL record per run.

A re-run with the same output file skips every (backend, model, ablation, scenario, run) already
recorded, so a long headline run can be interrupted and resumed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import trio

from actors import quiet_logger
from forge_rt.backends.sim import FailureRates, SimBackend, SimConfig
from forge_rt.context import ContextManager, TieredCompact
from forge_rt.core import (
    RESPOND_TOOL_NAME,
    LLMClient,
    ReasoningDeltaChunk,
    Sampling,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
)
from forge_rt.errors import BackendError, ConstraintUnsupportedError, ForgeError
from forge_rt.eval._ablation import Ablation
from forge_rt.eval._record import RunRecord, append_record, read_records
from forge_rt.eval._scenario import Scenario, ScenarioRun
from forge_rt.eval._split import split_of
from forge_rt.guardrails import rescue, workflow_tool_specs
from forge_rt.runtime import RunStats, Session, WorkflowResult

__all__ = [
    "EvalPlan",
    "add_stats",
    "lines_for",
    "pending_runs",
    "run_eval",
    "run_scenario",
    "run_trace_path",
    "sim_client",
    "sim_seed",
]

_log = quiet_logger(__name__)

ClientFactory = Callable[[Scenario, int], AbstractAsyncContextManager[LLMClient]]

# Errors that say the backend or the set-up is broken, not that the model failed the scenario:
# recording them as failed runs would charge the model for them, so they end the eval instead.
_ABORTS_EVAL = (BackendError, ConstraintUnsupportedError)


class EvalPlan(msgspec.Struct, kw_only=True):
    """What to run: scenarios x ablations x runs, against one backend/model.

    With ``seed`` set, run ``r`` samples with seed ``sim_seed(seed, r)`` (so runs differ from
    each other but a re-run repeats them, where the backend honours seeds); ``None`` leaves
    ``sampling.seed`` as it is. ``cache_lines``: the backend KV slots each run's Session uses
    as cache lines (``Session.open(cache_lines=...)``; the backend must serve that many slots),
    so a preempted background call returns to its own warm cache; ``None`` for none.
    ``suite`` labels the records (``own``, ``generated``); each record also carries its
    scenario's half (:func:`~forge_rt.eval._split.split_of`).
    """

    backend: str
    model: str
    scenarios: Sequence[Scenario]
    suite: str = "own"
    ablations: Sequence[Ablation]
    runs: int
    out: Path
    sampling: Sampling = Sampling()
    default_budget: int = 4096
    run_deadline_s: float = 600.0
    seed: int | None = None
    cache_lines: int | None = None


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


def _unfinished(result: WorkflowResult, instance: ScenarioRun) -> str | None:
    """Why the run did not finish its task, or None when it did."""
    if result.terminal_call is not None:
        return None
    # With retry nudges off, plain text ends the run. That is an answer only where the
    # scenario's terminal tool is the respond tool (the model "responded" in text), and only
    # when the text is prose: a tool call written as text that nothing parsed is a failure the
    # user sees as a blob of JSON, not an answer.
    terminal = instance.workflow.terminal_tools
    if terminal != frozenset({RESPOND_TOOL_NAME}):
        return f"ended in text, not in its terminal tool {sorted(terminal)}"
    found = rescue(result.output, workflow_tool_specs(instance.workflow))
    names = [c.tool for c in found.calls] + [c.tool for c in found.unknown_calls]
    if names:
        return f"ended in text holding an unparsed call of {names[0]!r}"
    return None


def _with_ablation(instance: ScenarioRun, ablation: Ablation) -> ScenarioRun:
    workflow = instance.workflow.model_copy(update={"constrain": ablation.constrain})
    return msgspec.structs.replace(instance, workflow=workflow)


def add_stats(total: RunStats, turn: RunStats) -> None:
    """Fold one turn's stats into ``total`` (a multi-turn run's record covers every turn)."""
    for name in (
        "iterations",
        "inferences",
        "tool_calls",
        "tool_errors",
        "collapsed",
        "compactions",
        "prompt_tokens",
        "completion_tokens",
    ):
        setattr(total, name, getattr(total, name) + getattr(turn, name))
    for counts, more in (
        (total.retries, turn.retries),
        (total.rules, turn.rules),
        (total.rescued, turn.rescued),
    ):
        for key, value in more.items():
            counts[key] = counts.get(key, 0) + value
    total.constraint = turn.constraint
    total.wall_s += turn.wall_s


def _context(ablation: Ablation, budget: int) -> ContextManager | None:
    """The compaction a run gets: none when the ablation turns it off."""
    return ContextManager(budget, TieredCompact()) if ablation.compact else None


async def _run_turns(
    session: Session,
    instance: ScenarioRun,
    *,
    priority: int,
    context: ContextManager | None,
    track: _FirstToken | None = None,
    stats: RunStats | None = None,
) -> tuple[WorkflowResult, RunStats]:
    """Send every user turn; the last turn's result, and the stats of all turns together.

    ``stats`` accumulates across turns even when a turn fails, so a failed run still records
    the calls and retries it made.
    """
    handle = await session.start(instance.workflow, priority=priority, context=context)
    result: WorkflowResult | None = None
    stats = stats if stats is not None else RunStats()
    for turn in instance.turns:
        try:
            result = await handle.send(turn, on_chunk=track)
        finally:
            if handle.last_stats is not None:
                add_stats(stats, handle.last_stats)
                handle.last_stats = None
    assert result is not None, "a scenario has at least one turn"
    return result, stats


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
    trace: Path | None = None,
    cache_lines: int | None = None,
) -> RunRecord:
    """One run of ``scenario`` under ``ablation``; every outcome of the model is a record.

    ``trace``: a ``.jsonl`` file the run's trace is written to (every workflow of the run).
    ``cache_lines``: as for :class:`EvalPlan`.

    Errors that are not the model's doing -- a :class:`~forge_rt.errors.BackendError` (after the
    client's own retry) or a :class:`~forge_rt.errors.ConstraintUnsupportedError` -- are raised
    instead of recorded, so a dead backend stops the eval rather than filling it with failures.
    """
    instance = _with_ablation(scenario.build(), ablation)
    context = _context(ablation, scenario.budget_tokens or default_budget)
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
    stats = RunStats()
    aborted: list[ForgeError] = []
    try:
        with trio.fail_after(deadline_s):
            async with (
                Session.open(
                    client,
                    guardrails=ablation.guardrails,
                    max_iterations=scenario.max_iterations,
                    sampling=sampling or Sampling(),
                    trace=trace,
                    cache_lines=cache_lines,
                ) as session,
                trio.open_nursery() as nursery,
            ):
                for contender in scenario.contenders:

                    async def background(c: Any = contender) -> None:
                        await trio.sleep(c.start_after_s)
                        ctrack = _FirstToken()
                        contender_tracks.append(ctrack)
                        contender = _with_ablation(c.build(), ablation)
                        try:
                            out, _ = await _run_turns(
                                session,
                                contender,
                                priority=c.priority,
                                # Compacted like the scenario's own workflow: a background
                                # agent's history must not outgrow the backend's context.
                                context=_context(ablation, default_budget),
                                track=ctrack,
                            )
                            contender_ok.append(_unfinished(out, contender) is None)
                        except _ABORTS_EVAL as exc:
                            aborted.append(exc)
                        except ForgeError:
                            contender_ok.append(False)

                    nursery.start_soon(background)
                if scenario.contenders:
                    await trio.sleep(max(c.start_after_s for c in scenario.contenders) + 0.2)
                track = _FirstToken()
                # Caught here, inside the nursery, so the error stays itself (not a group).
                try:
                    result, stats = await _run_turns(
                        session,
                        instance,
                        priority=scenario.priority,
                        context=context,
                        track=track,
                        stats=stats,
                    )
                except _ABORTS_EVAL as exc:
                    aborted.append(exc)
                except ForgeError as exc:
                    record.error_type = type(exc).__name__
                    record.error = str(exc)[:500]
    except trio.TooSlowError:
        record.error_type = "RunDeadline"
        record.error = f"the run did not finish within {deadline_s:g} s"
    if aborted:
        raise aborted[0]
    record.wall_s = trio.current_time() - started
    if result is not None:
        record.output = result.output[:500]
        unfinished = _unfinished(result, instance)
        if unfinished is None and not all(contender_ok):
            unfinished = f"{contender_ok.count(False)} background workflow(s) did not finish"
        record.completed = unfinished is None
        verdict = instance.judge(result.output)
        record.correct = record.completed and verdict.correct
        record.reason = unfinished or verdict.reason
    # Failed runs too: what they cost and which guardrails fired is the interesting part.
    record.inferences = stats.inferences
    record.tool_calls = stats.tool_calls
    record.tool_errors = stats.tool_errors
    record.retries = dict(stats.retries)
    record.rules = dict(stats.rules)
    record.rescued = dict(stats.rescued)
    record.collapsed = stats.collapsed
    record.escalations = stats.escalations
    record.repetition_stops = stats.repetition_stops
    record.compactions = stats.compactions
    record.prompt_tokens = stats.prompt_tokens
    record.completion_tokens = stats.completion_tokens
    record.constraint = stats.constraint
    record.iterations = stats.iterations  # every turn's (a result's iteration is its turn's)
    if scenario.contenders:
        record.high_priority_ttft_s = track.seconds
        firsts = [t.seconds for t in contender_tracks if t.seconds is not None]
        record.background_ttft_s = sum(firsts) / len(firsts) if firsts else None
    return record


def sim_seed(seed: int, run: int) -> int:
    """The sim seed of run ``run`` under eval seed ``seed`` (seed 0 keeps the run number)."""
    return seed * 1_000_003 + run


@asynccontextmanager
async def sim_client(
    scenario: Scenario,
    run: int,
    *,
    rates: FailureRates,
    timing: dict[str, float] | None = None,
    seed: int = 0,
) -> AsyncIterator[LLMClient]:
    """A simulated backend driven by the scenario's oracle, seeded by ``seed`` and the run number."""
    from forge_rt.clients import LlamaServerClient

    config = SimConfig(
        oracle=scenario.oracle, rates=rates, seed=sim_seed(seed, run), **(timing or {})
    )
    # The sim speaks plain HTTP on 127.0.0.1: a transport without TLS set-up saves the ~0.1 s
    # httpx spends loading the system CA store for every client, which dominated a sim run.
    transport = httpx.AsyncHTTPTransport(verify=False)
    async with (
        SimBackend.serve(config) as sim,
        LlamaServerClient(sim.url, transport=transport) as client,
    ):
        yield client


def lines_for(scenarios: Sequence[Scenario]) -> int:
    """Cache lines enough for every workflow of the largest scenario to keep its own: the
    scenario's workflow and each of its contenders."""
    return 1 + max((len(s.contenders) for s in scenarios), default=0)


def run_trace_path(out: Path, scenario: str, ablation: str, run: int) -> Path:
    """Where the trace of one run goes: ``<out>.traces/<ablation>/<scenario>-<run>.jsonl``."""
    return out.with_name(out.name + ".traces") / ablation / f"{scenario}-{run}.jsonl"


def pending_runs(plan: EvalPlan) -> list[tuple[Scenario, Ablation, int]]:
    """The (scenario, ablation, run) triples of ``plan`` that ``plan.out`` does not hold yet."""
    done = {r.key for r in read_records(plan.out)}
    return [
        (scenario, ablation, run)
        for run in range(plan.runs)
        for ablation in plan.ablations
        for scenario in plan.scenarios
        if (plan.backend, plan.model, ablation.name, scenario.name, run) not in done
    ]


async def run_eval(
    plan: EvalPlan,
    client_for: ClientFactory,
    *,
    on_record: Callable[[RunRecord, int, int], None] | None = None,
    on_start: Callable[[Scenario, Ablation, int], None] | None = None,
) -> list[RunRecord]:
    """Run the plan, skipping records already in ``plan.out``; returns the new records.

    ``on_start(scenario, ablation, run)`` is called before each run and
    ``on_record(record, index, total)`` after it (progress displays use both).
    """
    todo = pending_runs(plan)
    total = len(todo)
    new: list[RunRecord] = []
    for index, (scenario, ablation, run) in enumerate(todo, 1):
        if on_start is not None:
            on_start(scenario, ablation, run)
        trace = run_trace_path(plan.out, scenario.name, ablation.name, run)
        trace.unlink(missing_ok=True)  # left by a run that ended without a record
        async with client_for(scenario, run) as client:
            record = await run_scenario(
                scenario,
                ablation,
                run,
                client,
                backend=plan.backend,
                model=plan.model,
                sampling=plan.sampling
                if plan.seed is None
                else msgspec.structs.replace(plan.sampling, seed=sim_seed(plan.seed, run)),
                default_budget=plan.default_budget,
                deadline_s=plan.run_deadline_s,
                trace=trace,
                cache_lines=plan.cache_lines,
            )
        record.trace = trace.relative_to(plan.out.parent).as_posix()
        record.suite = plan.suite
        record.split = split_of(scenario.name)
        append_record(plan.out, record)
        new.append(record)
        if on_record is not None:
            on_record(record, index, total)
    _log.info("eval.done", runs=len(new), out=str(plan.out))
    return new
