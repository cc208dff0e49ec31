"""Named failure-rate mixes for evals on the simulated backend, and the ``--sim-rates`` syntax.

Each preset is a :class:`~forge_rt.backends.sim.FailureRates`: the probability of each way an
intended tool call comes out wrong; the rest is a correct native call.

``perfect``
    Every reply a correct native call: the ceiling, and a check that the suite itself is sound.
``mild``
    A capable 7-8B model: 80% native calls; the rest mostly JSON in text, a little prose and a
    few wrong calls.
``small-model`` (the default)
    A 1-3B model: 30% native calls; 45% a call written as text in one of the dialects (bare
    JSON, fenced JSON, Hermes tags, Qwen-Coder XML); 12% prose with no call; 7% an invented
    tool; 4% a dropped or mistyped argument; 2% the final ``respond`` called too early.
``qwen-0.5b``
    The shape measured on Qwen2.5-Coder-0.5B behind llama-server (see LOCAL_MODEL.md): never a
    native call; about three quarters of replies hold a rescuable call in text; 14% empty or
    prose; 7% invented tools; 4% bad arguments (the sim has no "broken JSON" dialect, so the
    measured 5% of unparseable JSON is folded into prose and bad arguments).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType

import pydantic

from forge_rt.backends.sim import FailureRates

__all__ = ["DEFAULT_SIM_RATES", "SIM_RATE_PRESETS", "parse_sim_rates"]

SIM_RATE_PRESETS = MappingProxyType(
    {
        "perfect": FailureRates(),
        "mild": FailureRates(
            bare_json=0.05,
            fenced_json=0.05,
            hermes=0.02,
            bare_text=0.03,
            unknown_tool=0.01,
            wrong_args=0.02,
            premature_terminal=0.02,
        ),
        "small-model": FailureRates(
            bare_json=0.15,
            fenced_json=0.15,
            hermes=0.05,
            qwen_coder=0.10,
            bare_text=0.12,
            unknown_tool=0.07,
            wrong_args=0.04,
            premature_terminal=0.02,
        ),
        "qwen-0.5b": FailureRates(
            bare_json=0.40,
            fenced_json=0.30,
            hermes=0.03,
            qwen_coder=0.02,
            bare_text=0.14,
            unknown_tool=0.07,
            wrong_args=0.04,
        ),
    }
)
"""Preset name -> failure rates; see the module docstring for what each one stands for."""

DEFAULT_SIM_RATES = "small-model"


def parse_sim_rates(values: Iterable[str]) -> FailureRates:
    """Failure rates from ``--sim-rates`` values: preset names and ``dialect=p`` pairs.

    Each value may hold several items separated by commas. A preset sets every rate; pairs
    then override single rates, so ``small-model,bare_text=0.3`` is the small-model mix with
    more prose. Pairs without a preset start from all rates zero. No values at all means the
    default preset. Raises :class:`ValueError` naming the bad item.
    """
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    if not items:
        return SIM_RATE_PRESETS[DEFAULT_SIM_RATES]
    presets = [item for item in items if "=" not in item]
    if len(presets) > 1:
        raise ValueError(f"give at most one preset, got {presets}")
    base: dict[str, float] = {}
    if presets:
        try:
            base = SIM_RATE_PRESETS[presets[0]].model_dump()
        except KeyError:
            raise ValueError(
                f"unknown sim-rates preset {presets[0]!r}; presets: {', '.join(SIM_RATE_PRESETS)}"
            ) from None
    fields = list(FailureRates.model_fields)
    for item in items:
        if "=" not in item:
            continue
        name, _, number = item.partition("=")
        name = name.strip()
        if name not in fields:
            raise ValueError(f"{item!r}: {name!r} is not a failure dialect; use one of {fields}")
        try:
            base[name] = float(number)
        except ValueError:
            raise ValueError(f"{item!r}: {number.strip()!r} is not a number") from None
    try:
        return FailureRates(**base)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'rates'}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"invalid sim rates {items}: {problems}") from None
