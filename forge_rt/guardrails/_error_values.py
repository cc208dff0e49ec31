"""The value a tool's error lists for the one it refused: the rule ``error_values``.

A tool that refuses a value often says which ones it takes -- it quotes them, brackets them,
lists them after a colon ("known ids: outer-dock, inner-basin"). A small model reads the list
and sends its own value again. Which listed value it meant is read here from the values alone,
never from the error's wording:

1. the listed value that *is* the refused one spelled another way -- case, spaces, dashes,
   underscores (``"Inner Basin"`` -> ``"inner-basin"``);
2. else the one listed value the user's request names, spelled any such way;
3. else the one listed value clearly most like the refused one (``"INV-317"`` ->
   ``"INV-0317"``): similar enough, and ahead of the next by a margin.

The corrected call is shown only where the value fits the argument's schema; a value the error
merely echoes back is never one. Where the error lists nothing, or nothing matches, no call is
shown.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from forge_rt.core import ToolSpec
from forge_rt.guardrails._rescue_args import fold, valid_with

__all__ = ["error_value_args", "listed_values"]

_QUOTED = re.compile(r"[`'\"]([^`'\"\n]{1,80})[`'\"]")
_BRACKETED = re.compile(r"[\[({]([^\[\](){}\n]{1,400})[\])}]")
_AFTER_COLON = re.compile(r":\s*([^.;:\n\[\](){}]{1,400})")
_SEPARATOR = re.compile(r"\s*[,|;/]\s*|\s+(?:or|and)\s+", re.IGNORECASE)
_EDGES = " \t`'\"[](){}<>.:!?"
_MAX_WORDS = 4  # a listed value is a name or an id, not a sentence
_SIMILAR = 0.75  # how alike a listed value must be to the refused one (difflib ratio)
_MARGIN = 0.1  # and by how much ahead of the next most alike


def listed_values(message: str) -> list[str]:
    """The values ``message`` quotes or lists (in brackets, or after a colon), in order, each
    once: names and ids of at most four words."""
    spans = [m.group(1) for m in _QUOTED.finditer(message)]
    for pattern in (_BRACKETED, _AFTER_COLON):
        for match in pattern.finditer(message):
            spans += _SEPARATOR.split(match.group(1))
    found = (s.strip(_EDGES) for s in spans)
    return list(dict.fromkeys(v for v in found if v and len(v.split()) <= _MAX_WORDS))


def _named_in(request: str) -> set[str]:
    """Every run of one to four words of ``request``, folded: the values it could name."""
    words = request.split()
    return {
        fold(" ".join(words[i : i + n]))
        for n in range(1, _MAX_WORDS + 1)
        for i in range(len(words) - n + 1)
    }


def _pick(refused: str, values: list[str], request: str) -> str | None:
    """The listed value meant for ``refused`` (see the module docstring), or ``None``."""
    folded = fold(refused)
    others = [v for v in values if v != refused and fold(v)]
    respelled = [v for v in others if fold(v) == folded]
    if respelled:
        return respelled[0]
    named = _named_in(request)
    asked = [v for v in others if fold(v) in named]
    if len(asked) == 1:
        return asked[0]
    scored = sorted(
        ((difflib.SequenceMatcher(None, folded, fold(v)).ratio(), v) for v in others),
        reverse=True,
    )
    if not scored or scored[0][0] < _SIMILAR:
        return None
    if len(scored) > 1 and scored[0][0] - scored[1][0] < _MARGIN:
        return None
    return scored[0][1]


def _refused_field(args: Mapping[str, Any], message: str) -> str | None:
    """The argument the error refused: the one string argument whose value it quotes back,
    else the call's only string argument."""
    strings = {k: v for k, v in args.items() if isinstance(v, str) and v}
    quoted = [k for k, v in strings.items() if v.lower() in message.lower()]
    if len(quoted) == 1:
        return quoted[0]
    return next(iter(strings)) if len(strings) == 1 else None


def error_value_args(
    spec: ToolSpec,
    args: Mapping[str, Any],
    message: str,
    *,
    request: str = "",
    tools: Iterable[str] = (),
) -> dict[str, Any] | None:
    """``args`` with the listed value of ``message`` that the refused argument meant, checked
    against ``spec``; ``None`` where the error lists none that matches. ``request`` is the
    user's, ``tools`` the tool names (a listed tool name is no argument value)."""
    field = _refused_field(args, message)
    if field is None:
        return None
    names = set(tools)
    values = [v for v in listed_values(message) if v not in names]
    value = _pick(str(args[field]), values, request)
    if value is None:
        return None
    return valid_with(spec, args, field, value)
