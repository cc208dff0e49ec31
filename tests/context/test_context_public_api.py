"""The public surface of ``forge_rt.context`` is exactly what ``__all__`` says."""

from __future__ import annotations

import forge_rt.context


def test_all_lists_every_public_name_and_only_those() -> None:
    """Every name in ``__all__`` exists, and every public attribute is listed."""
    public = {n for n in vars(forge_rt.context) if not n.startswith("_")}
    assert sorted(public) == sorted(forge_rt.context.__all__)
    assert all(hasattr(forge_rt.context, name) for name in forge_rt.context.__all__)
