"""A call that runs a tool again on that tool's own result is sent back once.

Asked "How many US dollars is 250 euros?", the real Qwen2.5-Coder-1.5B converted 250 at 1.08
("270.00"), then converted 270 at 1.08 ("291.60") and answered with that, 3 runs of 3; the 0.5B
did the same. Each call is valid, and the loop guard sees no repeat: one argument changed -- to
what the tool had just returned. A transformation applied to its own output is applied twice.

:func:`fed_own_result` finds such a call: the same tool as the turn's last successful call of
it, the same arguments but one, and that one now the previous call's output (the one number it
holds, or the whole of it). The facade refuses it **once per turn**, pointing at the result it already has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["fed_own_result"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def fed_own_result(args: Mapping[str, Any], previous: Mapping[str, Any], output: str) -> str | None:
    """The field of ``args`` that holds ``output`` -- what the same tool returned for
    ``previous`` -- where every other argument is as in ``previous``; else ``None``."""
    if set(args) != set(previous):
        return None
    changed = [k for k in args if args[k] != previous[k]]
    if len(changed) != 1:
        return None
    field = changed[0]
    value = args[field]
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        # Only a result that is one number: "page 1 of 2" names the next page, not a value to
        # transform again.
        numbers = {float(m.group()) for m in _NUMBER.finditer(output)}
        return field if numbers == {float(value)} else None
    if isinstance(value, str) and value.strip() and value.strip() == output.strip():
        return field
    return None
