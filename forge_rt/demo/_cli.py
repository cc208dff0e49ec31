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
from pathlib import Path
from typing import Any, TextIO, cast, get_args

import click
import pydantic
import structlog
import trio
from click.core import ParameterSource
from rich.console import Console

from forge_rt.clients import ClientKind
from forge_rt.demo._config import DemoConfig, load_config
from forge_rt.demo._report import DemoReport
from forge_rt.demo._run import run_demo
from forge_rt.demo._view import LiveView, PlainView
from forge_rt.errors import ForgeError

__all__ = ["demo_command"]

_FIELDS = DemoConfig.model_fields


def _default(name: str) -> Any:
    """A DemoConfig field's default, so the options and the model agree."""
    return _FIELDS[name].default


@click.command("demo", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="TOML file of demo settings: top-level keys named like the options, with "
    "underscores (voice_at = 5.0), plus temperature, max_tokens, background_priority and "
    "voice_priority. Options given on the command line win over the file.",
)
@click.option(
    "--backend",
    default=_default("backend"),
    show_default=True,
    help="'local' starts the embedded model, 'sim' the simulated one; or the base URL of a "
    "model server you run (http://host:port, without /v1).",
)
@click.option(
    "--backend-kind",
    type=click.Choice(list(get_args(ClientKind))),
    default=_default("backend_kind"),
    show_default=True,
    help="Which API a --backend URL speaks.",
)
@click.option(
    "--model",
    default=None,
    help="Packaged model for 'local' [default: qwen2.5-coder-0.5b]; model name to request "
    "from a URL backend.",
)
@click.option(
    "--n-ctx", type=int, default=_default("n_ctx"), show_default=True, help="Context window."
)
@click.option(
    "--cache-lines",
    type=int,
    default=None,
    help="Backend KV slots used as cache lines [default: one per agent on local and sim, none "
    "on a URL backend].",
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
    "--seed", type=int, default=_default("seed"), show_default=True, help="Sampling seed."
)
@click.option(
    "--plain",
    is_flag=True,
    help="Print progress lines instead of the live view (the default when stdout is not a "
    "terminal).",
)
@click.pass_context
def demo_command(
    ctx: click.Context, /, config_path: Path | None, plain: bool, **options: Any
) -> None:
    """Run three specialist agents and a high-priority voice request on one inference slot.

    The researcher, analyst and writer run at background priority on the embedded model; once
    they are mid-generation a voice request arrives at high priority and preempts them. The
    live view shows each agent's state, the slot's queue, preemptions and the guardrails'
    rescues; the summary gives the measured figures. A model failing a task is reported, not
    an error; a backend that fails exits 1. In the live view, log events below warning are
    hidden unless --log-level is given.
    """
    config = _config(ctx, config_path, options)
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


def _config(ctx: click.Context, path: Path | None, options: dict[str, Any]) -> DemoConfig:
    """Defaults < the TOML file < options given on the command line."""
    try:
        if path is None:
            return DemoConfig.model_validate(options)
        given = {
            name: value
            for name, value in options.items()
            if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT
        }
        return load_config(path, given)
    except pydantic.ValidationError as exc:
        problems = "; ".join(_problem(error["loc"], error["msg"]) for error in exc.errors())
        raise click.UsageError(f"invalid demo settings: {problems}", ctx=ctx) from exc
    except ValueError as exc:
        raise click.UsageError(f"invalid demo settings: {exc}", ctx=ctx) from exc


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
