"""Guardrail text in a model's reply: found, and kept from the client.

The proxy corrects the model in a private copy of the history -- argument errors, retry nudges,
loop warnings, replayed results -- and small models copy that text back: into a ``respond``
message, into prose, into a tool argument. None of it may reach the client as content (an
agent framework would show it, or act on it, as the model's answer). :data:`GUARDRAIL_MARKERS`
is the text that marks it; :func:`cut` keeps what a reply says before the first marker,
:class:`LeakFilter` does the same for text arriving in pieces (the stream gate), so that a
streamed answer and a whole one end at the same place; :func:`marked_argument` finds the marker
in a call's arguments.

The markers are the fixed openings and phrases of the corrections the guardrails write
(``forge_rt.guardrails._nudges``) and of the wire codecs' placeholder result, plus the chat
template's ``<tool_response>`` markup; a test builds every correction and checks it is caught.
Each is specific enough that a real answer does not contain it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from forge_rt.wire import UNANSWERED_CALL_TEXT

__all__ = ["GUARDRAIL_MARKERS", "LeakFilter", "cut", "find_marker", "marked_argument"]

GUARDRAIL_MARKERS: tuple[str, ...] = (
    # The tags that open every tool-channel correction.
    "[ArgumentError]",
    "[NotExecuted]",
    "[ToolError]",
    "[ToolResolutionError]",
    "[StepEnforcementError]",
    "[PrereqError]",
    "[LoopError]",
    "[AnswerError]",
    "[CoverageError]",
    "[Note] You already called",
    # The retry nudges (user channel): their causes and their demands.
    "Your reply was empty.",
    "Your reply was text, not a tool call.",
    "Your tool call could not be parsed",
    "Your reply was cut off at the length limit",
    "Your reply was stopped because it kept writing",
    "This part could not be read:",
    "Please call one of the tools:",
    "Reply with the call only, for example:",
    "Your next reply must be exactly one tool call",
    "STILL NO TOOL CALL",
    "Now answer the user with the facts from the results above",
    # A result the codecs write for a call the history never answered.
    UNANSWERED_CALL_TEXT[:40],
    # The chat template's result markup, echoed instead of an answer.
    "<tool_response>",
    "</tool_response>",
)

_MARKER = re.compile("|".join(re.escape(m) for m in GUARDRAIL_MARKERS))
# Every proper prefix of a marker: the tail of a piece that may still grow into one.
_PREFIXES = frozenset(m[:i] for m in GUARDRAIL_MARKERS for i in range(1, len(m)))
_LONGEST = max(map(len, GUARDRAIL_MARKERS))


def find_marker(text: str) -> str | None:
    """The first guardrail marker in ``text``, or ``None``."""
    found = _MARKER.search(text)
    return found.group() if found is not None else None


def cut(text: str) -> tuple[str, bool]:
    """``text`` up to its first guardrail marker, and whether there was one."""
    found = _MARKER.search(text)
    if found is None:
        return text, False
    return text[: found.start()], True


def _partial_tail(text: str) -> int:
    """Length of the longest tail of ``text`` that is the start of a marker."""
    for size in range(min(_LONGEST - 1, len(text)), 0, -1):
        if text[-size:] in _PREFIXES:
            return size
    return 0


class LeakFilter:
    """:func:`cut` for text arriving in pieces: what may be released of each piece.

    A tail that may be the start of a marker is held until the next piece decides it; once a
    marker appears nothing more passes (``leaked``). Fed a whole text and then :meth:`flush`,
    it releases exactly ``cut(text)[0]``.
    """

    def __init__(self) -> None:
        self._pending = ""
        self.leaked = False

    @property
    def pending(self) -> str:
        """Text held back: it may be the start of a marker."""
        return self._pending

    def feed(self, piece: str) -> str:
        """The part of ``piece`` (after what was held) that may be released now."""
        if self.leaked:
            return ""
        text = self._pending + piece
        found = _MARKER.search(text)
        if found is not None:
            self.leaked = True
            self._pending = ""
            return text[: found.start()]
        keep = _partial_tail(text)
        self._pending = text[len(text) - keep :]
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The text is complete: what was held is no marker, release it."""
        out, self._pending = self._pending, ""
        return out


def marked_argument(value: Any, path: str = "$") -> str | None:
    """The JSON path of the first string in ``value`` (a call's arguments) holding a marker."""
    if isinstance(value, str):
        return path if _MARKER.search(value) is not None else None
    if isinstance(value, Mapping):
        items: Any = ((f"{path}.{k}", v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for where, inner in items:
        found = marked_argument(inner, where)
        if found is not None:
            return found
    return None
