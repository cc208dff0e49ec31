"""Prompts that resume a cut reply from its own tokens, not from its text tokenized again.

A reply preempted half-way is continued by sending its partial text after the prompt. Text
tokenized again is not always the token sequence the model wrote (``"{\\n" + " " + " \\""``
may come back as ``"{\\n" + "  \\""``), and at temperature 0 a different token history can
lead to different text. llama-server's ``/completion`` takes a prompt of text and token ids
mixed, so :class:`ResumablePrompts` remembers, for the last few raw generations, the prompt
they were sent and the pieces (text and token ids) they streamed; a later prompt that spells
one of those prompts plus some of its streamed text is sent as that prompt followed by the
very tokens, and only text no piece covers is sent as text.

Matching is by text alone, so a remembered generation can only ever stand in for exactly the
text it wrote: reusing it is never less faithful than tokenizing the text again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from forge_rt.wire import CompletionPiece, PromptPart

__all__ = ["ResumablePrompts"]

PromptKey = str | tuple[PromptPart, ...]


def _key(parts: Sequence[PromptPart]) -> PromptKey:
    return parts[0] if len(parts) == 1 and isinstance(parts[0], str) else tuple(parts)


class _Generation:
    """One raw generation: the prompt parts it was sent, the text they spell, what it streamed."""

    __slots__ = ("parts", "pieces", "text")

    def __init__(self, parts: list[PromptPart], text: str) -> None:
        self.parts = parts
        self.text = text
        self.pieces: list[CompletionPiece] = []

    def resume(self, text: str) -> tuple[int, list[PromptPart]] | None:
        """How much of ``text`` this generation covers, and the prompt parts for all of
        ``text``; None when ``text`` does not begin with this generation's prompt."""
        if not text.startswith(self.text):
            return None
        at = len(self.text)
        ids: list[int] = []
        waiting: list[int] = []  # tokens of a piece with no text yet (a split character)
        for piece in self.pieces:
            if piece.tokens is None:
                break  # the server did not say which tokens wrote it: text from here on
            if not piece.text:
                waiting.extend(piece.tokens)
                continue
            if not text.startswith(piece.text, at):
                break
            ids += [*waiting, *piece.tokens]
            waiting.clear()
            at += len(piece.text)
        rest = text[at:]
        return at, _joined([*self.parts, *ids, *([rest] if rest else [])])


def _joined(parts: list[PromptPart]) -> list[PromptPart]:
    """``parts`` with neighbouring texts made one: the server reads a prompt array of texts
    alone as several prompts, and tokenizes each text of a mixed one on its own."""
    out: list[PromptPart] = []
    for part in parts:
        if isinstance(part, str) and out and isinstance(out[-1], str):
            out[-1] += part
        else:
            out.append(part)
    return out


class ResumablePrompts:
    """The prompt parts for a raw prompt text, reusing the tokens of recent generations.

    ``keep`` bounds how many generations are remembered (least recently sent go first).
    """

    def __init__(self, keep: int = 32) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self._keep = keep
        self._generations: OrderedDict[PromptKey, _Generation] = OrderedDict()

    def __len__(self) -> int:
        return len(self._generations)

    def prompt(self, text: str) -> list[PromptPart]:
        """The parts to send for ``text``, remembered as a generation about to stream: the
        remembered generation that covers most of ``text`` with its own tokens, else the text."""
        best: tuple[int, list[PromptPart]] = (0, [text])
        for generation in self._generations.values():
            found = generation.resume(text)
            if found is not None and found[0] > best[0]:
                best = found
        parts = best[1]
        key = _key(parts)
        self._generations.pop(key, None)
        self._generations[key] = _Generation(parts, text)
        while len(self._generations) > self._keep:
            self._generations.popitem(last=False)
        return parts

    def streaming(self, prompt: str | Sequence[PromptPart], pieces: list[CompletionPiece]) -> None:
        """The generation sent ``prompt`` (a body's prompt field) streams into ``pieces`` (a
        decoder's live list)."""
        key = prompt if isinstance(prompt, str) else _key(prompt)
        generation = self._generations.get(key)
        if generation is not None:
            generation.pieces = pieces
