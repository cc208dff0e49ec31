"""The eval runner: resume, per-run records, what counts as finished, and backend failures."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from forge_rt.backends.sim import FailureRates, Fault, SimBackend, SimConfig, SimReply, SimToolCall
from forge_rt.clients import LlamaServerClient
from forge_rt.core import LLMClient
from forge_rt.errors import BackendError
from forge_rt.eval import (
    ABLATIONS,
    EvalPlan,
    ablation,
    read_records,
    run_eval,
    run_scenario,
    sim_client,
)
from forge_rt.eval._runner import pending_runs
from forge_rt.eval.scenarios import SCENARIOS, select

PERFECT = FailureRates()


@asynccontextmanager
async def scripted(*replies: SimReply, fault: Fault | None = None) -> AsyncIterator[LLMClient]:
    """A client to a sim that answers every conversation from ``replies`` (or always faults)."""
    config = SimConfig(
        script=None if fault else {"*": list(replies)},
        fault_rates={fault: 1.0} if fault else {},
    )
    async with (
        SimBackend.serve(config) as sim,
        LlamaServerClient(sim.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client,
    ):
        yield client


def _plan(out: Path, runs: int) -> EvalPlan:
    return EvalPlan(
        backend="sim",
        model="sim",
        scenarios=select(["basic_2step", "single_lookup"]),
        ablations=[ablation("full")],
        runs=runs,
        out=out,
    )


async def test_a_second_run_with_the_same_file_runs_nothing_new(tmp_path: Path) -> None:
    """Resume: runs already in the JSONL are skipped; more runs only add the missing ones."""
    out = tmp_path / "r.jsonl"
    factory = functools.partial(sim_client, rates=PERFECT)
    with trio.fail_after(30):
        first = await run_eval(_plan(out, 2), factory)
        lines = out.read_bytes()
        second = await run_eval(_plan(out, 2), factory)
        assert out.read_bytes() == lines
        third = await run_eval(_plan(out, 3), factory)
    assert len(first) == 4
    assert second == []
    assert [(r.scenario, r.run) for r in third] == [("basic_2step", 2), ("single_lookup", 2)]
    assert len(list(read_records(out))) == 6
    assert pending_runs(_plan(out, 3)) == []


async def test_progress_callbacks_see_every_run_in_order(tmp_path: Path) -> None:
    """on_start fires before each run, on_record after it with (index, total)."""
    seen: list[tuple[str, ...]] = []
    with trio.fail_after(30):
        await run_eval(
            _plan(tmp_path / "r.jsonl", 1),
            functools.partial(sim_client, rates=PERFECT),
            on_start=lambda s, a, r: seen.append(("start", s.name, a.name, str(r))),
            on_record=lambda rec, i, n: seen.append(("done", rec.scenario, f"{i}/{n}")),
        )
    assert seen == [
        ("start", "basic_2step", "full", "0"),
        ("done", "basic_2step", "1/2"),
        ("start", "single_lookup", "full", "0"),
        ("done", "single_lookup", "2/2"),
    ]


async def test_a_multi_turn_record_counts_every_turn() -> None:
    """Tool calls, inferences and iterations of all turns add up (a perfect run makes the ideal)."""
    scenario = SCENARIOS["multiturn_long"]
    with trio.fail_after(30):
        async with sim_client(scenario, 0, rates=PERFECT) as client:
            record = await run_scenario(
                scenario, ablation("full"), 0, client, backend="sim", model="sim"
            )
    assert record.correct
    assert (record.ideal_calls, record.tool_calls, record.inferences) == (8, 8, 8)
    assert record.iterations == 8


@pytest.mark.parametrize("preset", ["full", "bare"])
async def test_background_workflows_run_under_the_same_ablation(preset: str) -> None:
    """A perfect model completes a contention scenario in every ablation, contenders included."""
    scenario = SCENARIOS["contention_voice_3bg"]
    with trio.fail_after(30):
        async with sim_client(scenario, 0, rates=PERFECT) as client:
            record = await run_scenario(
                scenario, ablation(preset), 0, client, backend="sim", model="sim"
            )
    assert (record.completed, record.correct, record.reason) == (True, True, "")
    assert record.background_ttft_s is not None


async def test_a_contention_run_uses_the_backend_slots_as_cache_lines() -> None:
    """With cache lines, the scenario's workflows are spread over the backend's KV slots
    (one generation at a time still), and the run completes as on one slot."""
    from forge_rt.eval._runner import lines_for

    scenario = SCENARIOS["contention_voice_3bg"]
    lines = lines_for([scenario])
    assert lines == 4  # the voice workflow and its three background contenders
    config = SimConfig(oracle=scenario.oracle, rates=PERFECT, n_slots=lines)
    with trio.fail_after(30):
        async with (
            SimBackend.serve(config) as sim,
            LlamaServerClient(sim.url, transport=httpx.AsyncHTTPTransport(verify=False)) as client,
        ):
            record = await run_scenario(
                scenario, ablation("full"), 0, client, backend="sim", model="sim", cache_lines=lines
            )
            used = [slot for slot in sim.stats.slots if slot.prefilled_tokens > 0]
    assert (record.completed, record.correct) == (True, True)
    assert len(used) > 1


def test_lines_for_a_plan_without_contention_is_one() -> None:
    from forge_rt.eval._runner import lines_for

    assert lines_for(select(["basic_2step", "single_lookup"])) == 1
    assert lines_for(select(["contention"])) == 5  # contention_voice_4bg: 1 + 4


async def test_a_tool_call_left_in_text_does_not_complete_a_bare_run() -> None:
    """Without rescue, a call written as text that ends the run is a failure, not an answer."""
    call_text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    with trio.fail_after(30):
        async with scripted(SimReply(text=call_text)) as client:
            record = await run_scenario(
                SCENARIOS["basic_2step"], ablation("bare"), 0, client, backend="sim", model="sim"
            )
    assert (record.completed, record.correct) == (False, False)
    assert record.reason == "ended in text holding an unparsed call of 'get_weather'"


async def test_prose_ends_a_bare_run_as_an_answer() -> None:
    """Without retry nudges, prose is the answer of a respond-terminal scenario: it completes."""
    with trio.fail_after(30):
        async with scripted(SimReply(text="It is 18C in Paris.")) as client:
            record = await run_scenario(
                SCENARIOS["basic_2step"], ablation("bare"), 0, client, backend="sim", model="sim"
            )
    assert (record.completed, record.correct, record.output) == (True, True, "It is 18C in Paris.")


async def test_prose_does_not_finish_a_scenario_with_its_own_terminal_tool() -> None:
    """Where the task ends in a named tool (report), a text answer leaves it unfinished."""
    with trio.fail_after(30):
        async with scripted(SimReply(text="Sales were fine.")) as client:
            record = await run_scenario(
                SCENARIOS["sequential_3step"],
                ablation("bare"),
                0,
                client,
                backend="sim",
                model="sim",
            )
    assert not record.completed
    assert record.reason == "ended in text, not in its terminal tool ['report']"


async def test_a_failing_backend_stops_the_eval_instead_of_failing_runs(tmp_path: Path) -> None:
    """A BackendError (after the client's retry) propagates; no record blames the model."""
    out = tmp_path / "r.jsonl"

    @asynccontextmanager
    async def broken(scenario: object, run: int) -> AsyncIterator[LLMClient]:
        async with scripted(fault=Fault.HTTP_500) as client:
            yield client

    with trio.fail_after(30), pytest.raises(BackendError):
        await run_eval(_plan(out, 1), broken)
    assert list(read_records(out)) == []


async def test_a_native_call_run_records_tokens_and_no_rescue() -> None:
    """Records carry token counts and wall time; native calls leave the rescue counts empty."""
    replies = [
        SimReply(tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}),)),
        SimReply(tool_calls=(SimToolCall(name="respond", arguments={"message": "18C"}),)),
    ]
    with trio.fail_after(30):
        async with scripted(*replies) as client:
            record = await run_scenario(
                SCENARIOS["basic_2step"], ablation("full"), 0, client, backend="sim", model="sim"
            )
    assert (
        record.completed,
        record.correct,
        record.rescued,
        record.retries,
    ) == (True, True, {}, {})
    assert record.prompt_tokens > 0
    assert record.completion_tokens > 0
    assert record.wall_s > 0


def test_a_with_arm_turns_on_a_rule_that_is_off_by_default() -> None:
    preset = ablation("with:call_list")
    assert preset.guardrails.call_list
    assert preset.constrain == "auto"
    assert ablation("without:call_list").guardrails == ABLATIONS["full"].guardrails


def test_an_arm_may_switch_several_rules_at_once() -> None:
    preset = ablation("with:call_list+unfounded_calls")
    assert (preset.guardrails.call_list, preset.guardrails.unfounded_calls) == (True, True)
    off = ablation("without:chain_ends+list_coverage").guardrails
    assert (off.chain_ends, off.list_coverage) == (False, False)
