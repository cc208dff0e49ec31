"""What a tool needs from the world: the closed set of capabilities a policy decides on.

A :class:`~forge_rt.core.ToolDef` declares its ``needs`` as a set of :class:`Capability`; a
tool that declares nothing is treated as needing every one (the most demanding profile), so a
policy that denies ``costs_money`` also withholds a tool nobody said is free, and every place
that shows needs flags it as undeclared.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from forge_rt.errors import WorkflowDefinitionError

__all__ = ["ALL_CAPABILITIES", "Capability", "parse_capabilities"]


class Capability(enum.StrEnum):
    """One thing a tool may do beyond computing its result.

    ``network``: reaches another machine. ``writes_state``: changes something that outlives
    the call (a file, a row, a thermostat). ``spawns_processes``: starts programs.
    ``calls_llm``: asks a language model (its own inference, maybe on the same slot).
    ``costs_money``: spends money (a paid API, a purchase).
    """

    NETWORK = "network"
    WRITES_STATE = "writes_state"
    SPAWNS_PROCESSES = "spawns_processes"
    CALLS_LLM = "calls_llm"
    COSTS_MONEY = "costs_money"


ALL_CAPABILITIES: frozenset[Capability] = frozenset(Capability)
"""What an undeclared tool is taken to need."""


def parse_capabilities(values: Iterable[str], *, where: str) -> frozenset[Capability]:
    """``values`` as capabilities, or :class:`WorkflowDefinitionError` naming the bad one and
    the known ones (``where`` says whose needs these are, for the message)."""
    out: set[Capability] = set()
    for value in values:
        try:
            out.add(Capability(value))
        except ValueError:
            known = ", ".join(c.value for c in Capability)
            raise WorkflowDefinitionError(
                f"{where}: unknown capability {value!r}; the capabilities are {known}"
            ) from None
    return frozenset(out)
