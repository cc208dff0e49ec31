"""Degeneration on the stream: a reply that repeats one call or one line is stopped early.

Small models fall into a loop inside one reply: one call, or a cycle of a few, until the token
cap; the same lines (an echoed tool definition, a growing JSON list); or, under a constraint,
nothing but whitespace. Once a reply loops, the rest of it is wasted decoding -- the guardrails
collapse identical calls anyway -- so the guarded step feeds every streamed chunk to a
:class:`RepetitionDetector` and cancels the inference the moment it reports a
:class:`Repetition`; the partial reply goes to the guardrails as it stands.

The detector is pure and incremental: it reads each delta once. Calls written as text are found
with a string-aware brace scan (every top-level JSON object naming a tool, whatever surrounds it:
fences, tags, an array of calls); native calls are read from the tool-call deltas. Two calls are
the same when their JSON is equal with keys sorted and whitespace dropped. The thresholds are
set from real small-model replies, above what healthy ones do.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Literal

import msgspec

from forge_rt.core import ResetChunk, StreamChunk, TextDeltaChunk, ToolCallDeltaChunk
from forge_rt.core._jsonschema import NAME_KEYS

__all__ = [
    "CALL_REPEATS",
    "CYCLE_LINES",
    "LINE_MIN_CHARS",
    "LINE_REPEATS",
    "REPETITION_FINISH_REASON",
    "SPACE_RUN",
    "Repetition",
    "RepetitionDetector",
    "before_the_loop",
    "loop_start",
]

REPETITION_FINISH_REASON = "repetition"
"""The ``finish_reason`` of a reply the guarded step stopped because it repeated itself (the
backend's own reasons are ``stop``, ``length``, ``tool_calls``)."""

CALL_REPEATS = 3
"""A reply is degenerate once it has written the same call this many times: a healthy reply
rarely repeats a call (the validator collapses a duplicate), and stopping at the second copy
would lose the distinct calls of replies that enumerate variations."""

LINE_REPEATS = 8
"""A reply is degenerate once the same line (with at least :data:`LINE_MIN_CHARS` letters or
digits) has appeared this many times: twice the most a healthy reply repeats one (an argument
line shared by pretty-printed calls of a fan-out)."""

CYCLE_LINES = 4
"""The longest block of lines inside a JSON string value (or of sentences, anywhere) that is
looked for repeating back to back (see ``RepetitionDetector``)."""

SPACE_RUN = 64
"""A reply is degenerate once it has written this many whitespace characters in a row: about
three times the longest healthy run (indentation), while a model stuck writing the whitespace a
tool-call constraint admits between JSON tokens would run to the token cap."""

LINE_MIN_CHARS = 4
"""Letters or digits a line needs to be counted: braces, fences and blank lines repeat in every
multi-call reply and say nothing about degeneration."""

_SAMPLE_CHARS = 160
_UNIT_END = re.compile(r"(?<=[.!?]) +|\\n")  # a sentence's end, or a line break in a JSON string
_PROSE_UNIT_END = re.compile(r"(?<=[.!?]) +|\n+")  # a sentence's end, or line breaks in text
_ALNUM = re.compile(r"[A-Za-z0-9]")
_NAMES = "|".join(re.escape(k) for k in NAME_KEYS)
_NAME_KEY = re.compile(rf"""["'](?:{_NAMES})["']\s*:""")
_SPACE = re.compile(r"\s+")
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder(order="sorted").encode


class Repetition(msgspec.Struct, frozen=True, kw_only=True):
    """What made a reply degenerate: ``kind`` of thing repeated, the thing itself, how often."""

    kind: Literal["call", "line", "sentence", "space"]
    text: str
    count: int

    @property
    def reason(self) -> str:
        """One sentence for logs and errors."""
        if self.kind == "space":
            return f"the reply wrote {self.count} whitespace characters in a row"
        return f"the reply wrote the same {self.kind} {self.count} times: {self.text}"


class _Native(msgspec.Struct):
    name: str = ""
    arguments: str = ""
    counted: bool = False


class RepetitionDetector:
    """Reads one reply's stream chunk by chunk and says when it has started to repeat itself:
    :meth:`feed` takes every chunk (text and tool-call deltas are read, reasoning is not, a
    :class:`~forge_rt.core.ResetChunk` starts over) and returns the first :class:`Repetition`
    found, then keeps returning it."""

    def __init__(
        self, *, call_repeats: int = CALL_REPEATS, line_repeats: int = LINE_REPEATS
    ) -> None:
        if call_repeats < 2 or line_repeats < 2:
            raise ValueError(
                f"a repetition needs at least 2 copies, got call_repeats={call_repeats}, "
                f"line_repeats={line_repeats}"
            )
        self._call_repeats = call_repeats
        self._line_repeats = line_repeats
        self.found: Repetition | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the reply so far (it was discarded: a preemption restarted it)."""
        self.found = None
        self._calls: Counter[str] = Counter()
        self._lines: Counter[str] = Counter()
        self._line: list[str] = []
        self._string_lines: list[str] = []  # the last lines of JSON string values
        self._sentence: list[str] = []
        self._sentences: list[str] = []  # the last sentences, of prose and of string values
        self._span: list[str] = []
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._native: dict[int, _Native] = {}
        self._spaces = 0  # whitespace characters in a row, to the last one read

    def feed(self, chunk: StreamChunk) -> Repetition | None:
        """Read one chunk; the repetition found so far, if any."""
        if self.found is not None:
            return self.found
        if isinstance(chunk, TextDeltaChunk):
            self._text(chunk.text)
        elif isinstance(chunk, ToolCallDeltaChunk):
            self._tool_delta(chunk)
        elif isinstance(chunk, ResetChunk):
            self.reset()
        return self.found

    # --- text ----------------------------------------------------------------------------

    def _space(self, piece: str) -> None:
        """Count whitespace in a row across deltas; a run of :data:`SPACE_RUN` is a loop."""
        for c in piece:
            self._spaces = self._spaces + 1 if c.isspace() else 0
            if self._spaces >= SPACE_RUN and self.found is None:
                self.found = Repetition(kind="space", text="", count=self._spaces)
                return

    def _text(self, piece: str) -> None:
        self._space(piece)
        if self.found is not None:
            return
        for c in piece:
            if c == "\n":
                self._end_line()
                self._end_sentence()
            elif c == "n" and self._in_string and self._escaped:
                # A line break written inside a JSON string: see _end_string_line.
                for part in (self._line, self._sentence):
                    if part and part[-1] == "\\":
                        part.pop()
                self._end_string_line()
                self._end_sentence()
            else:
                self._line.append(c)
                self._read_sentence(c)
            self._brace(c)
            if self.found is not None:
                return

    def _brace(self, c: str) -> None:
        """Track JSON objects; strings count only inside one (prose quotes need not pair)."""
        if self._depth == 0:
            if c == "{":
                self._depth, self._span = 1, ["{"]
            return
        self._span.append(c)
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif c == "\\":
                self._escaped = True
            elif c == '"':
                self._in_string = False
        elif c == '"':
            self._in_string = True
        elif c == "{":
            self._depth += 1
        elif c == "}":
            self._depth -= 1
            if self._depth == 0:
                self._end_object("".join(self._span))

    def _take_line(self) -> str | None:
        """The line just ended, or ``None`` where it has too few letters or digits to count
        (see :data:`LINE_MIN_CHARS`); the next line starts empty either way."""
        line = "".join(self._line).strip()
        self._line = []
        return line if len(_ALNUM.findall(line)) >= LINE_MIN_CHARS else None

    def _end_line(self) -> None:
        line = self._take_line()
        if line is None:
            return
        self._lines[line] += 1
        count = self._lines[line]
        if count >= self._line_repeats and self.found is None:
            self.found = Repetition(kind="line", text=line[:_SAMPLE_CHARS], count=count)

    def _end_string_line(self) -> None:
        """A line of a JSON string value ended (an escaped line break): a loop is the same block
        of one to :data:`CYCLE_LINES` lines over and over, at least :data:`LINE_REPEATS` lines
        (and three blocks) in a row. A value is data, so a line that recurs is no loop by
        itself (a heading of each record); only a block repeated back to back is.
        """
        line = self._take_line()
        if line is not None:
            self._cycle(self._string_lines, line, "line")

    def _read_sentence(self, c: str) -> None:
        """A sentence ends at a space after ``.``, ``!`` or ``?`` (and at a line break)."""
        if c == " " and self._sentence and self._sentence[-1] in ".!?":
            self._end_sentence()
        else:
            self._sentence.append(c)

    def _end_sentence(self) -> None:
        """A sentence ended: a loop is a block of one to :data:`CYCLE_LINES` sentences written
        over and over, as for the lines of a string value -- a model looping inside one
        paragraph writes no line break for a line counter to see."""
        sentence = "".join(self._sentence).strip()
        self._sentence = []
        if len(_ALNUM.findall(sentence)) >= LINE_MIN_CHARS:
            self._cycle(self._sentences, sentence, "sentence")

    def _cycle(self, recent: list[str], item: str, kind: Literal["line", "sentence"]) -> None:
        """Add ``item`` to ``recent``; a block of one to :data:`CYCLE_LINES` items repeated back
        to back, at least :data:`LINE_REPEATS` items (and three blocks) in a row, is a loop."""
        if self.found is not None:
            return
        recent.append(item)
        del recent[: -CYCLE_LINES * self._line_repeats]
        for size in range(1, CYCLE_LINES + 1):
            blocks = _blocks_needed(size, self._line_repeats)
            span = size * blocks
            if len(recent) >= span and all(
                recent[-i] == recent[-i - size] for i in range(1, span - size + 1)
            ):
                text = " / ".join(recent[-size:])
                self.found = Repetition(kind=kind, text=text[:_SAMPLE_CHARS], count=blocks)
                return

    def _end_object(self, span: str) -> None:
        key = _call_key(span)
        if key is not None:
            self._count_call(key)

    # --- native calls ----------------------------------------------------------------------

    def _tool_delta(self, chunk: ToolCallDeltaChunk) -> None:
        call = self._native.setdefault(chunk.index, _Native())
        if chunk.name:
            call.name = chunk.name
        call.arguments += chunk.arguments_delta
        self._space(chunk.arguments_delta)
        if self.found is not None:
            return
        if call.counted or not call.name:
            return
        try:
            args = _decode(call.arguments)
        except msgspec.DecodeError:
            return  # not complete yet
        call.counted = True
        self._count_call(_encode({"name": call.name, "arguments": args}).decode())

    def _count_call(self, key: str) -> None:
        self._calls[key] += 1
        count = self._calls[key]
        if count >= self._call_repeats and self.found is None:
            self.found = Repetition(kind="call", text=key[:_SAMPLE_CHARS], count=count)


def _call_key(span: str) -> str | None:
    """The identity of the call ``span`` writes (None: the object names no tool): its content,
    keys sorted; for one that does not decode, its text without whitespace."""
    try:
        value: Any = _decode(span)
    except msgspec.DecodeError:
        return _SPACE.sub("", span) if _NAME_KEY.search(span) else None
    if isinstance(value, dict) and any(isinstance(value.get(k), str) for k in NAME_KEYS):
        return _encode(value).decode()
    return None


def _blocks_needed(size: int, repeats: int) -> int:
    """How many copies of a block of ``size`` items make a loop: ``repeats`` items in all, and
    three blocks at least."""
    return max(3, -(-repeats // size))


def before_the_loop(raw: str) -> str | None:
    """A reply's raw text cut after the first copy of the block of sentences (or of a string
    value's lines) it went on writing back to back, as the detector found it, with a string
    closed there (the lenient reader closes the brackets): the value the model wrote, once.
    ``None`` where the text does not end in such a loop."""
    end = loop_start(raw, _UNIT_END)
    return None if end is None else raw[:end] + '"'


def loop_start(text: str, units: re.Pattern[str] = _PROSE_UNIT_END) -> int | None:
    """Where the loop ``text`` ends in begins its second copy: the end of the first copy of the
    block of units (sentences, or lines: what ``units`` ends) written back to back to the end,
    three copies or more. ``None`` where the text does not end in such a loop."""
    seps = list(units.finditer(text))
    starts = [0, *(m.end() for m in seps)]
    pieces = [text[starts[i] : m.start()].strip() for i, m in enumerate(seps)]
    for size in range(1, CYCLE_LINES + 1):
        first = len(pieces) - size  # walk back while each unit equals the one a block later
        while first > 0 and pieces[first - 1] == pieces[first - 1 + size]:
            first -= 1
        if first > 0 and pieces[first - 1].endswith(pieces[first - 1 + size]):
            first -= 1  # the loop's first sentence opens the value: the call's text before it
        blocks = (len(pieces) - first) // size
        if first < len(pieces) - size and blocks >= _blocks_needed(size, LINE_REPEATS):
            return seps[first + size - 1].start()
    return None
