"""The ``forge-rt`` command-line vocabulary, written down once: one flag per concept.

Every subcommand builds its shared options from these decorators, so the same thing has the
same name, choices and default everywhere (``tests/test_cli_vocabulary.py`` walks every
command and fails on a second spelling). See ``docs/cli.md`` for the table.

- ``--backend``: where the model is: ``sim``, ``local`` (the embedded model) or a base URL.
- ``--backend-kind``: the protocol a URL backend speaks; the same choices everywhere.
- ``--model``: the packaged model for ``local``, the served model's name for a URL.
- ``--n-ctx``: the context of each backend slot (one request's window).
- ``--host`` / ``--port`` / ``--seed`` / ``--config``.

Settings come, first wins, from the command line, the environment
(``FORGE_RT_<COMMAND>_<OPTION>``, click's ``auto_envvar_prefix``), the ``--config`` TOML file
(click's ``default_map``), then the option's default. This module imports nothing of forge_rt,
so every layer's command can use it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import click
from click.core import ParameterSource

__all__ = [
    "BACKEND_KINDS",
    "DEFAULT_BACKEND_KIND",
    "DEFAULT_HOST",
    "DEFAULT_N_CTX",
    "backend_api_key_option",
    "backend_kind_option",
    "backend_option",
    "command_settings",
    "config_option",
    "env_epilog",
    "given",
    "host_option",
    "model_option",
    "n_ctx_option",
    "port_option",
    "refuse_together",
    "retired_option",
    "seed_option",
]

F = TypeVar("F", bound=Callable[..., Any])

BACKEND_KINDS: tuple[str, ...] = ("openai", "llamaserver", "ollama", "vllm", "anthropic")
"""Every protocol adapter (``forge_rt.clients.ClientKind``; a test keeps the two equal)."""

DEFAULT_BACKEND_KIND: Final = "openai"
"""The plain OpenAI chat-completions API: every OpenAI-compatible server speaks it (llama-server,
vLLM, Ollama, LM Studio, ...), so it is the one choice that works against an arbitrary server;
the other kinds add server-specific extras and fail on a server without them."""

DEFAULT_N_CTX = 8192
"""Context tokens of each slot of an embedded, managed or simulated backend: room for a client's
tools and a few turns of history, for a small KV cache (a 0.5B model: about 100 MB a slot)."""

DEFAULT_HOST = "127.0.0.1"
"""Loopback: exposing a server to the network is a deliberate act."""


def command_settings(*path: str) -> dict[str, Any]:
    """The click ``context_settings`` of ``forge-rt <path...>``: -h, and env-var overrides.

    The prefix is set on each command, not only inherited from the group, so a command run
    on its own (tests, ``python -m``) reads the same variables.
    """
    prefix = "_".join(("FORGE_RT", *(p.upper().replace("-", "_") for p in path)))
    return {"help_option_names": ["-h", "--help"], "auto_envvar_prefix": prefix}


def env_epilog(*path: str, example: str = "PORT", config: bool = True) -> str:
    """The help epilog that names a command's environment variables and the precedence."""
    prefix = command_settings(*path)["auto_envvar_prefix"]
    where = (
        "command line > environment > --config file > default"
        if config
        else ("command line > environment > default")
    )
    return (
        f"Every option can also be set in the environment as {prefix}_<OPTION> (the long "
        f"name in capitals, dashes as underscores, e.g. {prefix}_{example}=...). Precedence: {where}."
    )


def given(ctx: click.Context, name: str, *, config: bool = True) -> bool:
    """Whether option ``name`` was set at all: on the command line, in the environment, or
    (unless ``config=False``) in the ``--config`` file -- anything but its default."""
    sources = {ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT}
    if config:
        sources.add(ParameterSource.DEFAULT_MAP)
    return ctx.get_parameter_source(name) in sources


def _flag(ctx: click.Context, name: str) -> str:
    """The long flag of parameter ``name`` (``n_ctx`` -> ``--n-ctx``)."""
    for param in ctx.command.params:
        if param.name == name and isinstance(param, click.Option):
            return max(param.opts, key=len)
    return f"--{name.replace('_', '-')}"


def refuse_together(ctx: click.Context, first: str, second: str, why: str) -> None:
    """A ``UsageError`` naming both flags when options ``first`` and ``second`` were both set."""
    if given(ctx, first) and given(ctx, second):
        raise click.UsageError(f"{_flag(ctx, first)} and {_flag(ctx, second)} conflict: {why}")


def _load_config(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Read a TOML file whose keys are long option names into the other options' defaults.

    Keys take dashes or underscores (``n-ctx`` or ``n_ctx``); a ``--x/--no-x`` flag takes
    ``x = false`` or ``no-x = true``. An unknown key is an error that lists the known ones.
    """
    if value is None:
        return None
    try:
        data = tomllib.loads(value.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {value}: {exc}", ctx=ctx, param=param) from exc
    keys: dict[str, tuple[click.Option, bool]] = {}
    for p in ctx.command.params:
        if not isinstance(p, click.Option) or p.name in (param.name, "help") or p.hidden:
            continue
        for opt in p.opts:
            if opt.startswith("--"):
                keys[opt[2:]] = (p, False)
        for opt in p.secondary_opts:
            if opt.startswith("--"):
                keys[opt[2:]] = (p, True)
    defaults: dict[str, Any] = {}
    for key, item in data.items():
        found = keys.get(key.replace("_", "-"))
        if found is None or found[0].name is None:
            raise click.BadParameter(
                f"{value}: unknown key {key!r}; the keys are the option names: "
                f"{', '.join(sorted(keys))}",
                ctx=ctx,
                param=param,
            )
        target, negated = found
        if negated:
            if not isinstance(item, bool):
                raise click.BadParameter(
                    f"{value}: {key!r} is a flag: give true or false", ctx=ctx, param=param
                )
            item = not item
        elif target.multiple and isinstance(item, str):
            item = [item]
        assert target.name is not None
        defaults[target.name] = item
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


def config_option(what: str) -> Callable[[F], F]:
    """``--config FILE``: a TOML file of option values (keys: the long option names)."""
    return click.option(
        "--config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        is_eager=True,
        expose_value=False,
        callback=_load_config,
        help=f"TOML file of {what} settings: keys are the long option names, with dashes or "
        "underscores (n_ctx = 8192); the command line and the environment win over it.",
    )


def backend_option(
    default: str | None, *, help_default: str | None = None, several: bool = False
) -> Callable[[F], F]:
    """``--backend sim|local|URL``: where the model is; ``several``: repeatable, for a fleet
    of servers (``MODEL=URL``: a server of that model)."""
    shown = help_default if help_default is not None else default
    fleet = (
        " Repeat it for several servers, run as one fleet; write MODEL=URL for a server of "
        "MODEL, and each request goes to the servers of the model it names."
        if several
        else ""
    )
    return click.option(
        "--backend",
        default=(default,) if several else default,
        multiple=several,
        metavar="sim|local|URL",
        help="'local' starts the embedded model, 'sim' the simulated one; or the base URL of a "
        f"model server you run (http://host:port, without /v1) [default: {shown}].{fleet}",
    )


def backend_kind_option() -> Callable[[F], F]:
    """``--backend-kind``: the protocol a URL backend speaks (every command: same choices)."""
    return click.option(
        "--backend-kind",
        type=click.Choice(BACKEND_KINDS),
        default=DEFAULT_BACKEND_KIND,
        show_default=True,
        help="Which API a --backend URL speaks. openai is the default because every "
        "OpenAI-compatible server speaks it; the others add a server's own extras.",
    )


def backend_api_key_option(command: str) -> Callable[[F], F]:
    """``--backend-api-key``: the key sent to a URL backend (never logged, never shown)."""
    prefix = command_settings(command)["auto_envvar_prefix"]
    return click.option(
        "--backend-api-key",
        envvar=[f"{prefix}_BACKEND_API_KEY", "FORGE_RT_BACKEND_API_KEY"],
        default=None,
        show_default=False,
        help=f"Key sent to a --backend URL (env {prefix}_BACKEND_API_KEY, or "
        "FORGE_RT_BACKEND_API_KEY); needed by anthropic; never logged.",
    )


def model_option(help: str, *, default: str | None = None) -> Callable[[F], F]:
    """``--model``: the packaged model for ``local``, the served model's name for a URL."""
    return click.option("--model", default=default, show_default=default is not None, help=help)


def n_ctx_option(help: str = "Context tokens of each backend slot.") -> Callable[[F], F]:
    """``--n-ctx``: context of each slot, one default for every embedded or simulated model."""
    return click.option(
        "--n-ctx",
        type=click.IntRange(min=1),
        default=DEFAULT_N_CTX,
        show_default=True,
        help=help,
    )


def host_option() -> Callable[[F], F]:
    """``--host``: the address a server listens on (loopback unless told)."""
    return click.option(
        "--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on."
    )


def port_option(default: int) -> Callable[[F], F]:
    """``--port``: the TCP port a server listens on (0: any free one)."""
    return click.option(
        "--port", type=int, default=default, show_default=True, help="TCP port (0: any free one)."
    )


def seed_option(default: int | None, help: str) -> Callable[[F], F]:
    """``--seed``: the seed of whatever a command samples."""
    return click.option(
        "--seed", type=int, default=default, show_default=default is not None, help=help
    )


def retired_option(old: str, new: str, hint: str = "") -> Callable[[F], F]:
    """A hidden ``old`` flag that fails loudly naming its replacement, so old scripts break
    with a fix in hand rather than running with the flag silently reinterpreted."""

    def refuse(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> None:
        if value:
            raise click.UsageError(f"{old} was renamed: use {new}{hint}", ctx=ctx)

    return click.option(
        old,
        "retired_" + old.lstrip("-").replace("-", "_"),
        multiple=True,
        hidden=True,
        expose_value=False,
        allow_from_autoenv=False,
        callback=refuse,
    )
