"""Every figure the README publishes says which command printed it and when.

The README's headline table (the first table under ``## Reliability, measured``) is the one place
it states how reliable forge_rt is. Each of its rows must hold a figure, the date it was measured
(``YYYY-MM-DD``) and the ``forge-rt ...`` command that measured it, in backticks, in the row
itself -- and the command must parse with today's CLI. A row of the project's own 30 scenarios must
say that they were tuned on.

Beyond the table, any percentage anywhere in the README (a paragraph, a table row, a recorded
terminal frame with the paragraph that introduces it) must name a date and a ``forge-rt`` command
in the same place. "Wilson 95%" is a confidence level, not a figure.

The checker runs on the README and on copies of it with a row's date or command cut out, so this
file fails if the checker itself stops catching a figure without its source.

``docs/index.md`` lists every page under ``docs/``: checked here too, with the README's links.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_docs_code import _parse

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HEADLINE = "## Reliability, measured"
DATE = re.compile(r"\b20\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b")
COMMAND = re.compile(r"`(forge-rt [^`]+)`")
PERCENT = re.compile(r"\d(?:\.\d+)?\s?%")
CONFIDENCE = re.compile(r"Wilson 95%|\[95%\]")  # the interval's level, not a measured figure
FIGURE = re.compile(r"\d+/\d+|\d(?:\.\d+)?%")  # runs or cases out of a total, or a percentage
TUNED_ON = "tuned on, not held out"


def _table_after(text: str, heading: str) -> list[tuple[int, str]]:
    """The body rows (line number, text) of the first table after ``heading``."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == heading)
    except StopIteration:
        return []
    rows: list[tuple[int, str]] = []
    in_table = False
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## "):
            break
        if line.startswith("|"):
            in_table = True
            rows.append((number, line))
        elif in_table:
            break
    # The header and the |---| line under it are not figures.
    return rows[2:]


def _units(text: str) -> list[tuple[int, str]]:
    """The README cut where a reader takes one claim: a paragraph, a table row, or a fenced block
    together with the paragraph right before it (its caption)."""
    units: list[tuple[int, str]] = []
    lines = text.splitlines()
    paragraph: list[str] = []
    paragraph_at = 0
    caption = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
            assert end is not None, f"README.md:{i + 1}: a fenced block is never closed"
            block = "\n".join(lines[i : end + 1])
            if paragraph:
                caption = "\n".join(paragraph)
                units.append((paragraph_at, caption))
                paragraph = []
            units.append((i + 1, caption + "\n" + block))
            caption = ""
            i = end + 1
            continue
        if line.startswith("|"):
            if paragraph:
                units.append((paragraph_at, "\n".join(paragraph)))
                paragraph = []
            units.append((i + 1, line))
            caption = ""
        elif not line.strip():
            if paragraph:
                caption = "\n".join(paragraph)
                units.append((paragraph_at, caption))
                paragraph = []
        else:
            if not paragraph:
                paragraph_at = i + 1
            paragraph.append(line)
        i += 1
    if paragraph:
        units.append((paragraph_at, "\n".join(paragraph)))
    return units


def problems(text: str) -> list[str]:
    """What is wrong with the README's figures, one line each (empty: nothing)."""
    found: list[str] = []
    rows = _table_after(text, HEADLINE)
    if len(rows) < 3:
        found.append(f"no headline table of three rows or more under {HEADLINE!r}")
    for number, row in rows:
        if not FIGURE.search(CONFIDENCE.sub("", row)):
            found.append(f"README.md:{number}: a headline row without a figure")
        if not DATE.search(row):
            found.append(f"README.md:{number}: a headline row without its date (YYYY-MM-DD)")
        if not COMMAND.search(row):
            found.append(f"README.md:{number}: a headline row without its `forge-rt ...` command")
        if re.search(r"\bown\b", row.split("|")[1]) and TUNED_ON not in row:
            found.append(f"README.md:{number}: the own suite's row does not say {TUNED_ON!r}")
    if rows and not any(TUNED_ON not in row for _, row in rows):
        found.append("README.md: the headline table has no held-out row")
    for number, unit in _units(text):
        if not PERCENT.search(CONFIDENCE.sub("", unit)):
            continue
        if not DATE.search(unit):
            found.append(f"README.md:{number}: a percentage with no date beside it")
        if not COMMAND.search(unit):
            found.append(
                f"README.md:{number}: a percentage with no `forge-rt ...` command beside it"
            )
    return found


def test_every_readme_figure_names_its_command_and_date() -> None:
    assert problems(README.read_text(encoding="utf-8")) == []


def test_the_headline_rows_hold_the_held_out_suites_and_the_own_suite_labelled() -> None:
    rows = [row for _, row in _table_after(README.read_text(encoding="utf-8"), HEADLINE)]
    assert any("BFCL" in row and "test split" in row for row in rows)
    assert any("generated" in row and "test half" in row for row in rows)
    own = [row for row in rows if "own 30 scenarios" in row or TUNED_ON in row]
    assert own
    assert all(TUNED_ON in row for row in own)


@pytest.mark.parametrize(
    "row", [row for _, row in _table_after(README.read_text(encoding="utf-8"), HEADLINE)]
)
def test_each_headline_command_parses(row: str) -> None:
    for command in COMMAND.findall(row):
        _parse(shlex.split(command)[1:])


def _cut_first_row(text: str, pattern: re.Pattern[str]) -> str:
    number, row = _table_after(text, HEADLINE)[0]
    lines = text.splitlines()
    lines[number - 1] = pattern.sub("", row)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (DATE, "a headline row without its date"),
        (COMMAND, "a headline row without its `forge-rt ...` command"),
    ],
    ids=["date", "command"],
)
def test_a_headline_row_that_loses_its_source_fails(pattern: re.Pattern[str], message: str) -> None:
    broken = _cut_first_row(README.read_text(encoding="utf-8"), pattern)
    assert any(message in problem for problem in problems(broken))


def test_a_percentage_in_prose_without_its_source_fails() -> None:
    text = README.read_text(encoding="utf-8") + "\nThe proxy now answers 99.5% of requests.\n"
    assert any("a percentage with no date" in p for p in problems(text))
    assert any("a percentage with no `forge-rt" in p for p in problems(text))
    sourced = text.replace(
        "99.5% of requests.", "99.5% of requests (2026-12-06, `forge-rt eval --backend sim`)."
    )
    assert problems(sourced) == []


def test_a_recorded_frame_takes_its_source_from_its_caption() -> None:
    frame = "```text\n  slot   busy 98% of the run\n```\n"
    assert problems(README.read_text(encoding="utf-8") + "\nA frame:\n\n" + frame)
    captioned = "\nRecorded 2026-12-06 with `forge-rt demo --backend sim --plain`:\n\n" + frame
    assert problems(README.read_text(encoding="utf-8") + captioned) == []


# --- the docs index ----------------------------------------------------------------------------


def test_the_docs_index_lists_every_page_and_every_link_resolves() -> None:
    index = ROOT / "docs" / "index.md"
    links = set(re.findall(r"\]\(([^)#]+)", index.read_text(encoding="utf-8")))
    pages = {
        str(path.relative_to(index.parent))
        for path in (ROOT / "docs").rglob("*.md")
        if path != index
    }
    assert pages - links == set(), "pages docs/index.md does not list"
    for link in links:
        assert (index.parent / link).resolve().exists(), f"docs/index.md links to {link}"


def test_the_readmes_links_to_docs_resolve() -> None:
    for link in re.findall(r"\]\((docs/[^)#]+)", README.read_text(encoding="utf-8")):
        assert (ROOT / link).exists(), link
