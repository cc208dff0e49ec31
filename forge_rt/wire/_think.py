"""Splitting ``<think>…</think>`` reasoning out of a model's visible text.

One splitter serves both the streamed and the whole-body path, so ``send`` and ``stream`` agree
to the character. Only explicit ``<think>`` openers are recognised: a server that starts the
reply inside a think block (the opener is in the prompt template) should be run with its own
reasoning parser (llama-server ``--reasoning-format``, vLLM ``--reasoning-parser``), which moves
the reasoning into ``reasoning_content`` where the client reads it.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ThinkSplitter", "split_think"]

_OPEN = "<think>"
_CLOSE = "</think>"

Part = tuple[Literal["text", "reasoning"], str]


def _held_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkSplitter:
    """Incremental splitter: feed text deltas, get ``("text" | "reasoning", piece)`` parts.

    A possible tag split across two deltas is held back until the next delta decides it.
    Whitespace right after a closing tag is dropped (templates put a blank line there).
    """

    def __init__(self) -> None:
        self._held = ""
        self._inside = False
        self._after_close = False
        self.found = False

    def feed(self, text: str) -> list[Part]:
        """Split one delta; returns the parts that are certain so far."""
        out: list[Part] = []
        buf = self._held + text
        while buf:
            tag = _CLOSE if self._inside else _OPEN
            idx = buf.find(tag)
            if idx < 0:
                keep = _held_suffix(buf, tag)
                self._emit(out, buf[: len(buf) - keep])
                self._held = buf[len(buf) - keep :]
                return out
            self._emit(out, buf[:idx])
            buf = buf[idx + len(tag) :]
            self._inside = not self._inside
            if self._inside:
                self.found = True
            else:
                self._after_close = True
        self._held = ""
        return out

    def flush(self) -> list[Part]:
        """The text ended: release what was held back (an unclosed block stays reasoning)."""
        out: list[Part] = []
        self._emit(out, self._held)
        self._held = ""
        return out

    def _emit(self, out: list[Part], text: str) -> None:
        if not text:
            return
        if self._inside:
            out.append(("reasoning", text))
            return
        if self._after_close:
            text = text.lstrip()
            if not text:
                return
            self._after_close = False
        out.append(("text", text))


def split_think(text: str) -> tuple[str, str | None]:
    """``(visible text, reasoning or None)`` for a whole reply."""
    splitter = ThinkSplitter()
    parts = splitter.feed(text) + splitter.flush()
    visible = "".join(p for kind, p in parts if kind == "text")
    if not splitter.found:
        return visible, None
    reasoning = "".join(p for kind, p in parts if kind == "reasoning").strip()
    return visible, reasoning or None
