"""`forge-rt capabilities MODULE:WORKFLOW`: the table of needs and verdicts, and exit 2 for
what cannot be shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from forge_rt.guardrails._policy_cli import capabilities_command

WORKFLOW_FILE = """
from forge_rt.core import ToolDef, ToolSpec, Workflow


def run(**kw):
    return "ok"


workflow = Workflow(
    name="home",
    tools=[
        ToolDef(spec=ToolSpec(name="get_air_quality"), callable=run, needs=["network"]),
        ToolDef(spec=ToolSpec(name="turn_off_heating"), callable=run, needs=["writes_state"]),
        ToolDef(spec=ToolSpec(name="buy_heater"), callable=run, needs=["costs_money"]),
        ToolDef(spec=ToolSpec(name="mystery"), callable=run),
    ],
    required_steps=["get_air_quality"],
)
not_a_workflow = 42
"""

POLICY = """
[tools]
turn_off_heating = { verdict = "approve", question = "Turn off the heating?" }

[capabilities]
costs_money = { verdict = "deny", reason = "no budget" }
"""


@pytest.fixture
def module(tmp_path: Path) -> Path:
    path = tmp_path / "home_workflow.py"
    path.write_text(WORKFLOW_FILE, encoding="utf-8")
    return path


def _run(*args: str, policy: str | None = None, tmp: Path | None = None) -> Result:
    extra: list[str] = []
    if policy is not None:
        assert tmp is not None
        file = tmp / "policy.toml"
        file.write_text(policy, encoding="utf-8")
        extra = ["--policy", str(file)]
    # The command itself, not the `forge-rt` group: the group configures global logging,
    # which would outlive this test.
    return CliRunner().invoke(
        capabilities_command,
        [*args, *extra],
        prog_name="forge-rt capabilities",
        env={"COLUMNS": "200"},
        help_option_names=["-h", "--help"],  # as the group gives it (click caches the option)
    )


def _row(output: str, tool: str) -> list[str]:
    [line] = [line for line in output.splitlines() if line.startswith(f"│ {tool} ")]
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_the_table_shows_needs_verdict_reason_and_rule(module: Path, tmp_path: Path) -> None:
    """Each tool is a row: its declared needs, the verdict, the reason and the deciding rule."""
    result = _run(f"{module}:workflow", policy=POLICY, tmp=tmp_path)
    assert result.exit_code == 0, result.output
    assert _row(result.output, "get_air_quality") == [
        "get_air_quality",
        "network",
        "allow",
        "",
        "default",
    ]
    assert _row(result.output, "turn_off_heating") == [
        "turn_off_heating",
        "writes_state",
        "approve",
        "Turn off the heating?",
        "tool 'turn_off_heating'",
    ]
    assert _row(result.output, "buy_heater") == [
        "buy_heater",
        "costs_money",
        "deny",
        "no budget",
        "capability 'costs_money'",
    ]


def test_an_undeclared_tool_is_flagged(module: Path, tmp_path: Path) -> None:
    """A tool without needs is shown as undeclared and meets every capability rule."""
    result = _run(f"{module}:workflow", policy=POLICY, tmp=tmp_path)
    assert _row(result.output, "mystery")[:4] == [
        "mystery",
        "undeclared (taken as all)",
        "deny",
        "no budget",
    ]
    assert "1 tool(s) declare no needs (mystery)" in result.output


def test_without_a_policy_everything_is_allowed(module: Path) -> None:
    """No --policy: every verdict is allow, by the default rule."""
    result = _run(f"{module}:workflow")
    assert result.exit_code == 0, result.output
    assert _row(result.output, "buy_heater")[2:] == ["allow", "", "default"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param("home_workflow", "is not MODULE:WORKFLOW", id="no-colon"),
        pytest.param("no_such_module_xyz:workflow", "cannot import module", id="no-module"),
        pytest.param("{module}:missing", "has no attribute 'missing'", id="no-attribute"),
        pytest.param("{module}:not_a_workflow", "is a int, not a forge_rt Workflow", id="not-wf"),
    ],
)
def test_a_bad_target_exits_2(module: Path, target: str, message: str) -> None:
    """A target that names no workflow is a usage error saying what is wrong."""
    result = _run(target.format(module=module))
    assert result.exit_code == 2
    assert message in result.output


def test_a_policy_the_workflow_cannot_run_under_exits_2(module: Path, tmp_path: Path) -> None:
    """The table is shown, then the conflict (a denied required step) fails with exit 2."""
    policy = '[tools]\nget_air_quality = { verdict = "deny", reason = "offline" }\n'
    result = _run(f"{module}:workflow", policy=policy, tmp=tmp_path)
    assert result.exit_code == 2
    assert _row(result.output, "get_air_quality")[2:4] == ["deny", "offline"]
    assert "required step 'get_air_quality' is denied by the policy" in result.output


def test_a_bad_policy_file_exits_2(module: Path, tmp_path: Path) -> None:
    """A malformed rule in the policy file is a usage error naming the rule."""
    result = _run(f"{module}:workflow", policy='[tools]\nget_air_quality = "maybe"\n', tmp=tmp_path)
    assert result.exit_code == 2
    assert "unknown verdict 'maybe'" in result.output
