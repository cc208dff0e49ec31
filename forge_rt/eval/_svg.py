"""Small inline-SVG charts for the HTML report: grouped bars with interval whiskers, a heatmap.

No JavaScript and no external files: the report must open from disk on a machine without a
network. Hover text uses SVG ``<title>`` elements, which browsers show as native tooltips.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from html import escape

import msgspec

__all__ = ["Bar", "Series", "bar_chart", "heat_colour", "heatmap", "text_colour"]

# Red (0) through yellow (0.5) to green (1): a failing cell reads as a failing cell.
_STOPS = ((0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80)))


def heat_colour(value: float) -> str:
    """The cell colour of a rate in [0, 1] as ``#rrggbb``."""
    value = min(1.0, max(0.0, value))
    for (x0, c0), (x1, c1) in itertools.pairwise(_STOPS):
        if value <= x1:
            t = (value - x0) / (x1 - x0)
            r, g, b = (round(a + (b_ - a) * t) for a, b_ in zip(c0, c1, strict=True))
            return f"#{r:02x}{g:02x}{b:02x}"
    raise AssertionError("unreachable: the last stop is 1.0")


def text_colour(value: float) -> str:
    """Black or white, whichever reads better on :func:`heat_colour` of ``value``."""
    return "#ffffff" if value < 0.2 or value > 0.8 else "#1a1a1a"


class Bar(msgspec.Struct, frozen=True):
    """One bar: a value with its interval, all in [0, 1]."""

    value: float
    low: float
    high: float


class Series(msgspec.Struct, frozen=True):
    """One bar per category, drawn in ``colour`` and named ``name`` in the legend."""

    name: str
    colour: str
    bars: Sequence[Bar]


def _attrs(**values: object) -> str:
    return " ".join(
        f'{k.rstrip("_").replace("_", "-")}="{escape(str(v))}"' for k, v in values.items()
    )


def bar_chart(
    categories: Sequence[str], series: Sequence[Series], *, title: str, bar_width: int = 26
) -> str:
    """Grouped vertical bars (0-100%) with whiskers from each bar's ``low`` to ``high``."""
    if any(len(s.bars) != len(categories) for s in series):
        raise ValueError("every series needs one bar per category")
    left, right, top, bottom = 48, 16, 60, 72
    group = bar_width * len(series) + 18
    # Wide enough for the title (about 8 px per bold character at 13 px) and the legend.
    plot_w = max(group * len(categories), 8 * len(title), 120 * len(series))
    plot_h = 220
    width, height = left + plot_w + right, top + plot_h + bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" {_attrs(width=width, height=height)} '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        'font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f"<text {_attrs(x=left, y=16, font_size=13, font_weight='bold')}>{escape(title)}</text>",
    ]
    for tick in range(0, 101, 20):
        y = top + plot_h - plot_h * tick / 100
        out.append(
            f"<line {_attrs(x1=left, x2=left + plot_w, y1=f'{y:.1f}', y2=f'{y:.1f}', stroke='#ddd')}/>"
        )
        out.append(
            f"<text {_attrs(x=left - 6, y=f'{y + 4:.1f}', text_anchor='end', fill='#555')}>{tick}%</text>"
        )
    for i, s in enumerate(series):
        x = left + i * 120
        out.append(f"<rect {_attrs(x=x, y=28, width=10, height=10, fill=s.colour)}/>")
        out.append(f"<text {_attrs(x=x + 14, y=37)}>{escape(s.name)}</text>")
    for c, category in enumerate(categories):
        gx = left + c * group + 9
        for i, s in enumerate(series):
            bar = s.bars[c]
            x = gx + i * bar_width
            h = plot_h * bar.value
            y = top + plot_h - h
            tip = f"{category} {s.name}: {bar.value:.1%} (95% CI {bar.low:.1%}-{bar.high:.1%})"
            out.append("<g>")
            out.append(f"<title>{escape(tip)}</title>")
            out.append(
                f"<rect {_attrs(x=x, y=f'{y:.1f}', width=bar_width - 4, height=f'{h:.1f}', fill=s.colour)}/>"
            )
            cx = x + (bar_width - 4) / 2
            y_lo = top + plot_h - plot_h * bar.low
            y_hi = top + plot_h - plot_h * bar.high
            out.append(
                f"<line {_attrs(x1=f'{cx:.1f}', x2=f'{cx:.1f}', y1=f'{y_lo:.1f}', y2=f'{y_hi:.1f}', stroke='#222', stroke_width=1.2)}/>"
            )
            for yy in (y_lo, y_hi):
                out.append(
                    f"<line {_attrs(x1=f'{cx - 4:.1f}', x2=f'{cx + 4:.1f}', y1=f'{yy:.1f}', y2=f'{yy:.1f}', stroke='#222', stroke_width=1.2)}/>"
                )
            out.append(
                f"<text {_attrs(x=f'{cx:.1f}', y=f'{min(y, y_hi) - 3:.1f}', text_anchor='middle', font_size=9, fill='#333')}>"
                f"{bar.value * 100:.0f}</text>"
            )
            out.append("</g>")
        label_x = gx + bar_width * len(series) / 2
        label_y = top + plot_h + 14
        out.append(
            f"<text {_attrs(x=f'{label_x:.1f}', y=label_y, text_anchor='end', transform=f'rotate(-30 {label_x:.1f} {label_y})')}>"
            f"{escape(category)}</text>"
        )
    out.append(
        f"<line {_attrs(x1=left, x2=left + plot_w, y1=top + plot_h, y2=top + plot_h, stroke='#444')}/>"
    )
    out.append("</svg>")
    return "\n".join(out)


def heatmap(
    rows: Sequence[str],
    columns: Sequence[str],
    cells: Mapping[tuple[str, str], tuple[float, str, str]],
    *,
    title: str,
    row_labels: Mapping[str, str] | None = None,
) -> str:
    """A grid coloured by rate: ``cells[(row, column)] = (rate, text in the cell, hover text)``.

    Missing cells are drawn blank (that combination was not run). ``row_labels`` maps a row to
    a small grey prefix (the scenario's tier).
    """
    cell_w = max(64, 8 + 8 * max((len(c) for c in columns), default=0))
    cell_h = 20
    label_w = 8 + 7 * max(
        (len(r) + len((row_labels or {}).get(r, "")) + 1 for r in rows), default=10
    )
    top = 64
    width = label_w + cell_w * len(columns) + 150
    height = top + cell_h * len(rows) + 16
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" {_attrs(width=width, height=height)} '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        'font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f"<text {_attrs(x=0, y=16, font_size=13, font_weight='bold')}>{escape(title)}</text>",
    ]
    for j, column in enumerate(columns):
        x = label_w + j * cell_w + cell_w / 2
        out.append(
            f"<text {_attrs(x=f'{x:.1f}', y=top - 8, text_anchor='middle', font_weight='bold')}>"
            f"{escape(column)}</text>"
        )
    for i, row in enumerate(rows):
        y = top + i * cell_h
        prefix = (row_labels or {}).get(row)
        label = (
            f'<tspan fill="#888">{escape(prefix)} </tspan>{escape(row)}' if prefix else escape(row)
        )
        out.append(
            f"<text {_attrs(x=label_w - 6, y=y + cell_h - 6, text_anchor='end')}>{label}</text>"
        )
        for j, column in enumerate(columns):
            x = label_w + j * cell_w
            cell = cells.get((row, column))
            if cell is None:
                out.append(
                    f"<rect {_attrs(x=x, y=y, width=cell_w - 2, height=cell_h - 2, fill='#f4f4f4')}/>"
                )
                continue
            rate, text, tip = cell
            out.append("<g>")
            out.append(f"<title>{escape(tip)}</title>")
            out.append(
                f"<rect {_attrs(x=x, y=y, width=cell_w - 2, height=cell_h - 2, fill=heat_colour(rate))}/>"
            )
            out.append(
                f"<text {_attrs(x=x + (cell_w - 2) / 2, y=y + cell_h - 6, text_anchor='middle', fill=text_colour(rate))}>"
                f"{escape(text)}</text>"
            )
            out.append("</g>")
    # Legend: the colour scale from 0% to 100%.
    lx = label_w + cell_w * len(columns) + 24
    for k in range(11):
        out.append(
            f"<rect {_attrs(x=lx, y=top + k * 12, width=16, height=12, fill=heat_colour(1 - k / 10))}/>"
        )
    out.append(f"<text {_attrs(x=lx + 22, y=top + 10)}>100% pass</text>")
    out.append(f"<text {_attrs(x=lx + 22, y=top + 10 * 12 + 10)}>0% pass</text>")
    out.append("</svg>")
    return "\n".join(out)
