"""Dev and test: each case's half is fixed by its id alone, about half each, and the CLI obeys it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from structlog.testing import capture_logs

from forge_rt.eval import read_records
from forge_rt.eval._cli import eval_command
from forge_rt.eval._split import in_split, split_of, take_split
from forge_rt.eval.generated import generate_suite
from forge_rt.eval.scenarios import SCENARIOS


def _invoke(*args: str | Path) -> Result:
    with capture_logs():
        return CliRunner().invoke(eval_command, [str(a) for a in args])


def test_the_half_is_a_pure_function_of_the_id() -> None:
    ids = [f"case-{n}" for n in range(2000)]
    halves = [split_of(i) for i in ids]
    assert halves == [split_of(i) for i in reversed(ids)][::-1]
    assert 900 < halves.count("test") < 1100
    # The documented recipe: sha256 of the salt and the id, the low bit of the first byte.
    digest = hashlib.sha256(b"forge-rt/split/v1:case-7").digest()
    assert split_of("case-7") == ("test" if digest[0] & 1 else "dev")


def test_adding_cases_moves_no_case_to_the_other_half() -> None:
    before = {i: split_of(i) for i in (f"w{n}" for n in range(50))}
    after = {i: split_of(i) for i in (f"w{n}" for n in range(500))}
    assert all(after[i] == half for i, half in before.items())


def test_all_holds_both_halves_and_a_bad_name_is_refused() -> None:
    assert in_split("anything", "all")
    dev = take_split(range(100), "dev", lambda n: f"n{n}")
    test = take_split(range(100), "test", lambda n: f"n{n}")
    assert sorted(dev + test) == list(range(100))
    assert not set(dev) & set(test)
    with pytest.raises(ValueError, match="unknown split"):
        in_split("x", "train")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        split_of("")


def test_every_suite_has_cases_in_both_halves() -> None:
    own = {split_of(name) for name in SCENARIOS}
    generated = {split_of(s.name) for s in generate_suite(seed=0, count=30)}
    assert own == generated == {"dev", "test"}


def test_the_cli_runs_only_the_chosen_half_and_labels_records(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    result = _invoke("--suite", "generated", "--cases", "10", "--split", "dev", "--out", out)
    assert result.exit_code == 0, result.output
    records = list(read_records(out))
    expected = {s.name for s in generate_suite(seed=0, count=10) if split_of(s.name) == "dev"}
    assert {r.scenario for r in records} == expected
    assert {(r.suite, r.split) for r in records} == {("generated", "dev")}


def test_generated_cases_are_picked_by_name_or_shape_within_the_half(tmp_path: Path) -> None:
    suite = [s for s in generate_suite(seed=0, count=30) if split_of(s.name) == "dev"]
    named = suite[0].name
    shape = next(s.tags[0] for s in suite if s.tags[0] != suite[0].tags[0])
    out = tmp_path / "r.jsonl"
    result = _invoke(
        "--suite",
        "generated",
        "--cases",
        "30",
        "--split",
        "dev",
        "-s",
        f"{named},{shape}",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    expected = {s.name for s in suite if s.name == named or s.tags[0] == shape}
    assert {r.scenario for r in read_records(out)} == expected


def test_naming_only_scenarios_of_the_other_half_is_a_usage_error(tmp_path: Path) -> None:
    name = next(n for n in SCENARIOS if split_of(n) == "test")
    result = _invoke("-s", name, "--split", "dev", "--out", tmp_path / "r.jsonl")
    assert result.exit_code == 2
    assert f"{name}: test" in result.output
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "bfcl", "-s", "todo"], "todo not among the 200 cases drawn"),
        (["--suite", "generated", "--cases", "6", "-s", "nope"], "no scenario is named or tagged"),
        (["--cases", "5"], "--cases applies to --suite generated"),
        (
            ["--suite", "generated", "--categories", "simple"],
            "--categories applies to --suite bfcl",
        ),
        (["--per-category", "3"], "--per-category applies to --suite bfcl"),
        (["--suite-seed", "3"], "--suite-seed applies to --suite generated or bfcl"),
        (["--suite", "bfcl"], "--suite bfcl measures a model"),
        (["--suite", "bfcl", "--backend", "local", "-a", "no_compact"], "no proxy equivalent"),
        (["--suite", "bfcl", "--backend", "local", "--categories", "x"], "unknown BFCL category"),
        (["--suite", "bfcl", "--backend", "local", "--max-tokens", "9"], "does not apply"),
        (["--split", "train"], "'train' is not one of"),
    ],
)
def test_options_of_another_suite_are_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = _invoke(*args, "--out", tmp_path / "r.jsonl")
    assert result.exit_code == 2, result.output
    assert message in result.output
