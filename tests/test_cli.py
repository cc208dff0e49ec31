"""The `forge-rt` command group: subcommands loaded lazily, help, version, exit codes, JSON logs."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner

from forge_rt import __version__
from forge_rt.cli import SUBCOMMANDS, Subcommand, main

FORGE_RT = Path(sys.executable).with_name("forge-rt")  # the installed console script


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, list(args), prog_name="forge-rt")


def test_every_subcommand_is_offered() -> None:
    """The group offers exactly proxy, demo, eval, sim, model, replay, trace and capabilities."""
    assert set(SUBCOMMANDS) == {
        "proxy",
        "demo",
        "eval",
        "sim",
        "model",
        "replay",
        "trace",
        "capabilities",
    }


def test_group_help_lists_subcommands_options_and_exit_codes() -> None:
    """`forge-rt --help` shows every subcommand's summary, the logging options and exit codes."""
    result = _invoke("--help")
    assert result.exit_code == 0
    for name, entry in SUBCOMMANDS.items():
        assert f"  {name} " in result.output
        assert entry.summary.split()[0] in result.output
    assert "--log-json" in result.output
    assert "--log-level [debug|info|warning|error]" in result.output
    assert "  Exit codes:\n    0  the command did what it was asked" in result.output
    assert "\n    1  a runtime failure" in result.output
    assert "\n    2  usage: " in result.output


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_has_help(name: str) -> None:
    """`forge-rt <name> --help` exits 0 with that command's usage line and -h works as well."""
    for flag in ("--help", "-h"):
        result = _invoke(name, flag)
        assert result.exit_code == 0, result.output
        assert result.output.startswith(f"Usage: forge-rt {name} [OPTIONS]")


def test_version() -> None:
    """`forge-rt --version` prints the package version."""
    result = _invoke("--version")
    assert (result.exit_code, result.output) == (0, f"forge-rt, version {__version__}\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "No such command 'nope'."),
        (["--no-such-flag"], "No such option '--no-such-flag'."),
        (
            ["--log-level", "loud", "sim"],
            "'loud' is not one of 'debug', 'info', 'warning', 'error'.",
        ),
        (
            ["demo", "--constrain", "sometimes"],
            "'sometimes' is not one of 'never', 'auto', 'always'.",
        ),
        (["demo", "--backend", "ftp://x"], "backend: backend 'ftp://x' is not 'local', 'sim' or"),
        (["demo", "--voice-at", "-1"], "voice_at: Input should be greater than or equal to 0"),
    ],
    ids=[
        "unknown-command",
        "unknown-option",
        "bad-choice",
        "bad-demo-choice",
        "bad-backend",
        "negative",
    ],
)
def test_bad_usage_exits_2_with_the_reason(args: list[str], message: str) -> None:
    """Usage errors exit with status 2 and say what was wrong."""
    result = _invoke(*args)
    assert result.exit_code == 2
    assert message in result.output


def test_demo_config_file_errors_are_usage_errors(tmp_path: Path) -> None:
    """An unknown key or a malformed file given to `demo --config` exits 2 naming the problem."""
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("voice_att = 1\n")
    broken = tmp_path / "broken.toml"
    broken.write_text("backend = \n")
    first = _invoke("demo", "--config", str(unknown))
    second = _invoke("demo", "--config", str(broken))
    assert (first.exit_code, second.exit_code) == (2, 2)
    assert f"{unknown}: unknown key 'voice_att'; the keys are the option names: " in first.output
    assert f"cannot read {broken}: " in second.output


def test_demo_options_on_the_command_line_win_over_the_config_file(tmp_path: Path) -> None:
    """A flag replaces the file's value: the file's bad backend is overridden, its voice_at too."""
    path = tmp_path / "demo.toml"
    path.write_text('backend = "ftp://nowhere"\nvoice_at = 2.0\n')
    result = _invoke("demo", "--config", str(path), "--backend", "sim", "--voice-at", "-1")
    assert result.exit_code == 2
    assert "invalid demo settings: voice_at: Input should be greater than or equal to 0" in (
        result.output
    )
    assert "backend" not in result.output.split("invalid demo settings:")[1]


def test_a_subcommand_that_cannot_load_fails_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken subcommand is exit 1 naming its module when used; the others still work."""
    monkeypatch.setitem(
        SUBCOMMANDS, "ghost", Subcommand("forge_rt._no_such_module", "ghost_command", "Haunts.")
    )
    listed = _invoke("--help")
    used = _invoke("ghost")
    other = _invoke("sim", "--help")
    assert listed.exit_code == 0
    # The summary column is as wide as the longest name needs.
    assert re.search(r"^  ghost +Haunts\.$", listed.output, re.MULTILINE)
    assert used.exit_code == 1
    assert (
        "Error: forge-rt ghost is unavailable: its module forge_rt._no_such_module cannot be "
        "imported (ModuleNotFoundError: No module named 'forge_rt._no_such_module')"
    ) in used.output
    assert other.exit_code == 0


def test_a_subcommand_entry_without_a_command_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry naming something that is not a click command fails loudly, not as 'no such command'."""
    monkeypatch.setitem(SUBCOMMANDS, "odd", Subcommand("forge_rt.cli", "SUBCOMMANDS", "Odd."))
    result = _invoke("odd")
    assert result.exit_code == 1
    assert "forge_rt.cli has no click command 'SUBCOMMANDS'" in result.output


async def test_group_help_imports_no_subcommand_module() -> None:
    """`forge-rt --help` stays fast: none of the subcommands' modules is imported for it."""
    modules = [entry.module for entry in SUBCOMMANDS.values()]
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from forge_rt.cli import main\n"
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0\n"
        f"print([m for m in {modules!r} if m in sys.modules])\n"
    )
    with trio.fail_after(60):
        proc = await trio.run_process(
            [sys.executable, "-c", script], capture_stdout=True, capture_stderr=True, check=False
        )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == "[]\n"


async def test_log_json_writes_one_json_object_per_line_to_stderr() -> None:
    """With --log-json every stderr line is a JSON object with event, level and timestamp."""
    env = {**os.environ, "COLUMNS": "120"}
    with trio.fail_after(90):
        proc = await trio.run_process(
            [
                str(FORGE_RT),
                "--log-json",
                "--log-level",
                "debug",
                "demo",
                "--backend",
                "sim",
                "--sim-speed",
                "20",
                "--tool-seconds",
                "0",
                "--constrain",
                "never",  # free decoding: the rescues log at debug level
            ],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stderr.decode().splitlines()
    assert lines
    records = [json.loads(line) for line in lines]
    assert all({"event", "level", "timestamp"} <= record.keys() for record in records)
    assert "demo.agent_done" in {r["event"] for r in records}
    assert "debug" in {r["level"] for r in records}
    assert not proc.stdout.decode().lstrip().startswith("{")  # the report stays on stdout
