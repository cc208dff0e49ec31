"""The generated suite: seeded and stable, varied in shape and schema, and sound on the sim."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import trio

import forge_rt.eval.generated as generated
from forge_rt.backends.sim import FailureRates
from forge_rt.core._schema import model_from_json_schema
from forge_rt.errors import ToolResolutionError
from forge_rt.eval import ablation, run_scenario, sim_client
from forge_rt.eval._scenario import Scenario, ScenarioRun
from forge_rt.eval.generated import generate_suite
from forge_rt.eval.generated._tools import RunState, ServiceUnavailable
from forge_rt.eval.scenarios import SCENARIOS

PERFECT = FailureRates()
SHAPES = {"chain", "fanout", "recovery", "decline", "followup", "stateful"}
SUITE = generate_suite(0, 60)


def _fingerprint(scenario: Scenario) -> tuple[Any, ...]:
    """Everything a case shows a model, and how it is scored: equal for equal cases."""
    run = scenario.build()
    tools = tuple(
        (t.spec.name, t.spec.description, repr(t.spec.parameters))
        for t in run.workflow.tools.values()
    )
    return (
        scenario.name,
        scenario.tags,
        scenario.description,
        scenario.ideal_calls,
        scenario.max_iterations,
        run.turns,
        run.workflow.system_prompt_template,
        run.workflow.required_steps,
        tools,
    )


def _of_shape(shape: str) -> list[Scenario]:
    return [s for s in SUITE if s.tags[0] == shape]


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    """Every sub-schema of ``schema``, itself first."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


def test_the_package_exports_only_generate_suite() -> None:
    """The public surface is the one function the CLI wires in."""
    assert generated.__all__ == ["generate_suite"]


def test_the_same_seed_gives_the_same_suite() -> None:
    """Two suites of one seed agree on every name, tool, prompt and score."""
    assert [_fingerprint(s) for s in SUITE] == [_fingerprint(s) for s in generate_suite(0, 60)]


def test_a_shorter_suite_is_a_prefix_of_a_longer_one() -> None:
    """Case i does not depend on how many cases were asked for."""
    assert [_fingerprint(s) for s in SUITE[:10]] == [_fingerprint(s) for s in generate_suite(0, 10)]


def test_different_seeds_give_different_suites() -> None:
    """Another seed draws other domains, values and prompts."""
    first = [_fingerprint(s)[5:] for s in generate_suite(1, 12)]
    second = [_fingerprint(s)[5:] for s in generate_suite(2, 12)]
    assert all(a != b for a, b in zip(first, second, strict=True))


def test_cases_are_named_by_seed_and_index() -> None:
    """Names are stable ids: gen-{seed}-{index:03d}."""
    assert [f"gen-7-{i:03d}" for i in range(3)] == [s.name for s in generate_suite(7, 3)]


def test_a_negative_count_is_refused() -> None:
    """A negative count is a caller's mistake, not an empty suite."""
    with pytest.raises(ValueError, match=r"^count must be >= 0, got -1$"):
        generate_suite(0, -1)


def test_every_shape_appears_and_leads_the_tags() -> None:
    """tags[0] is the shape, and all six shapes are in the first sixty cases."""
    assert {s.tags[0] for s in SUITE} == SHAPES
    assert all(len(_of_shape(shape)) == 10 for shape in SHAPES)


@pytest.mark.parametrize("scenario", SUITE, ids=lambda s: s.name)
def test_a_case_offers_three_to_twelve_tools(scenario: Scenario) -> None:
    """Tool sets are 3-12 tools, the respond tool not counted."""
    assert 3 <= len(scenario.build().workflow.tools) <= 12


def test_schemas_are_object_schemas_the_runtime_can_validate_with() -> None:
    """Every parameters schema is an object schema whose required names are properties, and
    the runtime builds its argument validator from it."""
    for scenario in SUITE:
        for tool in scenario.build().workflow.tools.values():
            schema = tool.spec.parameters
            assert isinstance(schema, dict)
            assert schema["type"] == "object"
            assert set(schema["required"]) <= set(schema["properties"])
            model_from_json_schema(tool.spec.name, schema)


def test_the_suite_uses_every_schema_feature() -> None:
    """Enums, patterns, nested objects, arrays, optional fields, integers, numbers and
    booleans each appear in some tool of the suite."""
    seen: set[str] = set()
    for scenario in SUITE:
        for tool in scenario.build().workflow.tools.values():
            for sub in _walk(tool.spec.parameters):
                seen.update(k for k in ("enum", "pattern") if k in sub)
                if sub.get("type") in ("array", "integer", "number", "boolean"):
                    seen.add(sub["type"])
                if sub.get("type") == "object" and sub is not tool.spec.parameters:
                    seen.add("nested")
                if set(sub.get("properties", {})) - set(sub.get("required", ())):
                    seen.add("optional")
    expected = {"enum", "pattern", "nested", "array", "optional", "integer", "number", "boolean"}
    assert expected <= seen


def test_no_tool_name_is_one_of_the_hand_written_suite() -> None:
    """The generated tools are new: a model tuned on the hand-written suite meets none of them."""
    written = {t.spec.name for s in SCENARIOS.values() for t in s.build().workflow.tools.values()}
    ours = {t.spec.name for s in SUITE for t in s.build().workflow.tools.values()}
    assert set() == written & ours


async def _run(scenario: Scenario) -> Any:
    with trio.fail_after(30):
        async with sim_client(scenario, 0, rates=PERFECT) as client:
            return await run_scenario(
                scenario, ablation("full"), 0, client, backend="sim", model="sim"
            )


@pytest.mark.parametrize("scenario", SUITE, ids=lambda s: s.name)
async def test_a_perfect_model_completes_every_case_in_its_ideal_calls(scenario: Scenario) -> None:
    """On the sim with zero failure rates each case ends correct, with exactly the ideal
    number of calls and replies, and only recovery cases see a tool fail (once)."""
    record = await _run(scenario)
    assert (record.completed, record.correct, record.reason) == (True, True, "")
    assert (scenario.ideal_calls, scenario.ideal_calls) == (record.tool_calls, record.inferences)
    assert (1 if scenario.tags[0] == "recovery" else 0) == record.tool_errors


@pytest.mark.parametrize("shape", sorted(SHAPES - {"decline"}))
def test_a_judge_rejects_an_answer_without_the_facts(shape: str) -> None:
    """An empty answer and one without the looked-up facts are wrong."""
    for scenario in _of_shape(shape):
        judge = scenario.build().judge
        assert not judge("").correct
        assert not judge("I looked into it and everything is fine.").correct


def test_a_stateful_judge_rejects_a_wrong_end_state() -> None:
    """The perfect answer is wrong when the records are not as the request asked."""
    for scenario in _of_shape("stateful"):
        run = scenario.build()
        assert isinstance(run.state, RunState)
        # An answer naming every record, so only the end state can make it wrong.
        answer = "Done: " + "; ".join(f"{k} {r['holder']}" for k, r in run.state.records.items())
        verdict = run.judge(answer)
        assert not verdict.correct, scenario.name
        assert verdict.reason


async def test_a_stateful_judge_accepts_the_perfect_end_state() -> None:
    """The same answer is right once the tools have done what was asked (on the sim)."""
    for scenario in _of_shape("stateful")[:3]:
        assert (await _run(scenario)).correct


async def _call_first_tool(run: ScenarioRun) -> None:
    """Call one domain tool of ``run`` with arguments its schema allows."""
    tool = next(iter(run.workflow.tools.values()))
    schema = tool.spec.parameters
    assert isinstance(schema, dict)
    args = {k: _example(v) for k, v in schema["properties"].items() if k in schema["required"]}
    # A call the tool refuses is still a call the judge must see: its error is not the point.
    with contextlib.suppress(ToolResolutionError, ServiceUnavailable):
        await tool.callable(**args)


def _example(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: _example(v) for k, v in schema.get("properties", {}).items()}
    return {"integer": 1, "number": 1.5, "boolean": True, "array": []}.get(str(kind), "x")


async def test_a_decline_judge_rejects_a_run_that_called_a_domain_tool() -> None:
    """Declining means answering without tools: any domain call makes the run wrong."""
    for scenario in _of_shape("decline"):
        run = scenario.build()
        assert run.judge("Sorry, I can't help with that here.").correct
        assert not run.judge("   ").correct
        await _call_first_tool(run)
        assert isinstance(run.state, RunState)
        assert run.state.calls
        assert not run.judge("Sorry, I can't help with that here.").correct


async def test_every_tool_of_a_run_logs_its_calls_in_the_run_state() -> None:
    """Each build gets a fresh state; a call lands in that run's log only."""
    scenario = _of_shape("chain")[0]
    first, second = scenario.build(), scenario.build()
    await _call_first_tool(first)
    assert isinstance(first.state, RunState)
    assert isinstance(second.state, RunState)
    assert len(first.state.calls) == 1
    assert second.state.calls == []
