"""``forge-rt eval`` and ``forge-rt eval report`` through click's CliRunner, on the simulated backend."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from structlog.testing import capture_logs

from forge_rt.eval import read_records
from forge_rt.eval._cli import eval_command
from forge_rt.eval._meta import read_meta
from forge_rt.eval._presets import SIM_RATE_PRESETS

TWO = ["--scenarios", "basic_2step", "--scenarios", "single_lookup"]


def _invoke(*args: str | Path) -> Result:
    with capture_logs():
        return CliRunner().invoke(eval_command, [str(a) for a in args])


def test_eval_on_the_sim_writes_records_sidecar_table_and_report(tmp_path: Path) -> None:
    """A run appends one record per run, prints the table, writes the HTML and the command."""
    out = tmp_path / "results" / "r.jsonl"
    result = _invoke(*TWO, "--runs", "2", "-a", "full,bare", "--out", out)
    assert result.exit_code == 0, result.output
    records = list(read_records(out))
    assert len(records) == 8
    assert {("full", 4), ("bare", 4)} == {
        (a, sum(r.ablation == a for r in records)) for a in ("full", "bare")
    }
    assert result.stderr.startswith(
        f"eval: 2 scenarios x 2 ablations x 2 runs on sim (sim): 8 to run, 0 already in {out}\n"
    )
    assert "│ full " in result.stdout
    assert "│ bare " in result.stdout
    html = tmp_path / "results" / "r.html"  # named after its results file
    assert f"report: {html}" in result.stdout
    page = html.read_text()
    assert page.count("<svg ") == 2
    [invocation] = read_meta(out).invocations
    command = f"forge-rt eval --scenarios basic_2step --scenarios single_lookup --runs 2 -a full,bare --out {out}"
    assert command == invocation.command
    assert command in page
    assert (invocation.outcome, invocation.new_records) == ("done", 8)
    assert SIM_RATE_PRESETS["small-model"].model_dump() == invocation.settings["sim_rates"]
    assert invocation.settings["sampling"] == {}  # no fixed cap: the runtime derives each budget
    assert invocation.commit is not None  # run from a git checkout
    assert invocation.commit.split("+")[0] in page


def test_a_rule_is_paired_against_the_pipeline_without_it(tmp_path: Path) -> None:
    """``without:RULE`` arms come from the rule registry; the records say which rules decided
    the replies, and the report counts verdicts by rule."""
    out = tmp_path / "r.jsonl"
    arms = "unconstrained,without:retry_nudges"
    result = _invoke(*TWO, "-a", arms, "--sim-rates", "bare_text=0.5", "--out", out)
    assert result.exit_code == 0, result.output
    records = list(read_records(out))
    assert sorted({r.ablation for r in records}) == ["unconstrained", "without:retry_nudges"]
    nudged = [r.rules.get("retry_nudges", 0) for r in records if r.ablation == "unconstrained"]
    retried = [r.retries.get("no_call", 0) for r in records if r.ablation == "unconstrained"]
    assert nudged == retried
    assert sum(nudged) > 0
    assert all("retry_nudges" not in r.rules for r in records if r.ablation != "unconstrained")
    assert "Verdicts by guardrail rule" in (tmp_path / "r.html").read_text()


def test_the_same_command_again_runs_nothing_new(tmp_path: Path) -> None:
    """Resume: a second identical command finds every run recorded and adds none."""
    out = tmp_path / "r.jsonl"
    args = (*TWO, "--out", out, "--report", tmp_path / "x.html")
    assert _invoke(*args).exit_code == 0
    before = out.read_bytes()
    again = _invoke(*args)
    assert again.exit_code == 0, again.output
    assert f"x 1 runs on sim (sim): 0 to run, 2 already in {out}\n" in again.stderr
    assert before == out.read_bytes()
    assert [i.new_records for i in read_meta(out).invocations] == [2, 0]


def test_report_subcommand_prints_tables_and_writes_html(tmp_path: Path) -> None:
    """`eval report` renders an existing file; --group-by tier gives one table per tier."""
    out = tmp_path / "r.jsonl"
    assert _invoke(*TWO, "-a", "full", "--out", out).exit_code == 0
    html = tmp_path / "by-tier.html"
    result = _invoke("report", out, "--html", html, "--group-by", "backend,tier,ablation")
    assert result.exit_code == 0, result.output
    assert "sim · plumbing" in result.stdout
    assert f"report: {html}" in result.stdout
    assert "<h2>sim · plumbing</h2>" in html.read_text()


def test_a_config_file_supplies_options_and_flags_override_it(tmp_path: Path) -> None:
    """TOML keys are option names; a flag on the command line wins over the file."""
    out = tmp_path / "r.jsonl"
    config = tmp_path / "eval.toml"
    config.write_text(
        f'scenarios = ["basic_2step"]\nablation = "bare"\nruns = 3\nsim-rates = "perfect"\n'
        f'out = "{out}"\ncard_sampling = false\nbackend-kind = "openai"\n'
    )
    result = _invoke("--config", config, "--runs", "1")
    assert result.exit_code == 0, result.output
    assert [(r.scenario, r.ablation, r.run) for r in read_records(out)] == [
        ("basic_2step", "bare", 0)
    ]
    assert (
        SIM_RATE_PRESETS["perfect"].model_dump()
        == read_meta(out).invocations[0].settings["sim_rates"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-a", "nope"], "unknown ablation 'nope'"),
        (["-a", "without:nope"], "ablation 'without:nope': unknown guardrail rule 'nope'"),
        (["-a", "with:nope"], "ablation 'with:nope': unknown guardrail rule 'nope'"),
        (["-s", "nope"], "unknown scenario or tag 'nope'"),
        (
            ["--sim-rates", "bare_json=2"],
            "Invalid value for --sim-rates: invalid sim rates ['bare_json=2']: bare_json: "
            "Input should be less than or equal to 1",
        ),
        (["--backend", "ftp://x"], "'ftp://x' is neither sim, local nor an http(s):// base URL"),
        (["--backend", "http://127.0.0.1:9"], "--model is required with a URL backend"),
        (
            ["--backend", "http://h:1", "--model", "m", "--sim-rates", "mild"],
            "--sim-rates applies to --backend sim only",
        ),
        (
            ["--backend", "http://h:1", "--model", "mystery"],
            "no recommended sampling is known for model 'mystery'",
        ),
        (["--backend-kind", "ollama"], "--backend-kind applies to local or URL backends, not sim"),
        (["--backend", "local", "--model", "gpt-9"], "'gpt-9' is not an embedded model"),
        (["--runs", "0"], "Invalid value for '--runs'"),
        (["--cache-lines", "2"], "--cache-lines applies to local or URL backends, not sim"),
        (["--runs", "2", "report", "x.jsonl"], "--runs: options of an eval run, not of `report`"),
    ],
    ids=[
        "ablation",
        "without-rule",
        "with-rule",
        "scenario",
        "rates",
        "backend",
        "url-needs-model",
        "rates-not-sim",
        "card-unknown",
        "kind-on-sim",
        "local-model",
        "runs",
        "cache-lines-on-sim",
        "options-before-report",
    ],
)
def test_bad_usage_exits_2_and_says_why(tmp_path: Path, args: list[str], message: str) -> None:
    """Usage mistakes are caught before anything runs, with exit status 2 and a reason."""
    result = (
        _invoke(*args, "--out", tmp_path / "r.jsonl") if "report" not in args else _invoke(*args)
    )
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not (tmp_path / "r.jsonl").exists()


def test_other_settings_on_the_same_results_file_are_refused(tmp_path: Path) -> None:
    """Resuming under the same labels with other sim rates would mix results: exit 2."""
    out = tmp_path / "r.jsonl"
    assert _invoke("-s", "basic_2step", "--sim-rates", "perfect", "--out", out).exit_code == 0
    result = _invoke("-s", "basic_2step", "--sim-rates", "mild", "--out", out)
    assert result.exit_code == 2
    assert "already holds sim/sim runs made with other settings (sim_rates differ" in " ".join(
        result.output.split()
    )
    relabelled = _invoke(
        "-s", "basic_2step", "--sim-rates", "mild", "--model", "mild", "--out", out
    )
    assert relabelled.exit_code == 0, relabelled.output


def test_a_dead_backend_exits_1_and_records_the_failure(tmp_path: Path) -> None:
    """Nothing listens at the URL: exit 1, no run records, the sidecar says what failed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "r.jsonl"
    url = f"http://127.0.0.1:{port}"
    result = _invoke(*TWO, "--backend", url, "--model", "m", "--no-card-sampling", "--out", out)
    assert result.exit_code == 1, result.output
    assert "Error: the backend failed: BackendError" in result.output
    assert "0 runs of this invocation are saved" in " ".join(result.output.split())
    assert list(read_records(out)) == []
    [invocation] = read_meta(out).invocations
    assert invocation.outcome.startswith("failed: BackendError")
    assert invocation.settings["backend"] == url
    assert invocation.finished is not None


def test_report_of_a_file_without_records_exits_1(tmp_path: Path) -> None:
    """An empty results file is an error that points at `forge-rt eval`."""
    empty = tmp_path / "r.jsonl"
    empty.write_text("")
    result = _invoke("report", empty)
    assert result.exit_code == 1
    assert f"Error: {empty} holds no run records; run `forge-rt eval` first" in result.output


def test_report_of_a_corrupt_file_names_the_line(tmp_path: Path) -> None:
    """A line that is not a run record fails with its file and line number."""
    bad = tmp_path / "r.jsonl"
    bad.write_text(json.dumps({"scenario": "x"}) + "\n")
    result = _invoke("report", bad)
    assert result.exit_code == 1
    assert f"Error: {bad}:1: not a run record" in result.output


def test_an_unknown_config_key_is_a_usage_error(tmp_path: Path) -> None:
    """A TOML key that is no option name is refused, listing the real ones."""
    config = tmp_path / "eval.toml"
    config.write_text("rounds = 3\n")
    result = _invoke("--config", config)
    assert result.exit_code == 2
    assert "unknown key 'rounds'; the keys are the option names: ablation, backend," in " ".join(
        result.output.split()
    )


@click.group()
@click.option("--log-level", default="info")
@click.option("--log-json", is_flag=True)
def _root(log_level: str, log_json: bool) -> None:
    """Stands in for the main `forge-rt` group: the eval reads its logging options."""


_root.add_command(eval_command)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], [{"json": False, "level": "error"}]), (["--log-level", "warning"], [])],
    ids=["default-level", "level-given"],
)
def test_the_eval_quiets_logging_unless_a_level_was_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: list[str], expected: list[object]
) -> None:
    """At the CLI's default log level the eval logs errors only; an explicit level stays."""
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(
        "forge_rt._logging.configure_logging", lambda **kwargs: calls.append(kwargs)
    )
    args = [*flags, "eval", "-s", "basic_2step", "--out", str(tmp_path / "r.jsonl")]
    with capture_logs():
        result = CliRunner().invoke(_root, args)
    assert result.exit_code == 0, result.output
    assert calls == expected


@pytest.mark.slow
def test_eval_against_a_real_llama_server_with_card_sampling(
    local_model_url: str, tmp_path: Path
) -> None:
    """A URL backend runs a scenario on the embedded Qwen with the card's sampling and a cap."""
    out = tmp_path / "r.jsonl"
    result = _invoke(
        "--backend", local_model_url, "--backend-kind", "llamaserver",
        "--model", "qwen2.5-coder-0.5b", "-s", "single_lookup", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [record] = list(read_records(out))
    assert (record.backend, record.model) == (local_model_url, "qwen2.5-coder-0.5b")
    assert record.inferences >= 1
    assert record.prompt_tokens > 0
    sampling = read_meta(out).invocations[0].settings["sampling"]
    assert {"temperature": 0.7, "top_p": 0.8, "top_k": 20}.items() <= sampling.items()
    assert "max_tokens" not in sampling  # no fixed cap: the runtime derives each reply's budget


def test_results_files_in_one_folder_keep_their_own_reports(tmp_path: Path) -> None:
    """Two evals with different --out files in one folder write two reports, not one."""
    for name in ("a", "b"):
        result = _invoke(*TWO, "--runs", "1", "-a", "full", "--out", tmp_path / f"{name}.jsonl")
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.glob("*.html")) == ["a.html", "b.html"]


def test_card_sampling_the_openai_api_cannot_send_is_refused_before_any_run(
    tmp_path: Path,
) -> None:
    """The 0.5B's card sets top_k; with --backend-kind openai every run would fail, so the
    command says so at once and names the way out."""
    result = _invoke(
        "--backend", "http://127.0.0.1:9", "--model", "qwen2.5-coder-0.5b",
        "--backend-kind", "openai", "--out", tmp_path / "r.jsonl",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "top_k" in result.output
    assert "--no-card-sampling" in result.output
    assert not (tmp_path / "r.jsonl").exists()
