"""The public surface of forge_rt.backends.local and forge_rt.backends.managed matches __all__."""

from __future__ import annotations

import types

import pytest

import forge_rt.backends.local
import forge_rt.backends.managed


@pytest.mark.parametrize(
    "package", [forge_rt.backends.local, forge_rt.backends.managed], ids=lambda m: m.__name__
)
def test_all_lists_exactly_the_public_names(package: types.ModuleType) -> None:
    """Every public name is in __all__ and every name in __all__ exists."""
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(public) == sorted(package.__all__)
