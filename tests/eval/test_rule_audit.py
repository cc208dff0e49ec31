"""The per-rule audit: firings in the baseline arm, and each rule paired with its without: arm."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from forge_rt.eval import RunRecord
from forge_rt.eval._cli import eval_command
from forge_rt.eval._rule_audit import rule_audit
from forge_rt.guardrails import RULES


def _run(case: str, arm: str, correct: bool, **rules: int) -> RunRecord:
    return RunRecord(
        scenario=case,
        tags=("t",),
        run=0,
        ablation=arm,
        backend="sim",
        model="m",
        completed=True,
        correct=correct,
        rules=dict(rules),
        suite="generated",
    )


RECORDS = [
    _run("a", "full", True, chain_ends=1),
    _run("b", "full", False, chain_ends=2),
    _run("c", "full", True),
    _run("d", "full", True, retry_nudges=1, result_notes=2),
    _run("a", "without:chain_ends", False),
    _run("b", "without:chain_ends", False),
    _run("c", "without:chain_ends", True),
    _run("d", "without:chain_ends", False),
]


def test_each_rule_has_a_line_in_registry_order() -> None:
    lines = rule_audit(RECORDS)
    assert [line.rule for line in lines] == [r.name for r in RULES]


def test_firings_and_the_outcome_after_them() -> None:
    lines = {line.rule: line for line in rule_audit(RECORDS)}
    chain = lines["chain_ends"]
    assert (chain.runs, chain.fired, chain.correct_when_fired) == (4, 2, 1)
    assert (lines["retry_nudges"].fired, lines["retry_nudges"].correct_when_fired) == (1, 1)
    # A results rule is counted where it added to a result; a next rule shapes every request.
    assert (lines["result_notes"].fired, lines["result_notes"].correct_when_fired) == (1, 1)
    assert lines["result_notes"].counted
    assert not lines["failure_streak"].counted


def test_a_rule_is_paired_with_the_pipeline_without_it() -> None:
    lines = {line.rule: line for line in rule_audit(RECORDS)}
    chain = lines["chain_ends"]
    assert (chain.paired, chain.pairs, chain.gained, chain.lost) == (True, 4, 2, 0)
    assert chain.p == pytest.approx(0.5)
    assert not lines["retry_nudges"].paired


def test_a_file_without_the_baseline_arm_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"no run of the baseline arm 'full'; the file has \['x'\]"
    ):
        rule_audit([_run("a", "x", True)])


def test_the_command_prints_the_audit(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in RECORDS))
    result = CliRunner().invoke(eval_command, ["rules", str(out)])
    assert result.exit_code == 0, result.output
    chain = next(line for line in result.output.splitlines() if "chain_ends" in line)
    assert [cell.strip() for cell in chain.split("│")[3:7]] == ["2/4", "1/2", "2", "0"]


def test_the_cases_a_rule_fired_in_are_listed_for_a_pairing(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in RECORDS))
    result = CliRunner().invoke(eval_command, ["rules", str(out), "--fired", "chain_ends"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "a,b"
    shaping = CliRunner().invoke(eval_command, ["rules", str(out), "--fired", "call_list"])
    assert shaping.exit_code == 2
    assert "pair it on every case" in shaping.output
    assert (
        "no rule named 'chain_end'"
        in CliRunner().invoke(eval_command, ["rules", str(out), "--fired", "chain_end"]).output
    )
