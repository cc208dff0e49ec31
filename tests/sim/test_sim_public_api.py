"""The package's public surface is exactly what ``__all__`` says."""

from __future__ import annotations

import forge_rt.backends.sim as sim


def test_all_lists_every_public_name_and_only_those() -> None:
    """Every public attribute is in ``__all__`` and every ``__all__`` name exists."""
    public = {
        name
        for name in vars(sim)
        if not name.startswith("_")
        and getattr(getattr(sim, name), "__module__", "").startswith("forge_rt.backends.sim")
    }
    assert public == set(sim.__all__) - {"Intent", "Oracle"}
    assert all(hasattr(sim, name) for name in sim.__all__)
