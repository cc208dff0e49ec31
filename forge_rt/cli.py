"""The ``forge-rt`` command. The only place that prints, and the only place that configures logging."""

from __future__ import annotations

import click

from forge_rt import __version__
from forge_rt._logging import configure_logging

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    """forge-rt: reliable tool-calling for self-hosted LLMs, with shared GPU inference slots."""
    configure_logging(json=log_json, level=log_level)
