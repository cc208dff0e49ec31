"""``forge-rt proxy``: serve the guarded OpenAI + Anthropic API from the command line.

Command-line code: it prints the address through rich and turns startup failures into a clean
exit message. ``proxy_command`` is the click command the main CLI adds.
"""

from __future__ import annotations

import shlex
import signal
from collections.abc import Sequence
from pathlib import Path

import click
import trio
from pydantic import SecretStr, ValidationError
from rich.console import Console

from forge_rt._cli_options import (
    backend_api_key_option,
    backend_kind_option,
    backend_option,
    command_settings,
    config_option,
    env_epilog,
    given,
    host_option,
    model_option,
    n_ctx_option,
    port_option,
    refuse_together,
    retired_option,
)
from forge_rt.errors import ForgeError, PolicyError
from forge_rt.guardrails import Policy
from forge_rt.proxy._config import (
    NAMED_PRIORITIES,
    BackendConfig,
    KeyProfile,
    ProxyConfig,
    ReasoningReplay,
    load_key_file,
)
from forge_rt.proxy._serve import serve_proxy
from forge_rt.runtime import PreemptPolicy

__all__ = ["build_config", "proxy_command"]


def _priority(value: str) -> int:
    if value in NAMED_PRIORITIES:
        return NAMED_PRIORITIES[value]
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an integer or one of {', '.join(NAMED_PRIORITIES)}"
        ) from None


def build_config(
    *,
    host: str,
    port: int,
    backend: str | Sequence[str],
    backend_kind: str,
    backend_api_key: str | None,
    model: str | None,
    gguf: Path | None,
    model_path: str | None,
    n_ctx: int,
    backend_command: str | None = None,
    parallel: int,
    servers: int = 1,
    server_gpus: str | None = None,
    backend_timeout: float = 300.0,
    api_keys: tuple[str, ...],
    key_file: Path | None,
    cors_origins: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    max_body_bytes: int,
    max_messages: int,
    max_tools: int,
    body_timeout: float,
    max_retries: int,
    rescue: bool,
    respond_tool: bool,
    constrain: str,
    reasoning_replay: str,
    default_priority: str,
    anonymous_max_priority: str,
    max_queue: int,
    preempt: str,
    deadline: float | None,
    stall_timeout: float | None = 30.0,
    served_model: str | None,
    policy: Path | None = None,
) -> ProxyConfig:
    """The :class:`ProxyConfig` the command-line options describe (``ValueError`` if invalid).

    ``backend``: ``local`` is the embedded packaged model ``model`` -- or, with ``gguf`` or
    ``model_path``, a managed llama-server or vLLM asked for ``model`` -- and an ``http(s)://``
    URL a server you run, spoken to as ``backend_kind``. ``n_ctx`` is each slot's context
    (the backend gets ``n_ctx * parallel`` in all). Several ``backend`` URLs (the option
    repeated) are servers run as one fleet, each spoken to as ``backend_kind``; a URL written
    ``MODEL=URL`` serves ``MODEL`` (the others ``model``), and where they name several models
    each request goes to the servers of the model it asks for.
    """
    backend_config, more = _backends(
        backend,
        kind=backend_kind,
        api_key=SecretStr(backend_api_key) if backend_api_key else None,
        model=model,
        gguf=gguf,
        model_path=model_path,
        executable=tuple(shlex.split(backend_command)) if backend_command else None,
        n_ctx=n_ctx,
        parallel=parallel,
        timeout_s=backend_timeout,
    )
    priority = _priority(default_priority)
    keys = _keys(api_keys, key_file, priority)
    return ProxyConfig(
        host=host,
        port=port,
        backend=backend_config,
        more_backends=more,
        servers=servers,
        server_gpus=tuple(g.strip() for g in server_gpus.split(",")) if server_gpus else (),
        api_keys=tuple(keys),
        cors_origins=cors_origins,
        allowed_hosts=allowed_hosts,
        max_body_bytes=max_body_bytes,
        max_messages=max_messages,
        max_tools=max_tools,
        body_timeout_s=body_timeout,
        max_retries=max_retries,
        rescue=rescue,
        respond_tool=respond_tool,
        constrain=constrain,
        reasoning_replay=ReasoningReplay(reasoning_replay),
        default_priority=priority,
        anonymous_max_priority=_priority(anonymous_max_priority),
        max_queue=max_queue,
        preempt=PreemptPolicy(preempt),
        request_deadline_s=deadline,
        stall_s=stall_timeout,
        served_model=served_model,
        policy=Policy.load(policy) if policy is not None else None,
    )


def _backends(
    backend: str | Sequence[str],
    *,
    kind: str,
    api_key: SecretStr | None,
    model: str | None,
    gguf: Path | None,
    model_path: str | None,
    executable: tuple[str, ...] | None,
    n_ctx: int,
    parallel: int,
    timeout_s: float,
) -> tuple[BackendConfig, tuple[BackendConfig, ...]]:
    """The first backend and the further ``--backend`` URLs (see :func:`build_config`)."""
    (first_model, first), *more = [_named_url(each) for each in _urls(backend)]
    if first == "sim":
        raise ValueError(
            "the proxy fronts --backend local or a URL; for a simulated backend run "
            "`forge-rt sim` and give its URL as --backend"
        )
    url = None if first == "local" else first
    if url is not None and not _is_url(url):
        raise ValueError(f"--backend {first!r} is neither local, sim nor an http(s):// URL")
    embedded = url is None and gguf is None and model_path is None
    config = BackendConfig(
        kind=kind if url is not None else None,
        url=url,
        api_key=api_key,
        model=None if embedded else first_model or model,
        gguf=gguf,
        model_path=model_path,
        embedded_model=model if embedded else None,
        executable=executable,
        n_ctx=n_ctx * parallel,
        n_parallel=parallel,
        timeout_s=timeout_s,
    )
    others = tuple(
        BackendConfig(
            kind=kind, url=each, api_key=api_key, model=named or model, timeout_s=timeout_s
        )
        for named, each in more
    )
    return config, others


def _keys(api_keys: tuple[str, ...], key_file: Path | None, priority: int) -> list[KeyProfile]:
    """The inbound keys: each ``--api-key`` (named ``default``, or ``key1``, ``key2``, ...)
    at ``priority``, then the key file's profiles."""
    keys = [
        KeyProfile(
            key=SecretStr(key),
            name="default" if len(api_keys) == 1 else f"key{i + 1}",
            priority=priority,
        )
        for i, key in enumerate(api_keys)
    ]
    if key_file is not None:
        keys.extend(load_key_file(key_file))
    return keys


async def _serve(config: ProxyConfig, console: Console) -> None:
    # SIGINT and SIGTERM are received here rather than raised as KeyboardInterrupt wherever
    # trio happens to be: inside a request handler, the server would log it and carry on.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with serve_proxy(config) as url:
            console.print(f"forge-rt proxy listening on {url}", markup=False, style="bold")
            console.print(f"  OpenAI clients:    base_url={url}/v1", markup=False)
            console.print(f"  Anthropic clients: base_url={url}", markup=False)
            async for signum in signals:
                console.print(
                    f"{signal.Signals(signum).name}: finishing requests in flight, then stopping",
                    markup=False,
                )
                break
    console.print("forge-rt proxy stopped", markup=False)


@click.command(name="proxy", context_settings=command_settings("proxy"), epilog=env_epilog("proxy"))
@config_option("proxy")
@host_option()
@port_option(8081)
@backend_option(
    "local",
    help_default="local: the embedded model, or the managed one of --gguf/--model-path",
    several=True,
)
@backend_kind_option()
@backend_api_key_option("proxy")
@model_option(
    "local: the packaged model to serve [default: qwen2.5-coder-0.5b]; with --gguf, "
    "--model-path or a URL: the model name to ask the backend for."
)
@click.option(
    "--gguf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Start and manage llama-server on this GGUF file (instead of --backend).",
)
@click.option(
    "--model-path",
    default=None,
    help="Start and manage `vllm serve` on this model dir/hub id (instead of --backend).",
)
@click.option(
    "--backend-command",
    default=None,
    help="Command that runs the managed backend instead of llama-server / vllm on the PATH.",
)
@n_ctx_option("Context tokens of each slot of an embedded or managed backend.")
@retired_option("--backend-url", "--backend URL", " (--backend-kind names its API)")
@retired_option("--ctx-size", "--n-ctx")
@retired_option("--embedded-model", "--model", " (with --backend local)")
@click.option(
    "--parallel",
    default=1,
    show_default=True,
    help="Slots of a managed or embedded llama-server; above 1 the proxy uses them as KV cache "
    "lines (one generation at a time; a preempted request resumes on its own warm cache).",
)
@click.option(
    "--servers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Start this many of the embedded or managed backend, run as one fleet (a client's "
    "requests stay on the server holding its history; a server that fails is served around).",
)
@click.option(
    "--server-gpus",
    default=None,
    metavar="IDS",
    help="With --servers and --gguf/--model-path: the CUDA device of each server, "
    "comma-separated (e.g. 0,1), given to it as CUDA_VISIBLE_DEVICES.",
)
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    envvar="FORGE_RT_PROXY_API_KEY",
    help="Require this inbound key (repeatable; env FORGE_RT_PROXY_API_KEY).",
)
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="TOML file of inbound keys with per-key priority ([[keys]] name, key, priority).",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="Allow browser calls from this origin (repeatable; '*' for any). Off by default.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="Answer requests whose Host header names this host (repeatable; '*' for any). "
    "Loopback names and the --host address are always allowed.",
)
@click.option(
    "--max-body-bytes", default=8 * 1024 * 1024, show_default=True, help="Larger bodies get 413."
)
@click.option(
    "--max-messages", default=4096, show_default=True, help="More messages in a request get 413."
)
@click.option(
    "--max-tools", default=256, show_default=True, help="More tools in a request get 413."
)
@click.option(
    "--body-timeout", default=30.0, show_default=True, help="Seconds to receive a request body."
)
@click.option("--max-retries", default=3, show_default=True, help="Corrective retries per request.")
@click.option(
    "--rescue/--no-rescue",
    default=True,
    show_default=True,
    help="Rescue tool calls written in text (--no-rescue: native calls only).",
)
@click.option(
    "--respond-tool/--no-respond-tool",
    default=True,
    show_default=True,
    help="Inject the synthetic respond tool.",
)
@click.option(
    "--constrain",
    type=click.Choice(["never", "auto", "always"]),
    default="auto",
    show_default=True,
    help="Constrain replies to the tool-call schema: auto where the backend can, always (fail "
    "at start if it cannot), never (rescue parsing only).",
)
@click.option(
    "--reasoning-replay",
    type=click.Choice([r.value for r in ReasoningReplay]),
    default="none",
    show_default=True,
    help="Which earlier reasoning of the history reaches the backend.",
)
@click.option(
    "--default-priority",
    default="normal",
    show_default=True,
    help="Priority without a key profile or x-forge-priority header (high, normal, low or int).",
)
@click.option(
    "--anonymous-max-priority",
    default="normal",
    show_default=True,
    help="The most urgent priority a request without an API key may ask for.",
)
@click.option("--max-queue", default=64, show_default=True, help="Queued calls before 429.")
@click.option(
    "--preempt",
    type=click.Choice([p.value for p in PreemptPolicy]),
    default="always",
    show_default=True,
    help="When a higher-priority request may interrupt a running one.",
)
@click.option(
    "--deadline", default=600.0, show_default=True, type=float, help="Seconds per request."
)
@click.option(
    "--backend-timeout",
    default=300.0,
    show_default=True,
    type=float,
    help="Seconds the backend may go without sending a byte (raise it for long replies fetched "
    "whole on a slow machine).",
)
@click.option(
    "--stall-timeout",
    default=30.0,
    show_default=True,
    type=float,
    help="Seconds a call may wait for its first token (plus prefill time) or between chunks "
    "before it fails as stalled and the slot moves on.",
)
@click.option("--served-model", default=None, help="Model name to report in responses.")
@click.option(
    "--policy",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A tool policy TOML file (default and [tools], by name: allow or deny): denied tools "
    "a client sends are withheld from the model and their calls refused.",
)
@click.pass_context
def proxy_command(ctx: click.Context, /, **options: object) -> None:
    """Serve an OpenAI- and Anthropic-compatible API with guardrails in front of a model.

    With no backend option it serves the embedded packaged model (--backend local), so
    `forge-rt proxy` alone works on a fresh machine.
    """
    console = Console(soft_wrap=True, highlight=False, stderr=True)
    try:
        _check_backend_options(ctx, _named_url(_urls(options["backend"])[0])[1])
        config = build_config(**options)  # type: ignore[arg-type]
    except (ValueError, ValidationError, PolicyError) as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        trio.run(_serve, config, console)
    except ForgeError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc


def _urls(backend: object) -> list[str]:
    """The ``--backend`` values: one (a config file's or a caller's string) or several."""
    if isinstance(backend, str):
        return [backend]
    values = [str(b) for b in backend] if isinstance(backend, Sequence) else []
    if not values:
        raise ValueError("--backend needs a value: local or a server's URL")
    return values


def _is_url(value: str) -> bool:
    """Whether a ``--backend`` value is a server's URL (not ``local`` or ``sim``)."""
    return value.startswith(("http://", "https://"))


def _named_url(value: str) -> tuple[str | None, str]:
    """A ``--backend`` value as (model, backend): ``MODEL=URL`` names the model a server
    serves; anything else is the backend alone."""
    name, sep, url = value.partition("=")
    if sep and name and _is_url(url):
        return name, url
    return None, value


def _check_backend_options(ctx: click.Context, backend: str) -> None:
    """Refuse options that contradict each other, naming both, before anything starts."""
    for name in ("gguf", "model_path"):
        refuse_together(ctx, name, "backend", "a managed backend is started instead of --backend")
    refuse_together(ctx, "gguf", "model_path", "give one managed backend")
    url = _is_url(backend)
    if given(ctx, "backend_kind") and not url:
        managed = next((m for m in ("gguf", "model_path") if given(ctx, m)), None)
        where = f"--{managed.replace('_', '-')}" if managed else f"--backend {backend}"
        raise click.UsageError(
            f"--backend-kind names the API of a --backend URL; {where} has none to choose: "
            "give --backend URL, or leave --backend-kind out"
        )
    if given(ctx, "backend_command") and not (given(ctx, "gguf") or given(ctx, "model_path")):
        raise click.UsageError(
            "--backend-command runs a managed backend: give --gguf or --model-path"
        )
