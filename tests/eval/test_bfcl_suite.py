"""The BFCL suite: BFCL's own data and checkers, cases sent through the real proxy over HTTP.

A simulated backend scripted with each case's ground truth is a perfect model: BFCL's checker
must call every such run valid, and call a run invalid when the script is wrong. These tests
read the installed ``bfcl-eval`` package's files; they never name its cases' contents.
"""

from __future__ import annotations

import ast
import json
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from forge_rt.backends.sim import SimBackend, SimConfig, SimReply, SimToolCall
from forge_rt.eval import RunRecord, read_records
from forge_rt.eval._split import split_of
from forge_rt.eval.bfcl import (
    CATEGORIES,
    MULTI_TURN,
    SINGLE_TURN,
    BfclCase,
    BfclPlan,
    Call,
    check_ablation,
    check_single_turn,
    load_category,
    proxy_config,
    run_bfcl,
    sample_cases,
    tool_name,
)
from forge_rt.eval.bfcl._check import executed_instances
from forge_rt.eval.bfcl._package import checkers
from forge_rt.proxy import BackendConfig

_JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean"}


def _first_answer(options: dict[str, list[Any]]) -> dict[str, Any]:
    """One argument set BFCL accepts: each parameter's first listed value ("" = left out)."""
    return {
        k: next(v for v in values if v != "")
        for k, values in options.items()
        if values != [""] and any(v != "" for v in values)
    }


def _perfect_calls(case: BfclCase) -> list[Call]:
    return [
        Call(name=name, arguments=_first_answer(options))
        for answer in case.ground_truth
        for name, options in answer.items()
    ]


def _wire(case: BfclCase, call: Call) -> SimToolCall:
    back = {bfcl: wire for wire, bfcl in case.names.items()}
    return SimToolCall(name=back[call.name], arguments=call.arguments)


def _first_user_text(case: BfclCase) -> str:
    return next(m["content"] for m in case.turns[0] if m["role"] == "user")


def _schemas(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("properties", {}).values():
        found += _schemas(child)
    if "items" in node:
        found += _schemas(node["items"])
    return found


def test_dotted_names_become_wire_names_and_map_back() -> None:
    assert tool_name("shop.cart.add") == "shop_cart_add"
    assert tool_name("shop.cart.add", taken={"shop_cart_add"}) == "shop_cart_add_2"
    dotted = [
        c for name in SINGLE_TURN for c in load_category(name) if "." in c.functions[0]["name"]
    ]
    assert dotted, "BFCL names some functions with dots"
    for case in dotted[:50]:
        for wire, bfcl in case.names.items():
            assert "." not in wire
            assert wire.replace("_", "") == bfcl.replace(".", "").replace("_", "")[: len(wire)]
        assert sorted(case.names.values()) == sorted(f["name"] for f in case.functions)


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_every_tool_schema_is_json_schema(category: str) -> None:
    for case in load_category(category):
        for tool in case.tools:
            parameters = tool["function"]["parameters"]
            assert parameters["type"] == "object"
            for schema in _schemas(parameters):
                assert schema.get("type", "object") in _JSON_TYPES, (case.id, schema)


def test_samples_keep_their_split_and_grow_by_prefix() -> None:
    small = sample_cases(SINGLE_TURN, 5, split="dev", seed=3)
    large = sample_cases(SINGLE_TURN, 10, split="dev", seed=3)
    assert len(small) == 25
    assert len(large) == 50
    for name in SINGLE_TURN:
        assert [c.id for c in small if c.category == name] == [
            c.id for c in large if c.category == name
        ][:5]
    assert {split_of(c.id) for c in large} == {"dev"}
    tests = sample_cases(SINGLE_TURN, 10, split="test", seed=3)
    assert not {c.id for c in tests} & {c.id for c in large}
    assert [c.id for c in sample_cases(["simple"], 5, split="dev", seed=4)] != [
        c.id for c in small if c.category == "simple"
    ]


def test_an_unknown_category_is_refused_with_the_real_ones() -> None:
    with pytest.raises(ValueError, match="choose from"):
        load_category("simple_rust")


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple"])
def test_bfcl_checker_accepts_the_ground_truth_and_rejects_a_changed_value(category: str) -> None:
    for case in sample_cases([category], 8, split="all"):
        calls = _perfect_calls(case)
        assert check_single_turn(case, calls, model_name="m").valid, case.id
        first = calls[0]
        if not first.arguments:
            continue
        key = sorted(first.arguments)[0]
        wrong = Call(name=first.name, arguments={**first.arguments, key: ["not", "this"]})
        verdict = check_single_turn(case, [wrong, *calls[1:]], model_name="m")
        assert not verdict.valid, case.id
        assert verdict.error_type, case.id


def test_irrelevance_is_valid_only_without_a_call() -> None:
    case = sample_cases(["irrelevance"], 1, split="all")[0]
    assert check_single_turn(case, [], model_name="m").valid
    invented = Call(name=case.functions[0]["name"], arguments={})
    verdict = check_single_turn(case, [invented], model_name="m")
    assert not verdict.valid
    assert verdict.error_type == "irrelevance_error:decoder_success"


def test_a_call_less_reply_is_a_decoder_failure_for_an_ast_case() -> None:
    case = sample_cases(["simple"], 1, split="all")[0]
    verdict = check_single_turn(case, [], model_name="m")
    assert not verdict.valid
    assert verdict.error_type == "ast_decoder:decoder_failed"


DECLINE = "None of the available tools can do that."
# How a model answers in text where the proxy offers its ``respond`` tool.
ANSWER = SimReply(tool_calls=(SimToolCall(name="respond", arguments={"message": DECLINE}),))


def _scripts(cases: list[BfclCase], *, wrong: str | None = None) -> dict[str, list[SimReply]]:
    """A perfect model for every case (an answer, no call, for irrelevance); ``wrong`` writes
    a call that never closes, every time it is asked."""
    script: dict[str, list[SimReply]] = {}
    for case in cases:
        if case.id == wrong:
            reply = SimReply(text='{"name": "' + case.tools[0]["function"]["name"] + '", "ar')
        elif case.check == "irrelevance":
            reply = ANSWER
        else:
            reply = SimReply(tool_calls=tuple(_wire(case, c) for c in _perfect_calls(case)))
        script[_first_user_text(case)] = [reply] * 4  # the same answer to any retry
    return script


async def test_perfect_replies_through_the_proxy_are_valid_and_a_resume_adds_nothing(
    tmp_path: Path,
) -> None:
    cases = sample_cases(SINGLE_TURN, 2, split="dev", seed=1)
    wrong = next(c.id for c in cases if c.category == "parallel")
    out = tmp_path / "bfcl.jsonl"
    plan = BfclPlan(
        backend="sim", model="sim", cases=cases, ablations=["unconstrained"], runs=1, out=out
    )
    with trio.fail_after(60):
        async with SimBackend.serve(SimConfig(script=_scripts(cases, wrong=wrong))) as sim:
            backend = BackendConfig(url=sim.url, kind="llamaserver")
            new = await run_bfcl(plan, backend)
            again = await run_bfcl(plan, backend)
    assert again == []
    records = {r.scenario: r for r in read_records(out)}
    assert len(new) == len(records) == len(cases)
    for case in cases:
        record = records[case.id]
        assert record.suite == "bfcl"
        assert record.split == "dev"
        assert record.tags == (case.category,)
        assert record.replies
        assert record.completed is record.correct is (case.id != wrong), (case.id, record.reason)
    declined = next(r for r in records.values() if r.tags == ("irrelevance",))
    assert declined.calls == []
    assert declined.output == DECLINE
    # A broken call every time, past the retry budget: the client gets no answer (a 502).
    failed = records[wrong]
    assert failed.error_type == "tool_call_retries_exhausted"
    assert failed.checker["error_type"] == "forge_rt:no_answer"
    assert failed.calls == []
    # What the failed request did is recorded, for the per-rule audit: 1 + 3 retries.
    assert failed.inferences == 4
    assert failed.rules == {"retry_nudges": 3}
    parallel = next(r for r in records.values() if r.tags == ("parallel",) and r.correct)
    assert len(parallel.calls) >= 2
    assert parallel.tool_calls == len(parallel.calls)


def _parsed(case: BfclCase, text: str) -> Call:
    """A ground-truth call string (``name(a, key=value)``) as a call with named arguments."""
    node = ast.parse(text, mode="eval").body
    assert isinstance(node, ast.Call)
    assert isinstance(node.func, ast.Name)
    doc = next(f for f in case.functions if f["name"] == node.func.id)
    order = list(doc["parameters"]["properties"])
    arguments = {order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    return Call(name=node.func.id, arguments=arguments)


async def test_a_multi_turn_case_runs_on_bfcls_api_classes_and_its_checker_judges_it(
    tmp_path: Path,
) -> None:
    case = next(c for c in sample_cases(MULTI_TURN, 10, split="all") if len(c.turns) <= 4)
    execute = checkers().execute_multi_turn_func_call
    replies: list[SimReply] = []
    with executed_instances("test_truth"):
        for turn in case.ground_truth:
            replies += [SimReply(tool_calls=(_wire(case, _parsed(case, text)),)) for text in turn]
            results, _ = execute(
                turn, case.initial_config, list(case.involved_classes), "test_truth", case.id
            )
            # A perfect answer reports what the calls returned.
            summary = "Done: " + "; ".join(results)
            replies.append(
                SimReply(tool_calls=(SimToolCall(name="respond", arguments={"message": summary}),))
            )
    cut = SimReply(text='{"name": "' + case.tools[0]["function"]["name"] + '", "ar')
    broken = [*replies[:1], *([cut] * 4)]  # then a call that never closes, every time
    out = tmp_path / "mt.jsonl"
    outcomes = {}
    for label, script in (("perfect", replies), ("broken", broken)):
        plan = BfclPlan(
            backend="sim", model=label, cases=[case], ablations=["full"], runs=1, out=out
        )
        with trio.fail_after(60):
            async with SimBackend.serve(SimConfig(script={_first_user_text(case): script})) as sim:
                [record] = await run_bfcl(plan, BackendConfig(url=sim.url, kind="llamaserver"))
        outcomes[label] = record
    perfect, failed = outcomes["perfect"], outcomes["broken"]
    assert perfect.correct, perfect.reason
    assert len(perfect.calls) == len(case.turns)
    assert sum(len(step) for turn in perfect.calls for step in turn) == sum(
        len(t) for t in case.ground_truth
    )
    assert not failed.correct
    assert failed.checker["error_type"] == "forge_rt:no_answer"


def test_ablations_without_a_proxy_switch_are_refused() -> None:
    backend = BackendConfig(url="http://127.0.0.1:9", kind="llamaserver")
    assert proxy_config("no_rescue", backend).rescue is False
    assert proxy_config("unconstrained", backend).constrain == "never"
    assert proxy_config("without:chain_ends", backend).rules_off == ("chain_ends",)
    both = proxy_config("with:call_list+unfounded_calls", backend)
    assert both.rules_on == ("call_list", "unfounded_calls")
    check_ablation("bare", backend)
    with pytest.raises(ValueError, match="no proxy equivalent"):
        check_ablation("no_compact", backend)
    with pytest.raises(ValueError, match="OpenAI-compatible"):
        check_ablation("bare", BackendConfig(url="http://127.0.0.1:9", kind="ollama", model="m"))


async def test_bare_goes_straight_to_the_backend_and_text_is_what_bfcl_decodes(
    tmp_path: Path,
) -> None:
    """Without forge_rt a reply in prose is the answer: no call for an AST case (invalid), a
    decline for irrelevance (valid) -- no guardrail asks for a call."""
    cases = [
        *sample_cases(["simple"], 1, split="all"),
        *sample_cases(["irrelevance"], 1, split="all"),
    ]
    script = {_first_user_text(c): [SimReply(text=DECLINE)] for c in cases}
    out = tmp_path / "bare.jsonl"
    plan = BfclPlan(backend="sim", model="sim", cases=cases, ablations=["bare"], runs=1, out=out)
    with trio.fail_after(30):
        async with SimBackend.serve(SimConfig(script=script)) as sim:
            records = await run_bfcl(plan, BackendConfig(url=sim.url, kind="llamaserver"))
            assert sim.stats.requests["/v1/chat/completions"] == 2  # one each: no retry
    simple, irrelevance = records
    assert (simple.correct, irrelevance.correct) == (False, True)
    assert simple.checker["error_type"] == "ast_decoder:decoder_failed"
    assert irrelevance.output == DECLINE


def test_records_hold_json_the_report_can_read(tmp_path: Path) -> None:
    """A BFCL record's extra fields survive a JSONL round trip."""
    from forge_rt.eval import append_record

    record = RunRecord(
        scenario="x_1", tags=("simple",), run=0, ablation="full", backend="b", model="m",
        completed=True, correct=False, suite="bfcl", split="test",
        replies=[{"content": "hi"}], calls=[{"f": {"a": 1}}], checker={"valid": False},
    )  # fmt: skip
    path = tmp_path / "r.jsonl"
    append_record(path, record)
    [back] = read_records(path)
    assert back == record
    assert json.loads(path.read_text())["calls"] == [{"f": {"a": 1}}]


def test_the_pinned_bfcl_release_is_the_installed_one_and_every_install_line_names_it() -> None:
    from importlib.metadata import version

    from forge_rt.eval.bfcl import BFCL_VERSION, INSTALL_HINT

    assert version("bfcl-eval") == BFCL_VERSION
    root = Path(__file__).resolve().parents[2]
    pin = f"bfcl-eval=={BFCL_VERSION}"
    for path in (".ci/run", "pyproject.toml", "README.md", "docs/eval/heldout.md"):
        assert pin in (root / path).read_text(encoding="utf-8"), path
    assert pin in INSTALL_HINT


@contextmanager
def _sim_in_thread(config: SimConfig) -> Iterator[str]:
    """A simulated backend on its own trio loop in a thread (the CLI runs trio itself)."""
    urls: queue.Queue[str] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:
        async with SimBackend.serve(config) as sim:
            urls.put(sim.url)
            await trio.to_thread.run_sync(stop.wait)

    thread = threading.Thread(target=trio.run, args=(serve,))
    thread.start()
    try:
        yield urls.get(timeout=30)
    finally:
        stop.set()
        thread.join(timeout=30)


def test_the_cli_runs_bfcl_against_a_url_backend_and_reports_by_category(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from structlog.testing import capture_logs

    from forge_rt.eval._cli import eval_command
    from forge_rt.eval._meta import read_meta

    cases = sample_cases(["simple", "irrelevance"], 1, split="dev", seed=5)
    out = tmp_path / "bfcl.jsonl"
    args = [
        "--suite", "bfcl", "--split", "dev", "--categories", "simple,irrelevance",
        "--per-category", "1", "--suite-seed", "5", "-a", "full,bare", "--model", "sim",
        "--backend-kind", "llamaserver", "--out", str(out),
    ]  # fmt: skip
    with _sim_in_thread(SimConfig(script=_scripts(cases))) as url, capture_logs():
        result = CliRunner().invoke(eval_command, ["--backend", url, *args])
    assert result.exit_code == 0, result.output
    records = list(read_records(out))
    assert sorted((r.ablation, r.scenario) for r in records) == sorted(
        (a, c.id) for a in ("full", "bare") for c in cases
    )
    full = {r.tags[0]: r.correct for r in records if r.ablation == "full"}
    assert full == {"simple": True, "irrelevance": True}
    # bare: the respond call the script makes is a call BFCL sees (no proxy strips it).
    bare = {r.tags[0]: r.correct for r in records if r.ablation == "bare"}
    assert bare == {"simple": True, "irrelevance": False}
    assert " · simple" in result.stdout
    assert " · irrelevance" in result.stdout
    assert out.with_suffix(".html").exists()
    [invocation] = read_meta(out).invocations
    assert invocation.outcome == "done"
    assert invocation.scenarios == [c.id for c in cases]
    assert invocation.settings["suite"] == "bfcl 2026.3.23"


def test_the_cli_runs_only_the_cases_it_names_among_those_drawn(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from structlog.testing import capture_logs

    from forge_rt.eval._cli import eval_command

    cases = sample_cases(["simple", "irrelevance"], 2, split="dev", seed=5)
    named = cases[-1]
    out = tmp_path / "bfcl.jsonl"
    args = [
        "--suite", "bfcl", "--split", "dev", "--categories", "simple,irrelevance",
        "--per-category", "2", "--suite-seed", "5", "--model", "sim", "-s", named.id,
        "--backend-kind", "llamaserver", "--out", str(out),
    ]  # fmt: skip
    with _sim_in_thread(SimConfig(script=_scripts(cases))) as url, capture_logs():
        result = CliRunner().invoke(eval_command, ["--backend", url, *args])
    assert result.exit_code == 0, result.output
    assert [r.scenario for r in read_records(out)] == [named.id]


async def test_the_runtime_route_runs_cases_as_workflows_with_the_same_verdicts(
    tmp_path: Path,
) -> None:
    """Through a Session: the calls that ran are what BFCL checks; each run leaves a trace."""
    from forge_rt.clients import LlamaServerClient

    cases = sample_cases(SINGLE_TURN, 1, split="dev", seed=2)
    wrong = next(c.id for c in cases if c.category == "multiple")
    out = tmp_path / "rt.jsonl"
    plan = BfclPlan(
        backend="sim", model="sim", cases=cases, ablations=["unconstrained"], runs=1, out=out,
        route="runtime",
    )  # fmt: skip
    with trio.fail_after(60):
        async with (
            SimBackend.serve(SimConfig(script=_scripts(cases, wrong=wrong))) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            backend = BackendConfig(url=sim.url, kind="llamaserver")
            records = {r.scenario: r for r in await run_bfcl(plan, backend, client=client)}
    for case in cases:
        record = records[case.id]
        assert record.suite == "bfcl-runtime"
        assert record.trace is not None
        assert (out.parent / record.trace).exists()
        assert record.correct is (case.id != wrong), (case.id, record.reason)
    assert records[wrong].checker["error_type"] == "forge_rt:no_answer"
    assert records[wrong].error_type == "ToolCallError"
    parallel = next(r for r in records.values() if r.tags == ("parallel",))
    assert len(parallel.calls) >= 2


async def test_a_multi_turn_case_on_the_runtime_runs_bfcls_classes_turn_by_turn(
    tmp_path: Path,
) -> None:
    from forge_rt.clients import LlamaServerClient

    case = next(c for c in sample_cases(MULTI_TURN, 10, split="all") if len(c.turns) <= 4)
    execute = checkers().execute_multi_turn_func_call
    replies: list[SimReply] = []
    with executed_instances("test_truth_rt"):
        for turn in case.ground_truth:
            replies += [SimReply(tool_calls=(_wire(case, _parsed(case, text)),)) for text in turn]
            results, _ = execute(
                turn, case.initial_config, list(case.involved_classes), "test_truth_rt", case.id
            )
            summary = "Done: " + "; ".join(results)
            replies.append(
                SimReply(tool_calls=(SimToolCall(name="respond", arguments={"message": summary}),))
            )
    out = tmp_path / "mt.jsonl"
    plan = BfclPlan(
        backend="sim", model="sim", cases=[case], ablations=["unconstrained"], runs=1, out=out,
        route="runtime",
    )  # fmt: skip
    with trio.fail_after(60):
        async with (
            SimBackend.serve(SimConfig(script={_first_user_text(case): replies})) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            backend = BackendConfig(url=sim.url, kind="llamaserver")
            [record] = await run_bfcl(plan, backend, client=client)
    assert record.correct, record.reason
    assert len(record.calls) == len(case.turns)
    assert record.tool_calls == sum(len(t) for t in case.ground_truth)


@pytest.mark.parametrize("category", [*SINGLE_TURN, *MULTI_TURN])
def test_every_case_is_a_valid_runtime_workflow(category: str) -> None:
    """Each case's tools pass the runtime's own schema checks, so no case aborts a run."""
    from forge_rt.eval import ablation
    from forge_rt.eval.bfcl._runtime import _workflow

    for case in load_category(category):
        workflow = _workflow(case, ablation("full"), [], instance_prefix="unused")
        assert set(workflow.tools) == set(case.names)
        assert workflow.terminal_tools >= ({"respond"} if category in SINGLE_TURN else set())


async def test_a_request_the_backend_refuses_fails_that_case_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """A prompt longer than the context is a 400 for that case; the next case still runs."""
    cases = sample_cases(["simple"], 2, split="dev", seed=3)
    out = tmp_path / "ctx.jsonl"
    plan = BfclPlan(
        backend="sim", model="sim", cases=cases, ablations=["full", "bare"], runs=1, out=out
    )
    with trio.fail_after(60):
        async with SimBackend.serve(SimConfig(script=_scripts(cases), n_ctx=64)) as sim:
            records = await run_bfcl(plan, BackendConfig(url=sim.url, kind="llamaserver"))
    assert len(records) == 4
    for record in records:
        assert not record.completed
        assert record.checker["error_type"] == "forge_rt:no_answer"
    assert {r.error_type for r in records if r.ablation == "bare"} == {"exceed_context_size_error"}
    assert {r.error_type for r in records if r.ablation == "full"} == {"backend_rejected_request"}


async def test_a_failing_backend_stops_the_run_with_backend_error(tmp_path: Path) -> None:
    from forge_rt.backends.sim import Fault
    from forge_rt.errors import BackendError

    cases = sample_cases(["simple"], 2, split="dev", seed=3)
    out = tmp_path / "down.jsonl"
    plan = BfclPlan(backend="sim", model="sim", cases=cases, ablations=["bare"], runs=1, out=out)
    config = SimConfig(script=_scripts(cases), fault_rates={Fault.HTTP_500: 1.0})
    with trio.fail_after(60), pytest.raises(BackendError, match="500"):
        async with SimBackend.serve(config) as sim:
            await run_bfcl(plan, BackendConfig(url=sim.url, kind="llamaserver"))
    assert list(read_records(out)) == []


async def _one_irrelevance_case(tmp_path: Path, replies: list[SimReply]) -> RunRecord:
    """The record of one dev irrelevance case through the proxy, the model scripted."""
    cases = [
        c for c in sample_cases(SINGLE_TURN, 2, split="dev", seed=1) if c.check == "irrelevance"
    ]
    out = tmp_path / "bfcl.jsonl"
    plan = BfclPlan(
        backend="sim", model="sim", cases=cases[:1], ablations=["full"], runs=1, out=out
    )
    with trio.fail_after(60):
        script = {_first_user_text(cases[0]): replies}
        async with SimBackend.serve(SimConfig(script=script)) as sim:
            await run_bfcl(plan, BackendConfig(url=sim.url, kind="llamaserver"))
    (record,) = read_records(out)
    return record


async def test_a_record_counts_the_rules_that_decided_its_replies(tmp_path: Path) -> None:
    """The proxy names the rules that decided a request's replies (``x-forge-rules``); the
    record of the case holds their counts."""
    record = await _one_irrelevance_case(tmp_path, [SimReply(text=DECLINE)])  # prose, no call
    assert record.correct
    assert record.rules == {"prose_answers": 1}


async def test_a_record_counts_the_replies_stopped_for_repeating_themselves(
    tmp_path: Path,
) -> None:
    """A reply the proxy cut off because it repeated itself is counted in the case's record
    (``x-forge-repetition-stops``), as the runtime's records count it; here the looping text
    is the answer, written once (``cut_answers``)."""
    looping = " ".join(["No tool here answers that. The lamps of Vell stay lit."] * 40)
    record = await _one_irrelevance_case(tmp_path, [SimReply(text=looping)])
    assert (record.repetition_stops, record.inferences) == (1, 1)
    assert record.rules == {"cut_answers": 1}
    assert record.output == "No tool here answers that. The lamps of Vell stay lit."
    assert record.correct
