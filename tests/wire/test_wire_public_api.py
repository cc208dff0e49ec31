"""The public surface of ``forge_rt.wire`` is what ``__all__`` says, and it lives only there."""

from __future__ import annotations

import importlib
import pkgutil

import forge_rt.clients
import forge_rt.wire


def test_all_lists_every_public_name_and_only_those() -> None:
    """Every name in ``__all__`` exists, and every public attribute is listed."""
    public = {n for n in vars(forge_rt.wire) if not n.startswith("_")}
    assert sorted(public) == sorted(forge_rt.wire.__all__)


def test_every_private_module_declares_what_it_offers() -> None:
    """Each module of the package has an ``__all__`` naming attributes it defines."""
    for info in pkgutil.iter_modules(forge_rt.wire.__path__):
        module = importlib.import_module(f"forge_rt.wire.{info.name}")
        assert all(hasattr(module, name) for name in module.__all__), info.name


def test_the_clients_do_not_re_export_the_codecs() -> None:
    """One name, one place: no wire name is also public in ``forge_rt.clients``."""
    assert set() == set(forge_rt.wire.__all__) & set(forge_rt.clients.__all__)
