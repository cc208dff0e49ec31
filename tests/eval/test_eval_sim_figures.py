"""The eval's figures on the simulated backend against what its known failure rates imply.

The sim renders each intended call wrong with known probabilities (the ``small-model`` preset),
so how often the guardrails can finish a scenario, and how often the raw model can, is bounded
in closed form. A perfect-model run of the suite first measures each scenario's plan length.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import msgspec
import pytest
import trio

from forge_rt.backends.sim import FailureRates, SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient
from forge_rt.core import RESPOND_TOOL_NAME, LLMClient
from forge_rt.eval import EvalPlan, RunRecord, Scenario, ablation, run_eval, sim_client
from forge_rt.eval._presets import SIM_RATE_PRESETS
from forge_rt.eval.scenarios import SCENARIOS

RATES = SIM_RATE_PRESETS["small-model"]
RUNS = 2
# Bad replies the full guardrails always absorb without failing a run: two in a row at most
# fit every budget (3 retries, 2 tool errors, 3 premature calls, the loop guard's 3 repeats).
ABSORBED = 2


class Plan(msgspec.Struct, frozen=True):
    """What a perfect model does in one scenario, measured on the sim."""

    replies: int  # every reply the sim wrote, background workflows included
    main_replies: int  # replies to the scenario's own workflow, all turns
    respond_terminal: bool
    multi_turn: bool
    max_iterations: int


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Plan]:
    """Each scenario's plan length, from one run of the suite on a sim with a perfect model."""
    replies: dict[str, int] = {}

    @asynccontextmanager
    async def counting(scenario: Scenario, run: int) -> AsyncIterator[LLMClient]:
        config = SimConfig(oracle=scenario.oracle, rates=FailureRates(), seed=run)
        transport = httpx.AsyncHTTPTransport(verify=False)
        async with (
            SimBackend.serve(config) as sim,
            LlamaServerClient(sim.url, transport=transport) as client,
        ):
            yield client
            replies[scenario.name] = sum(sim.stats.dialects.values())

    plan = EvalPlan(
        backend="sim",
        model="perfect",
        scenarios=list(SCENARIOS.values()),
        ablations=[ablation("full")],
        runs=1,
        out=tmp_path_factory.mktemp("perfect") / "r.jsonl",
    )
    records = trio.run(run_eval, plan, counting)
    failed = [(r.scenario, r.error or r.reason) for r in records if not r.correct]
    assert failed == [], "a perfect model must pass every scenario under full guardrails"
    out = {}
    for record in records:
        scenario = SCENARIOS[record.scenario]
        built = scenario.build()
        out[record.scenario] = Plan(
            replies=replies[record.scenario],
            main_replies=record.inferences,
            respond_terminal=built.workflow.terminal_tools == frozenset({RESPOND_TOOL_NAME}),
            multi_turn=len(built.turns) > 1,
            max_iterations=scenario.max_iterations,
        )
    return out


def full_lower_bound(plan: Plan, rates: FailureRates) -> float:
    """P(full completes) >= P(at most ABSORBED bad replies before the plan's good replies).

    Good replies are native calls and calls written in a text dialect (rescued); bad ones are
    prose, invented tools, broken arguments and premature ``respond`` calls, each retried or
    blocked. With at most ``ABSORBED`` bad replies in the whole run no budget runs out, so every
    good reply moves the plan on: a negative-binomial tail over ``plan.replies`` successes.
    """
    bad = rates.bare_text + rates.unknown_tool + rates.wrong_args + rates.premature_terminal
    assert plan.main_replies + ABSORBED <= plan.max_iterations
    m = plan.replies
    return sum(math.comb(m + k - 1, k) * (1 - bad) ** m * bad**k for k in range(ABSORBED + 1))


def bare_upper_bound(plan: Plan, rates: FailureRates) -> float:
    """P(bare completes) <= what a run of its last turn's plan allows, failures aside.

    Without rescue and nudges, any text ends the run. A call left in text (probability
    ``calls``) is never an answer. Where the terminal tool is not ``respond`` prose is not an
    answer either, so each of the plan's m steps must avoid all text: ``(1 - text)^m``. Where it
    is ``respond``, prose or a premature ``respond`` ends the run as an answer, and only a call
    in text fails it: ``1 - calls * sum(progress^i, i < m)``. Counting retries (invented
    tools, bad arguments) as progress and ignoring every budget and tool failure only raises
    the bound; a multi-turn run is judged on its last turn, bounded by m = 1.
    """
    calls = rates.bare_json + rates.fenced_json + rates.hermes + rates.qwen_coder + rates.mistral
    m = 1 if plan.multi_turn else plan.main_replies
    if not plan.respond_terminal:
        return (1 - calls - rates.bare_text) ** m
    progress = 1 - calls - rates.bare_text - rates.premature_terminal
    return 1 - calls * sum(progress**i for i in range(m))


def test_a_perfect_model_passes_every_scenario(plans: dict[str, Plan]) -> None:
    """The suite is sound: with no failures every scenario completes correctly in its plan."""
    assert set(SCENARIOS) == set(plans)
    assert all(p.main_replies >= SCENARIOS[name].ideal_calls for name, p in plans.items())


async def test_guarded_completion_beats_bare_by_the_margin_the_rates_imply(
    plans: dict[str, Plan], tmp_path: Path
) -> None:
    """full - bare completion >= E[full lower bound] - E[bare upper bound], less 2 std errors.

    The bounds come from the failure rates alone (see ``full_lower_bound`` and
    ``bare_upper_bound``), averaged over the suite with each scenario's measured plan length.
    The runs are seeded, so the outcome is fixed; the tolerance of two binomial standard
    errors of the difference says that a sample this small may sit that far from its mean.
    """
    lower = sum(full_lower_bound(p, RATES) for p in plans.values()) / len(plans)
    upper = sum(bare_upper_bound(p, RATES) for p in plans.values()) / len(plans)
    margin = lower - upper
    assert margin > 0.4, "the rates must make guardrails matter for this check to mean anything"

    plan = EvalPlan(
        backend="sim",
        model="small-model",
        scenarios=list(SCENARIOS.values()),
        ablations=[ablation("full"), ablation("bare")],
        runs=RUNS,
        out=tmp_path / "r.jsonl",
    )
    with trio.fail_after(120):
        records = await run_eval(plan, functools.partial(sim_client, rates=RATES))

    def completion(name: str) -> float:
        rows: list[RunRecord] = [r for r in records if r.ablation == name]
        assert len(rows) == RUNS * len(plans)
        return sum(r.completed for r in rows) / len(rows)

    full, bare = completion("full"), completion("bare")
    n = RUNS * len(plans)
    tolerance = 2 * math.sqrt((lower * (1 - lower) + upper * (1 - upper)) / n)
    assert full - bare >= margin - tolerance, (full, bare, lower, upper)
    assert full >= lower - tolerance, (full, lower)
    assert bare <= upper + tolerance, (bare, upper)
