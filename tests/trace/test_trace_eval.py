"""The eval writes one trace per run, names it in the record, and links failed runs to it."""

from __future__ import annotations

import functools
from pathlib import Path

import trio

from forge_rt.backends.sim import FailureRates
from forge_rt.eval import EvalPlan, ablation, read_records, run_eval, run_trace_path, sim_client
from forge_rt.eval._report import build_report, render_html
from forge_rt.eval.scenarios import select
from forge_rt.trace import replay

# Rates that make the sim's model fail often: bare text, bad JSON, premature answers.
ROUGH = FailureRates(bare_text=0.25, malformed_json=0.15, premature_terminal=0.15)


def _plan(out: Path) -> EvalPlan:
    return EvalPlan(
        backend="sim",
        model="sim",
        scenarios=select(["basic_2step", "single_lookup", "ordered_steps"]),
        ablations=[ablation("unconstrained"), ablation("no_nudge")],
        runs=2,
        out=out,
    )


async def test_each_run_has_a_trace_that_replays_unchanged(tmp_path: Path) -> None:
    """Every record names its own trace file; replaying each finds every decision the same."""
    out = tmp_path / "r.jsonl"
    with trio.fail_after(60):
        await run_eval(_plan(out), functools.partial(sim_client, rates=ROUGH))
    records = list(read_records(out))
    assert len(records) == 12
    for r in records:
        assert (
            r.trace
            == run_trace_path(out, r.scenario, r.ablation, r.run).relative_to(tmp_path).as_posix()
        )
        report = replay(tmp_path / r.trace)
        assert (True, r.inferences) == (report.same, report.replies), r.trace
    assert any(r.retries for r in records)  # the replies replayed include rejected ones


async def test_the_html_report_links_each_failed_run_to_its_trace(tmp_path: Path) -> None:
    """Each run that was not correct is listed with a link, relative to the report's folder."""
    out = tmp_path / "results" / "r.jsonl"
    out.parent.mkdir()
    with trio.fail_after(60):
        await run_eval(_plan(out), functools.partial(sim_client, rates=ROUGH))
    records = list(read_records(out))
    failed = [r for r in records if not r.correct]
    assert failed, "the rough rates make some runs fail"
    page = render_html(
        build_report(records), source=out, records=records, html_dir=tmp_path / "html"
    )
    assert f"<h2>Failed runs ({len(failed)})</h2>" in page
    for r in failed:
        assert f'<a href="../results/{r.trace}">' in page
