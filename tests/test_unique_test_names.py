"""Test modules need unique basenames: pytest's default import mode cannot collect two alike."""

from collections import Counter
from pathlib import Path


def test_test_module_basenames_are_unique() -> None:
    """No two test modules (or helper modules) under tests/ share a file name."""
    names = Counter(p.name for p in Path(__file__).parent.rglob("*.py") if p.name != "conftest.py")
    assert [name for name, count in names.items() if count > 1] == []
