"""``forge-rt capabilities MODULE:WORKFLOW``: what each tool of a workflow needs, and what a
policy says about it (tool, declared needs, verdict, reason, the rule that decided).

``MODULE`` is a dotted module name (``myapp.tools``) or a ``.py`` file path; ``WORKFLOW`` the
name of a :class:`~forge_rt.core.Workflow` in it. A tool that declares no needs is flagged: a
policy treats it as needing every capability.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from forge_rt._cli_options import command_settings, env_epilog
from forge_rt.core import Workflow
from forge_rt.errors import PolicyError
from forge_rt.guardrails._policy import Allow, Approve, Decision, Deny, Policy, apply_policy

__all__ = ["capabilities_command", "load_workflow"]

_STYLE = {Allow: "green", Approve: "yellow", Deny: "red"}


def load_workflow(target: str) -> Workflow:
    """The workflow ``MODULE:WORKFLOW`` names; ``click.BadParameter`` saying what is wrong."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise click.BadParameter(
            f"{target!r} is not MODULE:WORKFLOW (e.g. myapp.assistant:workflow or "
            "examples/home.py:workflow)",
            param_hint="TARGET",
        )
    if module_name.endswith(".py"):
        path = Path(module_name)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if not path.is_file() or spec is None or spec.loader is None:
            raise click.BadParameter(f"no Python file {module_name}", param_hint="TARGET")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # pydantic models in it resolve their module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise click.BadParameter(
                f"cannot import module {module_name!r}: {exc}", param_hint="TARGET"
            ) from exc
    value = getattr(module, attribute, None)
    if value is None:
        raise click.BadParameter(
            f"module {module_name!r} has no attribute {attribute!r}", param_hint="TARGET"
        )
    if not isinstance(value, Workflow):
        raise click.BadParameter(
            f"{target} is a {type(value).__name__}, not a forge_rt Workflow",
            param_hint="TARGET",
        )
    return value


def _needs(decision: Decision) -> str:
    if not decision.declared:
        return "[bold yellow]undeclared[/] (taken as all)"
    return ", ".join(sorted(c.value for c in decision.needs)) or "none"


def _table(workflow: Workflow, decisions: list[Decision]) -> Table:
    table = Table(title=f"workflow {workflow.name!r}: tools and policy", title_justify="left")
    for column in ("tool", "declared needs", "verdict", "reason", "rule"):
        table.add_column(column, overflow="fold")
    for decision in decisions:
        kind = type(decision.verdict)
        verdict = str(kind.__struct_config__.tag)
        table.add_row(
            decision.tool,
            _needs(decision),
            f"[{_STYLE[kind]}]{verdict}[/]",
            decision.reason,
            decision.rule,
        )
    return table


@click.command(
    "capabilities",
    context_settings=command_settings("capabilities"),
    epilog=env_epilog("capabilities", example="POLICY", config=False),
)
@click.argument("target", metavar="MODULE:WORKFLOW")
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A policy TOML file (default, [tools], [capabilities]); without it every tool is allowed.",
)
def capabilities_command(target: str, policy_path: Path | None) -> None:
    """Show each tool of MODULE:WORKFLOW: its declared needs, the policy's verdict and why.
    Exits 2 for a target that is not a workflow, a bad policy file, or a policy the workflow
    cannot run under (a denied required step or only terminal tool)."""
    workflow = load_workflow(target)
    try:
        policy = Policy.load(policy_path) if policy_path is not None else Policy()
        policy.check_names(workflow.tools, where=f"workflow {workflow.name!r}")
    except PolicyError as exc:
        raise click.UsageError(str(exc)) from exc
    decisions = [policy.decide(tool) for tool in workflow.tools.values()]
    console = Console(soft_wrap=True, highlight=False)
    console.print(_table(workflow, decisions))
    undeclared = [d.tool for d in decisions if not d.declared]
    if undeclared:
        console.print(
            f"[yellow]{len(undeclared)} tool(s) declare no needs[/] ({', '.join(undeclared)}): "
            "a policy treats them as needing every capability; give them ToolDef(needs=...)."
        )
    try:
        apply_policy(workflow, policy)
    except PolicyError as exc:
        raise click.UsageError(str(exc)) from exc
