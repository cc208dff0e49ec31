"""The top-level and runtime packages export exactly what their ``__all__`` lists."""

import importlib

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "forge_rt",
        "forge_rt.runtime",
        "forge_rt.core",
        "forge_rt.eval",
        "forge_rt.store",
        "forge_rt.trace",
        "forge_rt.guardrails",
    ],
)
def test_all_lists_the_public_names(name: str) -> None:
    """Every public (non-underscore, non-module) attribute is in ``__all__`` and vice versa."""
    module = importlib.import_module(name)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_") and not isinstance(value, type(importlib))
    }
    assert set(module.__all__) - {"__version__"} == public


def test_importing_forge_rt_does_not_configure_logging() -> None:
    """The library never configures global logging (only the CLI does)."""
    import logging

    import forge_rt  # noqa: F401

    assert logging.getLogger().handlers == [] or all(
        type(h).__module__.startswith("_pytest") for h in logging.getLogger().handlers
    )
