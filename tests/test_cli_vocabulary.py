"""One CLI vocabulary: every `forge-rt` command spells a concept one way, with one default.

The tests walk every subcommand's click parameters (the group's included) against a table of
concepts, their canonical flag and the spellings that must not come back; they pin the
UsageErrors for retired flags and conflicting ones, the config-file format and the precedence
command line > environment > config file > default.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import click
import pytest
from click.testing import CliRunner

from forge_rt._cli_options import (
    BACKEND_KINDS,
    DEFAULT_BACKEND_KIND,
    DEFAULT_HOST,
    DEFAULT_N_CTX,
    command_settings,
)
from forge_rt.cli import SUBCOMMANDS, main
from forge_rt.clients import ClientKind
from forge_rt.demo import DemoConfig
from forge_rt.demo._cli import _config, demo_command
from forge_rt.proxy._cli import build_config, proxy_command

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

CONCEPTS: dict[str, tuple[str, frozenset[str]]] = {
    "where the backend is": ("--backend", frozenset({"--backend-url", "--base-url", "--url"})),
    "the backend's protocol": (
        "--backend-kind",
        frozenset({"--kind", "--client-kind", "--backend-type", "--protocol", "--api"}),
    ),
    "context size": (
        "--n-ctx",
        frozenset({"--ctx-size", "--context", "--context-size", "--ctx", "--num-ctx", "-c"}),
    ),
    "the model": ("--model", frozenset({"--embedded-model", "--model-name", "--packaged-model"})),
    "listen port": ("--port", frozenset({"-p", "--listen-port"})),
    "listen address": ("--host", frozenset({"--bind", "--listen", "--address"})),
    "seed": ("--seed", frozenset({"--random-seed", "--rng-seed"})),
    "config file": ("--config", frozenset({"--config-file", "--conf", "--settings"})),
    "inbound API key": ("--api-key", frozenset({"--key", "--token", "--auth-key"})),
    "the backend's API key": (
        "--backend-api-key",
        frozenset({"--backend-key", "--backend-token", "--upstream-key"}),
    ),
}
"""Concept -> (its one flag, the spellings that mean it too and must not be used)."""

SAME_DEFAULT = {"--backend-kind": DEFAULT_BACKEND_KIND, "--n-ctx": DEFAULT_N_CTX}
"""Flags whose default is one value everywhere (``--host`` too: see its own test)."""

PER_COMMAND_DEFAULT = {
    "--backend": "each command's own job: demo and proxy the embedded model, eval the sim",
    "--port": "the proxy has a well-known port, the sim any free one",
    "--seed": "eval leaves local and URL runs unseeded unless told",
    "--model": "the packaged default is resolved by the backend, the sim reports a label",
}
"""Flags whose default may differ across commands, and why."""

SETTINGS_COMMANDS = {"forge-rt demo", "forge-rt eval", "forge-rt proxy", "forge-rt sim"}
"""The commands with settings worth a file: each takes the shared ``--config``."""


def _commands() -> Iterator[tuple[str, click.Command]]:
    """``forge-rt`` and every (sub)command below it, by command path."""
    pending: list[tuple[str, click.Command]] = [("forge-rt", main)]
    for name, entry in SUBCOMMANDS.items():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        pending.append((f"forge-rt {name}", command))
    while pending:
        path, command = pending.pop(0)
        yield path, command
        if isinstance(command, click.Group) and command is not main:
            pending.extend((f"{path} {n}", c) for n, c in command.commands.items())


def _options() -> list[tuple[str, click.Option]]:
    """Every visible option of every command (hidden ones are the retired spellings)."""
    return [
        (path, param)
        for path, command in _commands()
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
    ]


def _default(param: click.Option) -> object:
    """An option's default; click's "no default" sentinel counts as None, as click passes it."""
    return None if type(param.default).__name__ == "Sentinel" else param.default


def _invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), prog_name="forge-rt", env=env)


def test_no_command_spells_a_known_concept_another_way() -> None:
    """No option of any command uses a retired or alternative spelling of a known concept."""
    found = [
        f"{path}: {opt} means {concept}; use {canonical}"
        for path, param in _options()
        for opt in (*param.opts, *param.secondary_opts)
        for concept, (canonical, others) in CONCEPTS.items()
        if opt in others
    ]
    assert found == []


@pytest.mark.parametrize("flag", sorted(SAME_DEFAULT))
def test_a_shared_flag_has_one_default_everywhere(flag: str) -> None:
    """--backend-kind and --n-ctx default to the same value in every command that has them."""
    defaults = {path: _default(param) for path, param in _options() if flag in param.opts}
    assert len(defaults) >= 2, f"{flag} is in fewer than two commands: {defaults}"
    assert {path: SAME_DEFAULT[flag] for path in defaults} == defaults


def test_every_listening_command_binds_loopback_by_default() -> None:
    """--host defaults to 127.0.0.1 wherever a server listens."""
    hosts = {path: _default(param) for path, param in _options() if "--host" in param.opts}
    assert hosts == {"forge-rt proxy": DEFAULT_HOST, "forge-rt sim": DEFAULT_HOST}


def test_every_flag_is_in_the_vocabulary_or_has_one_default() -> None:
    """A flag used by several commands with different defaults is listed, with a reason."""
    defaults: dict[str, set[str]] = {}
    for _, param in _options():
        for opt in param.opts:
            if opt.startswith("--") and opt != "--help":
                defaults.setdefault(opt, set()).add(repr(_default(param)))
    differing = sorted(opt for opt, seen in defaults.items() if len(seen) > 1)
    assert sorted(PER_COMMAND_DEFAULT) == differing


def test_backend_kind_offers_every_adapter_in_every_command() -> None:
    """--backend-kind's choices are the same everywhere: every ClientKind, anthropic included."""
    assert get_args(ClientKind) == BACKEND_KINDS
    choices = {
        path: tuple(param.type.choices)  # type: ignore[attr-defined]
        for path, param in _options()
        if "--backend-kind" in param.opts
    }
    assert {"forge-rt demo", "forge-rt eval", "forge-rt proxy"} == set(choices)
    assert {path: BACKEND_KINDS for path in choices} == choices


def test_the_commands_with_settings_share_one_config_loader() -> None:
    """demo, eval, proxy and sim take --config through the one shared TOML loader."""
    callbacks = {path: param.callback for path, param in _options() if "--config" in param.opts}
    assert set(callbacks) == SETTINGS_COMMANDS
    assert len({id(callback) for callback in callbacks.values()}) == 1


def test_every_command_reads_its_own_environment_prefix() -> None:
    """Each command's env-var prefix is FORGE_RT_<COMMAND PATH>, and its help names it."""
    for path, command in _commands():
        words = path.split()[1:]
        expected = command_settings(*words)["auto_envvar_prefix"]
        assert expected == command.context_settings["auto_envvar_prefix"], path
        if not isinstance(command, click.Group) or path == "forge-rt eval":
            assert f"{expected}_<OPTION>" in (command.epilog or ""), path


# --- retired and conflicting flags -----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend-url", "http://h:1"], "--backend-url was renamed: use --backend URL"),
        (["--ctx-size", "4096"], "--ctx-size was renamed: use --n-ctx"),
        (["--embedded-model", "qwen2.5-coder-0.5b"], "--embedded-model was renamed: use --model"),
    ],
    ids=["backend-url", "ctx-size", "embedded-model"],
)
def test_a_retired_proxy_flag_fails_naming_its_replacement(args: list[str], message: str) -> None:
    """An old script's flag is a usage error that names the new flag, not a silent default."""
    result = _invoke("proxy", *args)
    assert result.exit_code == 2
    assert f"Error: {message}" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["proxy", "--backend-kind", "llamaserver"],
            "--backend-kind names the API of a --backend URL; --backend local has none",
        ),
        (
            ["proxy", "--gguf", "README.md", "--backend", "http://h:1"],
            "--gguf and --backend conflict",
        ),
        (
            ["proxy", "--gguf", "README.md", "--model-path", "org/m"],
            "--gguf and --model-path conflict",
        ),
        (
            ["proxy", "--gguf", "README.md", "--backend-kind", "vllm"],
            "--backend-kind names the API of a --backend URL; --gguf has none",
        ),
        (["proxy", "--backend", "sim"], "run `forge-rt sim` and give its URL as --backend"),
        (["demo", "--sim-speed", "2"], "--sim-speed applies to --backend sim, not --backend local"),
        (["demo", "--backend", "sim", "--backend-kind", "vllm"], "--backend sim has none"),
        (
            ["eval", "--backend", "http://h:1", "--model", "m", "--n-ctx", "2048"],
            "--n-ctx sets the embedded model's context (--backend local)",
        ),
        (
            ["eval", "--backend", "http://h:1", "--model", "m", "--backend-kind", "anthropic"],
            "an anthropic backend needs its API key: give --backend-api-key",
        ),
    ],
    ids=[
        "proxy-kind-alone",
        "proxy-gguf-url",
        "proxy-gguf-model-path",
        "proxy-gguf-kind",
        "proxy-sim",
        "demo-sim-speed",
        "demo-kind-sim",
        "eval-n-ctx-url",
        "eval-anthropic-key",
    ],
)
def test_conflicting_flags_are_usage_errors(args: list[str], message: str) -> None:
    """Flags that contradict each other exit 2 naming the problem, before anything starts."""
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


# --- config files and precedence -------------------------------------------------------------


def _demo(args: list[str], env: dict[str, str] | None = None) -> DemoConfig:
    """The DemoConfig `forge-rt demo ARGS` would run, parsed without running it."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        with demo_command.make_context("demo", list(args)) as ctx:
            options = {k: v for k, v in ctx.params.items() if k != "plain"}
            return _config(ctx, options)


def test_the_shipped_demo_config_loads() -> None:
    """examples/demo.toml is a valid demo configuration and every key in it takes effect."""
    config = _demo(["--config", str(EXAMPLES / "demo.toml")])
    assert (
        config.backend,
        config.sim_speed,
        config.voice_at,
        config.n_ctx,
        config.tool_seconds,
    ) == ("sim", 4.0, 2.0, 8192, 0.3)


def test_the_shipped_proxy_config_loads() -> None:
    """examples/proxy.toml builds a proxy config: the embedded model, its context, port 8081."""
    path = str(EXAMPLES / "proxy.toml")
    with proxy_command.make_context("proxy", ["--config", path]) as ctx:
        config = build_config(**ctx.params)
    assert (
        config.backend.mode,
        config.backend.embedded_model,
        config.backend.n_ctx,
        config.port,
    ) == ("embedded", "qwen2.5-coder-0.5b", 8192, 8081)


@pytest.mark.parametrize(
    ("file", "env", "flag", "expected"),
    [
        (False, False, False, 0),
        (True, False, False, 1),
        (True, True, False, 2),
        (True, True, True, 3),
        (False, True, False, 2),
    ],
    ids=["default", "file", "env-over-file", "flag-over-env", "env-over-default"],
)
def test_command_line_beats_environment_beats_file_beats_default(
    tmp_path: Path, file: bool, env: bool, flag: bool, expected: int
) -> None:
    """--seed from the command line wins over FORGE_RT_DEMO_SEED, which wins over --config."""
    path = tmp_path / "demo.toml"
    path.write_text('backend = "sim"\nseed = 1\n')
    args = ["--backend", "sim"] + (["--config", str(path)] if file else [])
    args += ["--seed", "3"] if flag else []
    config = _demo(args, {"FORGE_RT_DEMO_SEED": "2"} if env else None)
    assert expected == config.seed


def test_a_config_key_takes_dashes_or_underscores_and_negated_flags(tmp_path: Path) -> None:
    """n-ctx and n_ctx are one key; no-rescue = true is rescue = false."""
    path = tmp_path / "proxy.toml"
    path.write_text("n_ctx = 2048\nno-rescue = true\n")
    with proxy_command.make_context("proxy", ["--config", str(path)]) as ctx:
        assert (ctx.params["n_ctx"], ctx.params["rescue"]) == (2048, False)


def test_an_unknown_config_key_lists_the_option_names(tmp_path: Path) -> None:
    """A key that is no option of the command is a usage error naming it and the real keys."""
    path = tmp_path / "proxy.toml"
    path.write_text("ctx-size = 2048\n")
    result = _invoke("proxy", "--config", str(path))
    assert result.exit_code == 2
    assert "unknown key 'ctx-size'; the keys are the option names: " in result.output
    assert "n-ctx" in result.output
