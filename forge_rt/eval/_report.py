"""Eval reports: the figures per group of runs, a terminal table, and a self-contained HTML page.

:func:`build_report` groups records (by backend, model and ablation unless told otherwise) into
:class:`Section` s -- one per backend and model, one :class:`Row` per ablation -- with the
scenario-by-ablation and tier-by-ablation pass counts the plots need. :func:`report_table`
renders a section as a rich table; :func:`render_html` renders every section as one HTML file
(inline CSS and SVG, no scripts, nothing fetched) that a person opens in a browser.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

import msgspec
from rich.table import Table

from forge_rt import __version__
from forge_rt.eval._ablation import ABLATIONS
from forge_rt.eval._meta import Invocation, utc_now
from forge_rt.eval._metrics import Summary, paired_mcnemar, summarise
from forge_rt.eval._record import RunRecord
from forge_rt.eval._svg import Bar, Series, bar_chart, heat_colour, heatmap, text_colour

__all__ = [
    "DEFAULT_GROUP_BY",
    "GROUP_FIELDS",
    "Row",
    "Section",
    "Tally",
    "build_report",
    "failure_kind",
    "format_p",
    "render_html",
    "report_table",
]

GROUP_FIELDS = ("backend", "model", "ablation", "tier")
"""Record fields a report can group by (``tier`` is a scenario's first tag)."""

DEFAULT_GROUP_BY = ("backend", "model", "ablation")

ALL_ROWS = "all"
"""The row label when ``ablation`` is not a grouping field (every ablation in one row)."""


class Tally(msgspec.Struct, kw_only=True):
    """How many runs there were, how many completed and how many were correct."""

    runs: int = 0
    completed: int = 0
    correct: int = 0

    def add(self, record: RunRecord) -> None:
        self.runs += 1
        self.completed += record.completed
        self.correct += record.correct

    @property
    def pass_rate(self) -> float:
        return self.correct / self.runs if self.runs else 0.0

    @property
    def completion(self) -> float:
        return self.completed / self.runs if self.runs else 0.0


class Row(msgspec.Struct, kw_only=True):
    """One table row: the figures of one ablation (or of every run, see :data:`ALL_ROWS`).

    ``failures`` counts why runs were not correct (see :func:`failure_kind`), most common
    first; ``rescued`` the text dialects calls were rescued from; ``retries`` the retry causes;
    ``rules`` the guardrail rules that decided replies;
    the ``*_ttft_s`` fields are mean first-token latencies of the contention scenarios.
    """

    label: str
    summary: Summary
    failures: dict[str, int]
    rescued: dict[str, int]
    retries: dict[str, int]
    rules: dict[str, int]
    tokens_per_run: float
    wall_s_per_run: float
    high_ttft_s: float | None = None
    background_ttft_s: float | None = None


class Section(msgspec.Struct, kw_only=True):
    """Every row of one group (by default one backend and model) and its per-scenario figures.

    ``scenarios`` lists (tier, scenario) in suite order; ``cells[scenario][row]`` and
    ``tiers[tier][row]`` are the pass counts behind the heatmap and the tier table.
    """

    key: tuple[tuple[str, str], ...]
    rows: list[Row]
    scenarios: list[tuple[str, str]]
    cells: dict[str, dict[str, Tally]]
    tiers: dict[str, dict[str, Tally]]

    @property
    def title(self) -> str:
        # A value equal to the one before says nothing new (the sim's model is named "sim").
        values = [value for _, value in self.key]
        shown = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
        return " · ".join(shown) or "all runs"

    @property
    def labels(self) -> list[str]:
        return [row.label for row in self.rows]


def failure_kind(record: RunRecord) -> str | None:
    """Why a run was not correct, as a short kind (None when it was correct).

    A typed error's class name; a benchmark checker's error type (BFCL's
    ``simple_function_checker:wrong_count``, ...); else how the run ended unfinished; else
    ``wrong answer``.
    """
    if record.correct:
        return None
    if record.error_type:
        return record.error_type
    if record.checker.get("error_type"):
        return str(record.checker["error_type"])
    if record.completed:
        return "wrong answer"
    if record.reason.startswith("ended in text holding"):
        return "call left in text"
    if record.reason.startswith("ended in text"):
        return "text, no terminal call"
    if "background workflow" in record.reason:
        return "background unfinished"
    return "unfinished"


def _suite_order() -> dict[str, int]:
    from forge_rt.eval.scenarios import SCENARIOS

    return {name: i for i, name in enumerate(SCENARIOS)}


def _ablation_order(label: str) -> tuple[int, str]:
    names = list(ABLATIONS)
    return (names.index(label) if label in names else len(names), label)


def _field(record: RunRecord, name: str) -> str:
    if name == "tier":
        return record.tags[0] if record.tags else "untagged"
    value: str = getattr(record, name)
    return value


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _counts(dicts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for d in dicts:
        total.update(d)
    return dict(total.most_common())


def _row(label: str, records: list[RunRecord]) -> Row:
    kinds = Counter(k for r in records if (k := failure_kind(r)) is not None)
    n = len(records)
    return Row(
        label=label,
        summary=summarise(records),
        failures=dict(kinds.most_common()),
        rescued=_counts(r.rescued for r in records),
        retries=_counts(r.retries for r in records),
        rules=_counts(r.rules for r in records),
        tokens_per_run=sum(r.prompt_tokens + r.completion_tokens for r in records) / n,
        wall_s_per_run=sum(r.wall_s for r in records) / n,
        high_ttft_s=_mean(r.high_priority_ttft_s for r in records),
        background_ttft_s=_mean(r.background_ttft_s for r in records),
    )


def build_report(
    records: Iterable[RunRecord], group_by: Sequence[str] = DEFAULT_GROUP_BY
) -> list[Section]:
    """Group ``records`` into sections and rows and compute every figure the report shows.

    ``group_by`` names fields from :data:`GROUP_FIELDS`; ``ablation`` makes the rows, the
    others make the sections. Rows come in preset order (``full`` first); each non-full row
    gets McNemar's p against ``full`` of the same section, paired by (scenario, run).
    """
    unknown = [g for g in group_by if g not in GROUP_FIELDS]
    if unknown:
        raise ValueError(f"cannot group by {unknown}; choose from {list(GROUP_FIELDS)}")
    section_fields = [g for g in group_by if g != "ablation"]
    by_row = "ablation" in group_by
    grouped: dict[tuple[str, ...], dict[str, list[RunRecord]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for record in records:
        key = tuple(_field(record, f) for f in section_fields)
        grouped[key][record.ablation if by_row else ALL_ROWS].append(record)
    order = _suite_order()
    sections = []
    for key in sorted(grouped):
        groups = grouped[key]
        labels = sorted(groups, key=_ablation_order)
        rows = [_row(label, groups[label]) for label in labels]
        if by_row and "full" in groups:
            for row in rows:
                if row.label != "full":
                    row.summary.mcnemar_vs_full = paired_mcnemar(groups["full"], groups[row.label])
        cells: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
        tiers: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
        tier_of: dict[str, str] = {}
        for label in labels:
            for record in groups[label]:
                tier = _field(record, "tier")
                tier_of[record.scenario] = tier
                cells[record.scenario][label].add(record)
                tiers[tier][label].add(record)
        scenarios = sorted(
            ((tier_of[s], s) for s in cells), key=lambda ts: (order.get(ts[1], len(order)), ts[1])
        )
        tier_names = list(dict.fromkeys(t for t, _ in scenarios))
        sections.append(
            Section(
                key=tuple(zip(section_fields, key, strict=True)),
                rows=rows,
                scenarios=scenarios,
                cells={s: dict(cells[s]) for _, s in scenarios},
                tiers={t: dict(tiers[t]) for t in tier_names},
            )
        )
    return sections


# --- formatting ----------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _ci(interval: tuple[float, float]) -> str:
    return f"[{interval[0] * 100:.0f}-{interval[1] * 100:.0f}]"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def format_p(p: float | None) -> str:
    """A McNemar p-value for a table cell (``-`` where there is none)."""
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _top(counts: dict[str, int], n: int = 3) -> str:
    return ", ".join(f"{k} {v}" for k, v in list(counts.items())[:n]) or "-"


COLUMNS = (
    "ablation",
    "runs",
    "completion [95% CI]",
    "score [95% CI]",
    "efficiency",
    "wasted calls",
    "pass^3",
    "McNemar p vs full",
    "wall p50/p95 s",
    "tokens/run",
    "top failures",
)


def _cells(row: Row) -> list[str]:
    s = row.summary
    return [
        row.label,
        str(s.runs),
        f"{_pct(s.completion)} {_ci(s.completion_ci)}",
        f"{_pct(s.score)} {_ci(s.score_ci)}",
        _num(s.efficiency),
        str(s.wasted_calls),
        _num(s.pass_hat_3),
        format_p(s.mcnemar_vs_full),
        _walls(s),
        _count(s.tokens_mean),
        _top(row.failures),
    ]


def _walls(s: Summary) -> str:
    return f"{s.wall_p50_s:.1f} / {s.wall_p95_s:.1f}" if s.runs else "-"


def _count(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def report_table(section: Section) -> Table:
    """A rich table of one section: one row per ablation, the columns of :data:`COLUMNS`."""
    table = Table(
        title=section.title,
        title_justify="left",
        caption=(
            "completion: finished without error; score: correct / attempted; efficiency: ideal "
            "/ actual tool calls over correct runs; pass^3: chance 3 runs of a scenario all pass"
        ),
        caption_justify="left",
    )
    for name in COLUMNS:
        numeric = name not in ("ablation", "top failures")
        table.add_column(name, justify="right" if numeric else "left", overflow="fold")
    for row in section.rows:
        table.add_row(*_cells(row))
    return table


# --- HTML ----------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1280px; padding: 0 16px; color: #1a1a1a; line-height: 1.4; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 36px; border-bottom: 2px solid #333; padding-bottom: 4px; }
h3 { font-size: 15px; margin-top: 24px; }
.meta { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; }
td.l, th.l { text-align: left; }
td.wrap { white-space: normal; text-align: left; max-width: 360px; }
tr.full td { font-weight: 600; }
.ci { color: #666; font-size: 11px; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
code, pre { background: #f6f6f6; padding: 2px 4px; border-radius: 3px; font-size: 12px; }
pre { padding: 8px; overflow-x: auto; white-space: pre-wrap; }
dl.legend dt { font-weight: 600; } dl.legend dd { margin: 0 0 6px 16px; }
"""

_LEGEND = (
    (
        "completion",
        "runs that finished (terminal tool succeeded, or a prose answer where the "
        "terminal tool is respond) without an error, over runs attempted",
    ),
    ("score", "runs whose final answer the scenario's judge accepted, over runs attempted"),
    ("95% CI", "Wilson score interval"),
    ("efficiency", "ideal tool calls / actual tool calls, over correct runs (1.00 = no waste)"),
    ("wasted calls", "tool calls beyond each scenario's ideal count, summed over runs"),
    (
        "pass^3",
        "chance that 3 runs of the same scenario all pass (unbiased estimate from "
        "scenarios with at least 3 runs)",
    ),
    ("wall p50/p95 s", "median and 95th-percentile wall time of a run, in seconds"),
    ("tokens/run", "prompt + completion tokens per run, as the backend reported them"),
    (
        "McNemar p vs full",
        "exact two-sided McNemar test of correctness against the full "
        "ablation, paired by (scenario, run); small p: the difference is not chance",
    ),
)


def _table_html(section: Section) -> str:
    head = "".join(
        f'<th class="{"l" if n in ("ablation", "top failures") else ""}">{escape(n)}</th>'
        for n in COLUMNS
    )
    body = []
    for row in section.rows:
        s = row.summary
        cls = ' class="full"' if row.label == "full" else ""
        preset = ABLATIONS.get(row.label)
        tip = f' title="{escape(preset.description)}"' if preset is not None else ""
        body.append(
            f"<tr{cls}>"
            f'<td class="l"{tip}>{escape(row.label)}</td>'
            f"<td>{s.runs}</td>"
            f'<td>{_pct(s.completion)} <span class="ci">{_ci(s.completion_ci)}</span></td>'
            f'<td>{_pct(s.score)} <span class="ci">{_ci(s.score_ci)}</span></td>'
            f"<td>{_num(s.efficiency)}</td>"
            f"<td>{s.wasted_calls}</td>"
            f"<td>{_num(s.pass_hat_3)}</td>"
            f"<td>{format_p(s.mcnemar_vs_full)}</td>"
            f"<td>{_walls(s)}</td>"
            f"<td>{_count(s.tokens_mean)}</td>"
            f'<td class="wrap">{escape(_top(row.failures, 5))}</td>'
            "</tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _tier_html(section: Section) -> str:
    labels = section.labels
    head = '<th class="l">tier</th>' + "".join(f"<th>{escape(label)}</th>" for label in labels)
    body = []
    for tier, by_label in section.tiers.items():
        cells = [f'<td class="l">{escape(tier)}</td>']
        for label in labels:
            tally = by_label.get(label)
            if tally is None:
                cells.append("<td></td>")
                continue
            rate = tally.pass_rate
            cells.append(
                f'<td style="background:{heat_colour(rate)};color:{text_colour(rate)}" '
                f'title="{tally.correct}/{tally.runs} correct, {tally.completed}/{tally.runs} '
                f'completed">{_pct(rate)} <small>({_pct(tally.completion)} done)</small></td>'
            )
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (
        "<p class='meta'>Score per tier (completion in brackets).</p>"
        f"<table><tr>{head}</tr>{''.join(body)}</table>"
    )


def _counts_html(section: Section, attribute: str, what: str) -> str:
    per_row: dict[str, dict[str, int]] = {r.label: getattr(r, attribute) for r in section.rows}
    keys = list(_counts(per_row.values()))
    if not keys:
        return f"<p class='meta'>No {escape(what)} in these runs.</p>"
    head = f'<th class="l">{escape(what)}</th>' + "".join(
        f"<th>{escape(label)}</th>" for label in per_row
    )
    body = "".join(
        f'<tr><td class="l">{escape(k)}</td>'
        + "".join(f"<td>{per_row[label].get(k, 0) or ''}</td>" for label in per_row)
        + "</tr>"
        for k in keys
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _contention_html(section: Section) -> str:
    rows = [r for r in section.rows if r.high_ttft_s is not None]
    if not rows:
        return ""
    body = "".join(
        f'<tr><td class="l">{escape(r.label)}</td><td>{_num(r.high_ttft_s, 3)}</td>'
        f"<td>{_num(r.background_ttft_s, 3)}</td></tr>"
        for r in rows
    )
    return (
        "<h3>Contention: time to first token (s, mean)</h3>"
        '<table><tr><th class="l">ablation</th><th>high-priority request</th>'
        f"<th>background agents</th></tr>{body}</table>"
    )


def _charts_html(section: Section) -> str:
    labels = section.labels
    rows = section.rows
    bars = bar_chart(
        labels,
        [
            Series(
                "completion",
                "#4878a8",
                [Bar(r.summary.completion, *r.summary.completion_ci) for r in rows],
            ),
            Series("score", "#e49444", [Bar(r.summary.score, *r.summary.score_ci) for r in rows]),
        ],
        title="Completion and score (whiskers: 95% CI)",
    )
    cells: dict[tuple[str, str], tuple[float, str, str]] = {}
    for _, scenario in section.scenarios:
        for label, tally in section.cells[scenario].items():
            cells[(scenario, label)] = (
                tally.pass_rate,
                f"{tally.correct}/{tally.runs}",
                f"{scenario} under {label}: {tally.correct}/{tally.runs} correct, "
                f"{tally.completed}/{tally.runs} completed",
            )
    grid = heatmap(
        [s for _, s in section.scenarios],
        labels,
        cells,
        title="Pass rate per scenario and ablation",
        row_labels={s: t for t, s in section.scenarios},
    )
    return f'<div class="charts"><div>{bars}</div><div>{grid}</div></div>'


def _flat(value: object) -> str:
    """A settings value as text: mappings as ``k=v`` lists, zero rates left out."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v not in (None, 0, 0.0)) or "none"
    return str(value)


def _invocations_html(invocations: Sequence[Invocation]) -> str:
    if not invocations:
        return (
            "<p class='meta'>No sidecar (<code>.meta.json</code>) next to the results: the "
            "commands that produced them are unknown.</p>"
        )
    items = []
    for inv in invocations:
        settings = "; ".join(
            f"{k}: {_flat(v)}" for k, v in sorted(inv.settings.items()) if v not in (None, {})
        )
        items.append(
            f"<li><pre>{escape(inv.command)}</pre>"
            f"<span class='meta'>{escape(inv.started)} to {escape(inv.finished or '?')} - "
            f"{escape(inv.outcome)} - {inv.new_records} new runs - forge-rt "
            f"{escape(inv.version)} at {escape(inv.commit or 'an unknown commit')}"
            f"<br>{escape(settings)}</span></li>"
        )
    return f"<ol>{''.join(items)}</ol>"


def _failed_runs_html(records: Sequence[RunRecord], *, source: Path, html_dir: Path) -> str:
    """The runs that were not correct, each linked to its trace (``forge-rt trace show`` and
    ``forge-rt replay`` read it)."""
    failed = [r for r in records if not r.correct]
    if not failed:
        return ""
    rows = []
    for r in failed:
        if r.trace is not None:
            href = os.path.relpath(source.parent / r.trace, html_dir)
            link = f'<a href="{escape(Path(href).as_posix())}">{escape(r.trace)}</a>'
        elif r.replies:
            # A benchmark case: what the client received and the calls read from it.
            said = json.dumps(r.calls) if r.calls else json.dumps(r.replies[-1])
            link = f"<code>{escape(said[:300])}</code>"
        else:
            link = "(no trace)"
        why = r.error_type or failure_kind(r) or ""
        rows.append(
            f"<tr><td class='l'>{escape(r.ablation)}</td><td class='l'>{escape(r.scenario)}</td>"
            f"<td>{r.run}</td><td class='l wrap'>{escape(why)}: {escape((r.reason or r.error or '')[:200])}"
            f"</td><td class='l'>{link}</td></tr>"
        )
    return (
        f"<h2>Failed runs ({len(failed)})</h2><table><tr><th class='l'>ablation</th>"
        "<th class='l'>scenario</th><th>run</th><th class='l'>why</th>"
        "<th class='l'>trace, or the calls received</th>"
        f"</tr>{''.join(rows)}</table>"
    )


def render_html(
    sections: Sequence[Section],
    *,
    source: Path,
    invocations: Sequence[Invocation] = (),
    records: Sequence[RunRecord] = (),
    html_dir: Path | None = None,
) -> str:
    """The whole report as one HTML document (inline CSS and SVG; no scripts, no fetches).

    ``records``: the runs, of which the failed ones are listed with a link to their trace
    (relative to ``html_dir``, the folder the report is written to).
    """
    legend = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in _LEGEND)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>forge-rt eval report - {escape(source.name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>forge-rt eval report</h1>",
        f"<p class='meta'>Results: <code>{escape(str(source))}</code> - "
        f"{sum(r.summary.runs for s in sections for r in s.rows)} runs - "
        f"generated {escape(utc_now())} by forge-rt {escape(__version__)}</p>",
    ]
    for section in sections:
        parts += [
            f"<h2>{escape(section.title)}</h2>",
            _table_html(section),
            _charts_html(section),
            "<h3>Score by tier</h3>",
            _tier_html(section),
            "<h3>Rescued calls by dialect</h3>",
            _counts_html(section, "rescued", "dialect"),
            "<h3>Retries by cause</h3>",
            _counts_html(section, "retries", "cause"),
            "<h3>Verdicts by guardrail rule</h3>",
            _counts_html(section, "rules", "rule"),
            _contention_html(section),
        ]
    presets = "".join(
        f"<dt>{escape(name)}</dt><dd>{escape(preset.description)}</dd>"
        for name, preset in ABLATIONS.items()
    )
    parts += [
        _failed_runs_html(records, source=source, html_dir=html_dir or source.parent),
        "<h2>How these results were made</h2>",
        _invocations_html(invocations),
        "<h2>What the columns mean</h2>",
        f'<dl class="legend">{legend}</dl>',
        "<h2>Ablations</h2>",
        f'<dl class="legend">{presets}</dl>',
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)
