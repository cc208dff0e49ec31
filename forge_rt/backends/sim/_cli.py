"""``forge-rt sim``: serve a simulated backend in the foreground until Ctrl-C."""

from __future__ import annotations

import signal

import click
import pydantic
import trio

from forge_rt._cli_options import (
    command_settings,
    config_option,
    env_epilog,
    host_option,
    model_option,
    n_ctx_option,
    port_option,
    seed_option,
)
from forge_rt.backends.sim._config import FailureRates, Fault, SimConfig
from forge_rt.backends.sim._server import SimBackend

__all__ = ["sim_command"]


def _pairs(option: str, values: tuple[str, ...], known: list[str]) -> dict[str, float]:
    """``NAME=P`` strings as a mapping, or a usage error naming the bad one."""
    out: dict[str, float] = {}
    for value in values:
        name, sep, number = value.partition("=")
        if not sep or name not in known:
            raise click.BadParameter(
                f"{value!r} is not NAME=PROBABILITY with NAME one of: {', '.join(known)}",
                param_hint=option,
            )
        try:
            out[name] = float(number)
        except ValueError:
            raise click.BadParameter(
                f"{value!r}: {number!r} is not a number", param_hint=option
            ) from None
    return out


@click.command(
    "sim", context_settings=command_settings("sim"), epilog=env_epilog("sim", example="PORT")
)
@config_option("sim")
@host_option()
@port_option(0)
@model_option("Model name to report.", default="sim-model")
@n_ctx_option("Context tokens of each slot.")
@click.option("--n-slots", default=1, show_default=True, help="Concurrent inference slots.")
@click.option("--prefill-tps", type=float, help="Prompt tokens per second (default: instant).")
@click.option("--decode-tps", type=float, help="Generated tokens per second (default: instant).")
@click.option(
    "--first-token-latency",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds added before the first token.",
)
@seed_option(0, "Seed of the random model.")
@click.option(
    "--rate",
    "rates",
    multiple=True,
    metavar="DIALECT=P",
    help="Failure rate of one dialect, e.g. --rate bare_json=0.2 (repeatable).",
)
@click.option(
    "--fault-rate",
    "fault_rates",
    multiple=True,
    metavar="FAULT=P",
    help="Rate of one injected fault, e.g. --fault-rate http_503=0.05 (repeatable).",
)
@click.option("--api-key", help="Require this API key (Bearer / x-api-key).")
def sim_command(
    host: str,
    port: int,
    model: str,
    n_ctx: int,
    n_slots: int,
    prefill_tps: float | None,
    decode_tps: float | None,
    first_token_latency: float,
    seed: int,
    rates: tuple[str, ...],
    fault_rates: tuple[str, ...],
    api_key: str | None,
) -> None:
    """Serve a simulated model server (OpenAI, llama-server, Ollama and Anthropic APIs)."""
    try:
        config = SimConfig(
            host=host,
            port=port,
            model=model,
            n_ctx=n_ctx,
            n_slots=n_slots,
            prefill_tps=prefill_tps,
            decode_tps=decode_tps,
            first_token_latency_s=first_token_latency,
            seed=seed,
            rates=FailureRates(**_pairs("--rate", rates, list(FailureRates.model_fields))),
            fault_rates={
                Fault(k): v
                for k, v in _pairs("--fault-rate", fault_rates, [f.value for f in Fault]).items()
            },
            api_key=api_key,
        )
    except pydantic.ValidationError as exc:
        raise click.UsageError(f"invalid sim settings: {exc}") from exc

    async def serve() -> None:
        # The stop signals are received here, not raised as KeyboardInterrupt wherever trio
        # happens to be: inside a request handler the server would log it and carry on (after
        # long mixed traffic, Ctrl-C was once ignored six times in a row).
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with SimBackend.serve(config) as sim:
                click.echo(f"sim serving {config.model} at {sim.url} (Ctrl-C stops it)")
                async for _ in signals:
                    break
        click.echo("sim stopped")

    trio.run(serve)
