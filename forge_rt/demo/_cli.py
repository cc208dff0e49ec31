"""``forge-rt demo``: three background agents and a voice request on one slot, watched live.

Command-line code: it prints (the live view, progress lines, the summary) and, while the live
view is on screen, routes log lines above it. ``demo_command`` is the click command the main
CLI adds.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

import click
import pydantic
import structlog
import trio
from click.core import ParameterSource
from rich.console import Console

from forge_rt._cli_options import (
    backend_api_key_option,
    backend_kind_option,
    backend_option,
    command_settings,
    config_option,
    env_epilog,
    given,
    model_option,
    n_ctx_option,
    seed_option,
)
from forge_rt.demo._config import DemoConfig
from forge_rt.demo._report import DemoReport
from forge_rt.demo._run import run_demo
from forge_rt.demo._view import LiveView, PlainView
from forge_rt.errors import ForgeError

__all__ = ["demo_command"]

_FIELDS = DemoConfig.model_fields


def _default(name: str) -> Any:
    """A DemoConfig field's default, so the options and the model agree."""
    return _FIELDS[name].default


@click.command(
    "demo",
    context_settings=command_settings("demo"),
    epilog=env_epilog("demo", example="BACKEND"),
)
@config_option("demo")
@backend_option(_default("backend"))
@backend_kind_option()
@backend_api_key_option("demo")
@model_option(
    "Packaged model for 'local' [default: qwen2.5-coder-0.5b]; model name to request from a "
    "URL backend."
)
@n_ctx_option("Context tokens of each backend slot (one per agent on local and sim).")
@click.option(
    "--cache-lines",
    type=int,
    default=None,
    help="Backend KV slots used as cache lines [default: one per agent on local and sim, none "
    "on a URL backend].",
)
@click.option(
    "--servers",
    type=click.IntRange(1, 8),
    default=_default("servers"),
    show_default=True,
    help="With local or sim: start this many backends, run as one fleet (each shown as a lane).",
)
@click.option(
    "--voice-at",
    type=float,
    default=None,
    help="Seconds after the background agents start when the voice request arrives "
    "[default: as soon as one of them is mid-generation].",
)
@click.option(
    "--max-iterations",
    type=int,
    default=_default("max_iterations"),
    show_default=True,
    help="Inferences each agent may make.",
)
@click.option(
    "--agent-deadline",
    type=float,
    default=_default("agent_deadline"),
    show_default=True,
    help="Seconds each agent may take before it counts as failed.",
)
@click.option(
    "--tool-seconds",
    type=float,
    default=_default("tool_seconds"),
    show_default=True,
    help="Simulated I/O time of each tool call.",
)
@click.option(
    "--constrain",
    type=click.Choice(["never", "auto", "always"]),
    default=_default("constrain"),
    show_default=True,
    help="Constrained decoding of tool calls (auto: where the backend can); 'never' shows the "
    "guardrails' rescues.",
)
@click.option(
    "--sim-speed",
    type=float,
    default=_default("sim_speed"),
    show_default=True,
    help="With --backend sim: multiple of the 0.5B model's speed on two CPU cores.",
)
@click.option(
    "--temperature",
    type=float,
    default=_default("temperature"),
    show_default=True,
    help="Sampling temperature of the agents.",
)
@click.option(
    "--max-tokens",
    type=int,
    default=None,
    help="A fixed cap on each reply [default: the runtime's budget, from the tools' schemas].",
)
@click.option(
    "--background-priority",
    type=int,
    default=_default("background_priority"),
    show_default=True,
    help="Priority of the three background agents (lower runs first).",
)
@click.option(
    "--voice-priority",
    type=int,
    default=_default("voice_priority"),
    show_default=True,
    help="Priority of the voice request (lower runs first).",
)
@seed_option(_default("seed"), "Sampling seed.")
@click.option(
    "--plain",
    is_flag=True,
    help="Print progress lines instead of the live view (the default when stdout is not a "
    "terminal).",
)
@click.pass_context
def demo_command(ctx: click.Context, /, plain: bool, **options: Any) -> None:
    """Run three specialist agents and a high-priority voice request on one inference slot.

    The researcher, analyst and writer run at background priority on the embedded model; once
    they are mid-generation a voice request arrives at high priority and preempts them. The
    live view shows each agent's state, the slot's queue, preemptions and the guardrails'
    rescues; the summary gives the measured figures. A model failing a task is reported, not
    an error; a backend that fails exits 1. In the live view, log events below warning are
    hidden unless --log-level is given.
    """
    config = _config(ctx, options)
    console = Console(highlight=False)
    live = not plain and console.is_terminal
    title = f"forge-rt demo · {config.describe_backend()}"
    try:
        if live:
            with _logs_above_live(ctx), LiveView(console, title) as view:
                report = trio.run(_run, config, view)
        else:
            plain_view = PlainView(console)
            console.print(title, markup=False)
            report = trio.run(_run, config, plain_view)
    except KeyboardInterrupt:
        raise click.Abort() from None
    except ForgeError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc
    console.print()
    for line in report.summary_lines():
        console.print(line, markup=False, soft_wrap=True)


async def _run(config: DemoConfig, view: LiveView | PlainView) -> DemoReport:
    """Run the demo with the view as its event and tick sinks."""
    return await run_demo(config, on_event=view.event, on_tick=view.tick)


def _config(ctx: click.Context, options: dict[str, Any]) -> DemoConfig:
    """The options (command line > environment > --config file > default) as a DemoConfig."""
    backend = str(options["backend"])
    if given(ctx, "sim_speed", config=False) and backend != "sim":
        raise click.UsageError(f"--sim-speed applies to --backend sim, not --backend {backend}")
    if given(ctx, "backend_kind", config=False) and backend in ("local", "sim"):
        raise click.UsageError(
            f"--backend-kind names the API of a --backend URL; --backend {backend} has none "
            "to choose"
        )
    try:
        return DemoConfig.model_validate(options)
    except pydantic.ValidationError as exc:
        problems = "; ".join(_problem(error["loc"], error["msg"]) for error in exc.errors())
        raise click.UsageError(f"invalid demo settings: {problems}", ctx=ctx) from exc


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    """``field: what is wrong`` (a whole-settings check has no field)."""
    text = message.removeprefix("Value error, ")
    return f"{'.'.join(str(part) for part in loc)}: {text}" if loc else text


class _CurrentStderr:
    """A file that writes to whatever ``sys.stderr`` is at the time (the live view swaps it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


@contextmanager
def _logs_above_live(ctx: click.Context) -> Iterator[None]:
    """Route log lines through the live view; keep only warnings unless a level was asked for."""
    root = ctx.find_root()
    if root is ctx or "log_level" not in root.params:
        yield  # run on its own, not under the forge-rt group: logging is not ours to touch
        return
    previous = structlog.get_config()
    # It only needs write() and flush(), which is all PrintLogger calls.
    stream = cast(TextIO, _CurrentStderr())
    changes: dict[str, Any] = {"logger_factory": structlog.PrintLoggerFactory(file=stream)}
    if root.get_parameter_source("log_level") is ParameterSource.DEFAULT:
        changes["wrapper_class"] = structlog.make_filtering_bound_logger(logging.WARNING)
    structlog.configure(**changes)
    try:
        yield
    finally:
        structlog.configure(**{key: previous[key] for key in changes})
