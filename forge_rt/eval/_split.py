"""Dev and test: every eval case belongs to one half, fixed by a hash of its id.

A suite that rules are tried on cannot also say how those rules do on work nobody tuned them
to. So every suite -- the own scenarios, the generated workflows, BFCL -- is cut in two by a
stable hash of each case's id: rules are tried, thresholds picked and variants compared on
``dev``; ``test`` is run to publish a figure, never to choose. The cut depends on the id alone
(not on the suite's size, order or the other ids), so a case keeps its half when cases are
added, a sample is drawn or a suite is filtered, and anyone can recompute it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

__all__ = ["SPLITS", "Half", "SplitName", "in_split", "split_of", "take_split"]

Half = Literal["dev", "test"]
SplitName = Literal["dev", "test", "all"]
SPLITS: tuple[SplitName, ...] = ("dev", "test", "all")

# Part of the hashed text: changing it would move every case, so it is fixed for good.
_SALT = b"forge-rt/split/v1:"

_T = TypeVar("_T")


def split_of(case_id: str) -> Half:
    """The half ``case_id`` belongs to: ``dev`` or ``test``, about one case in two each."""
    if not case_id:
        raise ValueError("a case id is a non-empty string")
    digest = hashlib.sha256(_SALT + case_id.encode("utf-8")).digest()
    return "test" if digest[0] & 1 else "dev"


def in_split(case_id: str, split: SplitName) -> bool:
    """Whether ``case_id`` is in ``split`` (every case is in ``all``)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {list(SPLITS)}")
    return split == "all" or split_of(case_id) == split


def take_split(items: Iterable[_T], split: SplitName, case_id: Callable[[_T], str]) -> list[_T]:
    """The items of ``items`` in ``split``, in their order."""
    return [item for item in items if in_split(case_id(item), split)]
