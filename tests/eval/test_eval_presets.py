"""``--sim-rates``: named failure mixes and dialect=p overrides."""

from __future__ import annotations

import pytest

from forge_rt.backends.sim import FailureRates
from forge_rt.eval._presets import DEFAULT_SIM_RATES, SIM_RATE_PRESETS, parse_sim_rates


def test_no_values_mean_the_default_small_model_mix() -> None:
    """Without --sim-rates the eval uses the documented small-model preset."""
    assert DEFAULT_SIM_RATES == "small-model"
    assert SIM_RATE_PRESETS["small-model"] == parse_sim_rates([])


def test_pairs_override_a_preset_and_commas_split_items() -> None:
    """A preset sets every rate; later dialect=p pairs replace single rates."""
    rates = parse_sim_rates(["small-model,bare_text=0.3", "hermes=0"])
    expected = SIM_RATE_PRESETS["small-model"].model_dump() | {"bare_text": 0.3, "hermes": 0.0}
    assert FailureRates(**expected) == rates


def test_pairs_alone_start_from_a_perfect_model() -> None:
    """Without a preset, rates not named are zero."""
    assert FailureRates(bare_json=0.5) == parse_sim_rates(["bare_json=0.5"])


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            ["nope"],
            r"^unknown sim-rates preset 'nope'; presets: perfect, mild, small-model, qwen-0\.5b$",
        ),
        (["mild,perfect"], r"^give at most one preset, got \['mild', 'perfect'\]$"),
        (["json=0.1"], r"^'json=0\.1': 'json' is not a failure dialect; use one of \["),
        (["bare_json=lots"], r"^'bare_json=lots': 'lots' is not a number$"),
        (["bare_json=0.7,bare_text=0.7"], r"^invalid sim rates .*must sum to at most 1"),
    ],
    ids=["unknown-preset", "two-presets", "unknown-dialect", "not-a-number", "sum-over-one"],
)
def test_bad_values_name_the_problem(values: list[str], message: str) -> None:
    """Each mistake raises ValueError saying which item is wrong and what is allowed."""
    with pytest.raises(ValueError, match=message):
        parse_sim_rates(values)


def test_qwen_preset_never_calls_natively() -> None:
    """The measured Qwen2.5-Coder-0.5B mix has no native calls: its failures add up to 1."""
    assert pytest.approx(1.0) == sum(SIM_RATE_PRESETS["qwen-0.5b"].as_dict().values())
    assert sum(SIM_RATE_PRESETS["perfect"].as_dict().values()) == 0.0
