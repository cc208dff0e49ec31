"""Eval reports: figures per group, the terminal table, the self-contained HTML and its SVGs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from forge_rt.eval import RunRecord, paired_mcnemar, wilson
from forge_rt.eval._meta import Invocation
from forge_rt.eval._report import build_report, failure_kind, render_html, report_table
from forge_rt.eval._svg import Bar, Series, bar_chart, heat_colour


def _record(ablation: str, scenario: str, run: int, correct: bool, **fields: object) -> RunRecord:
    tier = {"basic_2step": "plumbing", "tool_selection": "quality"}[scenario]
    values: dict[str, object] = {
        "scenario": scenario,
        "tags": (tier,),
        "run": run,
        "ablation": ablation,
        "backend": "sim",
        "model": "sim",
        "completed": correct,
        "correct": correct,
        "ideal_calls": 2,
        "tool_calls": 2 if correct else 0,
    }
    values.update(fields)
    return RunRecord(**values)  # type: ignore[arg-type]


def _records() -> list[RunRecord]:
    """full passes 6/6; bare passes 1/6 (one error, one call left in text, three wrong)."""
    out = [_record("full", s, r, True) for s in ("basic_2step", "tool_selection") for r in range(3)]
    out += [
        _record("bare", "basic_2step", 0, True, rescued={"bare_json": 1}),
        _record("bare", "basic_2step", 1, False, error_type="ToolCallError"),
        _record(
            "bare", "basic_2step", 2, False, reason="ended in text holding an unparsed call of 'x'"
        ),
        *(_record("bare", "tool_selection", r, False, completed=True) for r in range(3)),
    ]
    out.append(_record("full", "basic_2step", 0, True, model="other", retries={"retry_nudge": 2}))
    return out


def test_sections_split_by_backend_and_model_with_full_first() -> None:
    """One section per (backend, model); rows in preset order; McNemar against full."""
    records = _records()
    sections = build_report(reversed(records))
    assert [s.key for s in sections] == [
        (("backend", "sim"), ("model", "other")),
        (("backend", "sim"), ("model", "sim")),
    ]
    main = sections[1]
    assert main.labels == ["full", "bare"]
    full, bare = main.rows
    assert (full.summary.runs, full.summary.completed, full.summary.correct) == (6, 6, 6)
    assert (bare.summary.runs, bare.summary.completed, bare.summary.correct) == (6, 4, 1)
    assert full.summary.mcnemar_vs_full is None
    expected_p = paired_mcnemar(
        [r for r in records if r.model == "sim" and r.ablation == "full"],
        [r for r in records if r.ablation == "bare"],
    )
    assert expected_p == bare.summary.mcnemar_vs_full
    assert bare.failures == {"wrong answer": 3, "ToolCallError": 1, "call left in text": 1}
    assert bare.rescued == {"bare_json": 1}
    assert sections[0].rows[0].retries == {"retry_nudge": 2}


def test_scenario_and_tier_cells_count_passes() -> None:
    """The heatmap and tier table read per-scenario and per-tier pass counts, in suite order."""
    main = build_report(_records())[1]
    assert main.scenarios == [("plumbing", "basic_2step"), ("quality", "tool_selection")]
    cell = main.cells["basic_2step"]["bare"]
    assert (cell.runs, cell.completed, cell.correct) == (3, 1, 1)
    assert (
        main.tiers["quality"]["full"].correct,
        main.tiers["quality"]["bare"].completed,
    ) == (3, 3)


def test_grouping_by_tier_makes_a_section_per_tier_and_without_ablation_one_row() -> None:
    """--group-by decides sections; leaving out ablation pools every ablation into 'all'."""
    by_tier = build_report(_records(), ["model", "tier", "ablation"])
    assert [tuple(v for _, v in s.key) for s in by_tier] == [
        ("other", "plumbing"),
        ("sim", "plumbing"),
        ("sim", "quality"),
    ]
    pooled = build_report(_records(), ["model"])
    assert pooled[1].labels == ["all"]
    assert pooled[1].rows[0].summary.runs == 12
    with pytest.raises(ValueError, match=r"^cannot group by \['colour'\]; choose from \["):
        build_report(_records(), ["colour"])


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"correct": True}, None),
        ({"error_type": "MaxIterationsError"}, "MaxIterationsError"),
        ({"completed": True}, "wrong answer"),
        ({"reason": "ended in text holding an unparsed call of 'f'"}, "call left in text"),
        (
            {"reason": "ended in text, not in its terminal tool ['report']"},
            "text, no terminal call",
        ),
        ({"reason": "1 background workflow(s) did not finish"}, "background unfinished"),
    ],
    ids=["correct", "error", "wrong", "call-in-text", "text", "background"],
)
def test_failure_kinds(fields: dict[str, object], kind: str | None) -> None:
    """Each way a run goes wrong gets a short name for the 'top failures' column."""
    values: dict[str, object] = {"correct": False, "completed": False} | fields
    record = _record("bare", "basic_2step", 0, **values)  # type: ignore[arg-type]
    assert kind == failure_kind(record)


def test_terminal_table_shows_every_column_figure() -> None:
    """The rich table prints runs, rates with CIs, efficiency, waste, pass^3, p, wall times,
    tokens and failures."""
    section = build_report(_records())[1]
    console = Console(record=True, width=220)
    console.print(report_table(section))
    text = console.export_text()
    lo, hi = wilson(4, 6)
    bare_line = next(line for line in text.splitlines() if "│ bare" in line)
    cells = [c.strip() for c in bare_line.strip("│ ").split("│")]
    p = section.rows[1].summary.mcnemar_vs_full
    assert [
        "bare",
        "6",
        f"66.7% [{lo * 100:.0f}-{hi * 100:.0f}]",
        "16.7% [3-56]",
        "1.00",
        "0",
        "0.00",
        f"{p:.3f}",
        "0.0 / 0.0",  # the records carry no wall times or tokens
        "0",
        "wrong answer 3, ToolCallError 1, call left in text 1",
    ] == cells
    assert "sim · sim" not in text  # the model named like its backend is said once
    assert re.search(r"│ full +│ +6 │ +100\.0% \[61-100\] │", text)


def test_html_report_is_self_contained_with_figures_charts_and_commands(tmp_path: Path) -> None:
    """One HTML file: the table figures, two SVG charts per section, the commands; no scripts."""
    invocation = Invocation(
        command="forge-rt eval --runs 3 -a full,bare",
        started="2026-11-29T10:00:00+00:00",
        finished="2026-11-29T10:01:00+00:00",
        outcome="done",
        settings={"backend": "sim", "model": "sim", "sim_rates": {"bare_json": 0.15}},
        scenarios=["basic_2step"],
        ablations=["full", "bare"],
        runs=3,
        version="0.1.0",
        new_records=12,
    )
    sections = build_report(_records())
    page = render_html(sections, source=tmp_path / "r.jsonl", invocations=[invocation])
    assert page.startswith("<!DOCTYPE html>")
    assert 2 * len(sections) == page.count("<svg ")
    assert "Completion and score (whiskers: 95% CI)" in page
    assert "Pass rate per scenario and ablation" in page
    assert '16.7% <span class="ci">[3-56]</span>' in page
    assert "forge-rt eval --runs 3 -a full,bare" in page
    assert "sim_rates: bare_json=0.15" in page
    assert ">1/3</text>" in page  # the bare basic_2step heatmap cell
    assert "<script" not in page
    assert not re.search(r"""(src|href)=|url\(|@import""", page)
    assert [
        u for u in re.findall(r"https?://[^\s\"'<]+", page) if "www.w3.org/2000/svg" not in u
    ] == []


def test_html_without_a_sidecar_says_the_commands_are_unknown(tmp_path: Path) -> None:
    """Results written without the CLI still render, and the page says what is missing."""
    page = render_html(build_report(_records()), source=tmp_path / "r.jsonl")
    assert "the commands that produced them are unknown" in page


def test_heat_colours_run_from_red_to_green() -> None:
    """0 is red, 1 is green, out-of-range values are clamped."""
    assert (heat_colour(-1), heat_colour(2), heat_colour(0.5)) == ("#d73027", "#1a9850", "#fee08b")


def test_bar_chart_draws_a_bar_and_a_whisker_per_value() -> None:
    """Each bar has a rect, a whisker line with two caps and a tooltip with its interval."""
    svg = bar_chart(
        ["full", "bare"],
        [Series("completion", "#4878a8", [Bar(0.9, 0.8, 0.95), Bar(0.2, 0.1, 0.3)])],
        title="t",
    )
    assert svg.count("<g>") == 2
    assert "full completion: 90.0% (95% CI 80.0%-95.0%)" in svg
    with pytest.raises(ValueError, match=r"^every series needs one bar per category$"):
        bar_chart(["a"], [Series("s", "#000", [])], title="t")
