"""The ``forge-rt`` command. The only place that configures logging; subcommands live by their code.

Each subcommand is imported only when it is invoked (or its help is asked for), so ``forge-rt
--help`` stays fast and one subcommand whose module cannot be imported cannot break the others.
Such a module is an error when its command is used, never a silently missing command.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

import click

from forge_rt import __version__
from forge_rt._logging import configure_logging

__all__ = ["SUBCOMMANDS", "Subcommand", "main"]


class Subcommand(NamedTuple):
    """Where a subcommand's click command lives, and its one-line help for ``forge-rt --help``."""

    module: str
    attribute: str
    summary: str


SUBCOMMANDS: dict[str, Subcommand] = {
    "demo": Subcommand(
        "forge_rt.demo._cli",
        "demo_command",
        "Three agents and a high-priority voice request on one slot, watched live.",
    ),
    "proxy": Subcommand(
        "forge_rt.proxy._cli",
        "proxy_command",
        "Serve an OpenAI- and Anthropic-compatible API with guardrails.",
    ),
    "eval": Subcommand(
        "forge_rt.eval._cli",
        "eval_command",
        "Run the scenario suite against a backend (settings also from its own --config).",
    ),
    "sim": Subcommand(
        "forge_rt.backends.sim._cli",
        "sim_command",
        "Serve a simulated model server for tests and experiments.",
    ),
    "model": Subcommand(
        "forge_rt.backends.local._cli",
        "model_command",
        "Show the embedded models, or prepare their files ahead of time.",
    ),
    "replay": Subcommand(
        "forge_rt.trace._cli",
        "replay_command",
        "Re-run today's guardrails over a recorded run trace; list the decisions that differ.",
    ),
    "trace": Subcommand(
        "forge_rt.trace._cli", "trace_command", "Render a run trace turn by turn (trace show)."
    ),
    "capabilities": Subcommand(
        "forge_rt.guardrails._policy_cli",
        "capabilities_command",
        "Show what a workflow's tools need and what a policy says about each.",
    ),
}
"""Every ``forge-rt`` subcommand, in the order ``--help`` lists them."""

_EPILOG = """\b
Exit codes:
  0  the command did what it was asked (a demo or eval in which the model
     fails some tasks still exits 0: that is a result, reported)
  1  a runtime failure: a backend that would not start or broke, a model
     file that is missing, a subcommand that cannot be loaded
  2  usage: an unknown option or command, a bad value, a bad config file

Options can also be set in the environment: FORGE_RT_LOG_LEVEL, and
FORGE_RT_<COMMAND>_<OPTION> for a command's (see its --help, docs/cli.md).
"""


class _LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, from :data:`SUBCOMMANDS`."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand name, without importing any."""
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import the subcommand; a module that cannot load is an error, not a missing command."""
        entry = SUBCOMMANDS.get(cmd_name)
        if entry is None:
            return None  # click answers "No such command" (exit 2)
        try:
            module = importlib.import_module(entry.module)
        except ImportError as exc:
            raise click.ClickException(
                f"forge-rt {cmd_name} is unavailable: its module {entry.module} cannot be "
                f"imported ({type(exc).__name__}: {exc}); reinstall forge-rt, or install the "
                "missing package it names"
            ) from exc
        command = getattr(module, entry.attribute, None)
        if not isinstance(command, click.Command):
            raise click.ClickException(
                f"forge-rt {cmd_name} is unavailable: {entry.module} has no click command "
                f"{entry.attribute!r}; this forge-rt installation is inconsistent, reinstall it"
            )
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the subcommands from their summaries, without importing any of them."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.summary) for name, entry in SUBCOMMANDS.items()])


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "FORGE_RT"},
    epilog=_EPILOG,
)
@click.version_option(__version__, prog_name="forge-rt")
@click.option(
    "--log-json", is_flag=True, help="Log one JSON object per line instead of console text."
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Lowest level of log event to show.",
)
def main(log_json: bool, log_level: str) -> None:
    """forge-rt: reliable tool-calling for self-hosted LLMs, with shared GPU inference slots.

    Logs go to stderr; what a command reports goes to stdout. Start with `forge-rt demo`.
    """
    configure_logging(json=log_json, level=log_level)
