"""What of a reply may reach the client while it is still being generated.

A guarded reply is only known to be valid once it is complete, yet clients want tokens as they
come. :class:`StreamGate` sees every chunk of one attempt and releases only output that no later
verdict can take back:

- ``PASS`` (no guardrails: the request has no tools): everything streams.
- ``RESPOND`` (the synthetic ``respond`` tool is offered): the reply's prose is the ``message``
  argument of a ``respond`` call, so that string streams, decoded, as it is generated -- from a
  native call (``{"message": "...`` in the argument deltas) or from a call written as JSON text
  (``{"name": "respond", "arguments": {"message": "...``, optionally fenced or in
  ``<tool_call>`` tags). Everything else is held until the reply is validated.
- ``PROSE`` (tools but no ``respond`` tool): text streams until something that could start a
  tool call appears (``{``, a code fence, ``<tool_call>``, ``[TOOL_CALLS]``, ``name(`` of an
  offered tool); from there on the attempt is held.
- ``HOLD`` (a tool call is required): nothing streams before validation; prose is never the
  answer.

In ``RESPOND`` and ``PROSE`` modes the released text also passes a
:class:`~forge_rt.proxy._leaks.LeakFilter`: guardrail text the model copied back (an argument
error, a retry nudge, ``<tool_response>`` markup) never streams; the attempt's text ends where
it begins, as the whole reply's answer does (:func:`~forge_rt.proxy._leaks.cut`).

Once an attempt has released anything it is *committed*: the client saw it, so it cannot be
silently replaced by a retry. A :class:`~forge_rt.core.ResetChunk` (the slot preempted the
call and restarts it) does not retract anything either: the regenerated output is compared with
what was already released, and only what goes beyond it is released. If the regenerated output
diverges from what the client saw, the gate stops releasing (``diverged``) and the caller ends
the response with an error rather than splice two different replies together.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
)
from forge_rt.guardrails import JSON_CALL_OPENERS, TEXT_CALL_MARKERS
from forge_rt.proxy._leaks import LeakFilter

__all__ = ["GateMode", "JsonStringDecoder", "StreamGate", "match_respond_prefix"]

_WS = " \t\r\n"
_PARTIAL = -1

# A call of ``respond`` written as JSON text, token by token (whitespace allowed between).
_RESPOND_BODY = ("{", '"name"', ":", f'"{RESPOND_TOOL_NAME}"', ",")
_ARG_KEYS = ('"arguments"', '"parameters"')
_MESSAGE_OPEN = ("{", '"message"', ":", '"')
_TEXT_PATTERNS: tuple[tuple[str, ...], ...] = tuple(
    (*opener, *_RESPOND_BODY, key, ":", *_MESSAGE_OPEN)
    for opener in JSON_CALL_OPENERS
    for key in _ARG_KEYS
)
# Past this many characters without a match the text is not a respond call opening.
_MAX_PREFIX = 512


def _match_tokens(text: str, tokens: Sequence[str]) -> int | None:
    """End index of ``tokens`` matched at the start of ``text``; ``_PARTIAL`` when ``text`` is
    a prefix of a possible match; ``None`` when it cannot match."""
    i = 0
    n = len(text)
    for token in tokens:
        while i < n and text[i] in _WS:
            i += 1
        if i == n:
            return _PARTIAL
        piece = text[i : i + len(token)]
        if not token.startswith(piece):
            return None
        if len(piece) < len(token):
            return _PARTIAL
        i += len(token)
    return i


def match_respond_prefix(text: str, *, native: bool) -> int | None:
    """Where the ``message`` string of a respond call starts in ``text``.

    ``native``: ``text`` is a native call's arguments (``{"message": "``); otherwise it is reply
    text that writes the whole call. Returns the index just after the string's opening quote,
    ``-1`` when more text is needed to decide, ``None`` when ``text`` is not such a call.
    """
    patterns = (_MESSAGE_OPEN,) if native else _TEXT_PATTERNS
    partial = False
    for tokens in patterns:
        end = _match_tokens(text, tokens)
        if end is None:
            continue
        if end == _PARTIAL:
            partial = True
            continue
        return end
    if partial and len(text) <= _MAX_PREFIX:
        return _PARTIAL
    return None


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_PLAIN = re.compile(r'[^"\\]+')


class JsonStringDecoder:
    """Decodes the inside of a JSON string arriving in pieces; stops at the closing quote.

    An escape cut between two pieces waits for the next one. Lenient where small models are
    sloppy: raw newlines pass through, and an unknown escape keeps its backslash.
    """

    def __init__(self) -> None:
        self._pending = ""
        self.closed = False

    def feed(self, piece: str) -> tuple[str, str]:
        """Decode ``piece``: ``(decoded text, what followed the closing quote)``."""
        if self.closed:
            return "", piece
        text = self._pending + piece
        self._pending = ""
        out: list[str] = []
        i = 0
        n = len(text)
        while i < n:
            plain = _PLAIN.match(text, i)
            if plain is not None:
                out.append(plain.group())
                i = plain.end()
                continue
            if text[i] == '"':
                self.closed = True
                return "".join(out), text[i + 1 :]
            # A backslash escape.
            if i + 1 >= n:
                self._pending = text[i:]
                break
            kind = text[i + 1]
            if kind != "u":
                out.append(_ESCAPES.get(kind, "\\" + kind))
                i += 2
                continue
            if i + 6 > n:
                self._pending = text[i:]
                break
            code = _hex(text[i + 2 : i + 6])
            if code is None:
                out.append(text[i : i + 2])
                i += 2
                continue
            if 0xD800 <= code < 0xDC00:
                rest = text[i + 6 : i + 12]
                if len(rest) < 6 and _may_become_escape(rest):
                    self._pending = text[i:]  # the low half of the pair may be on its way
                    break
                low = _hex(rest[2:]) if rest.startswith("\\u") else None
                if low is not None and 0xDC00 <= low < 0xE000:
                    out.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                    i += 12
                    continue
            out.append(chr(code) if not 0xD800 <= code < 0xE000 else "\ufffd")
            i += 6
        return "".join(out), ""


def _may_become_escape(text: str) -> bool:
    """Whether ``text`` is the start of a ``\\uXXXX`` escape."""
    return "\\u".startswith(text[:2]) and all(c in "0123456789abcdefABCDEF" for c in text[2:])


def _hex(digits: str) -> int | None:
    if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
        return None
    return int(digits, 16)


# Text that may start a call written as text, for PROSE mode: the rescue parser's dialects.
_PROSE_LITERALS = TEXT_CALL_MARKERS
_WORD_TAIL = re.compile(r"(?<![\w.\-])([A-Za-z_][\w.\-]*)(\s*)$")


def _prose_marker(names: Sequence[str]) -> re.Pattern[str]:
    literal = "|".join(re.escape(m) for m in _PROSE_LITERALS)
    calls = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    call_part = rf"|(?<![\w.\-])(?:{calls})\s*\(" if calls else ""
    return re.compile(rf"\{{|\[\s*\{{|{literal}{call_part}")


def _held_suffix(text: str, names: Sequence[str]) -> int:
    """Length of the tail of ``text`` that might still grow into a marker.

    That is a proper prefix of a literal marker (or a ``[`` that a ``{`` may follow), or a
    trailing word that is the start of a tool's name (or the whole name, before its ``(``).
    """
    held = 0
    for marker in _PROSE_LITERALS:
        for size in range(min(len(marker) - 1, len(text)), 0, -1):
            if marker.startswith(text[-size:]):
                held = max(held, size)
                break
    bracket = text.rstrip(_WS)
    if bracket.endswith("["):
        held = max(held, len(text) - len(bracket) + 1)
    word = _WORD_TAIL.search(text)
    if word is not None:
        name = word.group(1)
        spaced = bool(word.group(2))
        if any(n == name if spaced else n.startswith(name) for n in names):
            held = max(held, len(text) - word.start())
    return held


class GateMode(enum.Enum):
    """How much of a reply may stream before it is validated (see the module docstring)."""

    PASS = "pass"
    RESPOND = "respond"
    PROSE = "prose"
    HOLD = "hold"


class _State(enum.Enum):
    PREFIX = "prefix"  # deciding whether this is a respond call / prose
    STRING = "string"  # releasing the respond message
    AFTER = "after"  # the respond message closed; holding the rest
    HOLD = "hold"  # nothing more of this attempt is released before validation


class StreamGate:
    """Filters one request's stream, attempt by attempt; see the module docstring.

    ``feed`` returns the chunks the client may see now. Call ``new_attempt`` before each
    retry. Only text and reasoning deltas are ever released early; tool calls are sent by the
    caller once validated.
    """

    def __init__(self, mode: GateMode, *, tool_names: Sequence[str] = ()) -> None:
        self.mode = mode
        self._names = tuple(tool_names)
        self._marker = _prose_marker(tool_names) if mode is GateMode.PROSE else None
        self.released_text = ""  # everything released to the client, all attempts
        self.diverged = False
        self.resets = 0
        self.new_attempt()

    def new_attempt(self) -> None:
        """Forget the previous attempt's held output (a retry is about to start)."""
        self._text = ""
        self._pending = ""
        self._held: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_released = False
        self._state = _State.PREFIX
        self._string = JsonStringDecoder()
        self._native_args = ""
        self._native_state = _State.PREFIX
        self._native_string = JsonStringDecoder()
        self._native_name: str | None = None
        self._native_other = False
        self._leak = LeakFilter()
        self.attempt_text = ""  # text released in this attempt
        self._attempt_reasoning = ""
        self._skip_text = ""
        self._skip_reasoning = ""
        self.native_calls = False

    # -- what the caller asks --------------------------------------------------------------

    @property
    def committed(self) -> bool:
        """Whether this attempt has released text the client saw."""
        return bool(self.attempt_text)

    @property
    def message_closed(self) -> bool:
        """RESPOND mode: the streamed respond message reached its closing quote."""
        return self._string.closed or self._native_string.closed

    @property
    def held_reasoning(self) -> str:
        """This attempt's reasoning not yet released."""
        return "" if self._reasoning_released else "".join(self._reasoning)

    @property
    def prose_tail(self) -> str:
        """PROSE mode: text not yet released (a possible marker's start, or everything held)."""
        return self._leak.pending + self._pending + "".join(self._held)

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, chunk: StreamChunk) -> list[StreamChunk]:
        """The chunks of ``chunk`` the client may see now (possibly none)."""
        if isinstance(chunk, ResetChunk):
            self._reset()
            return []
        if self.diverged or self.mode is GateMode.HOLD:
            return []
        if isinstance(chunk, ReasoningDeltaChunk):
            if self.mode is GateMode.PASS or self._reasoning_released:
                return self._release_reasoning(chunk.text)
            self._reasoning.append(chunk.text)
            return []
        if isinstance(chunk, TextDeltaChunk):
            self._text += chunk.text
            if self.mode is GateMode.PASS:
                return self._release_text(chunk.text)
            if self.mode is GateMode.RESPOND:
                return self._respond_text(chunk.text)
            return self._prose_text(chunk.text)
        if isinstance(chunk, ToolCallDeltaChunk):
            self.native_calls = True
            if self.mode is GateMode.PASS:
                if self.resets:
                    # A restarted call's tool deltas cannot be matched against what was sent.
                    self.diverged = True
                    return []
                return [chunk]
            if self.mode is GateMode.RESPOND:
                return self._respond_native(chunk)
            return []
        return []

    def _reset(self) -> None:
        """The attempt restarts from scratch: what it released must be regenerated first."""
        self.resets += 1
        released_text, released_reasoning = self.attempt_text, self._attempt_reasoning
        reasoning_was_released = self._reasoning_released
        self.new_attempt()
        self._skip_text = released_text
        self._skip_reasoning = released_reasoning
        self.attempt_text = released_text
        self._attempt_reasoning = released_reasoning
        self._reasoning_released = reasoning_was_released

    # -- releasing (with replay after a reset) ---------------------------------------------

    def release(self, text: str) -> list[StreamChunk]:
        """Release validated ``text`` now (the held reasoning goes first)."""
        return self._release_text(text) if text else self.flush_reasoning()

    def _release_text(self, text: str) -> list[StreamChunk]:
        if self._skip_text:
            text = self._skip(text, "text")
            if not text:
                return []
        out = self.flush_reasoning()
        self.attempt_text += text
        self.released_text += text
        out.append(TextDeltaChunk(text))
        return out

    def _release_reasoning(self, text: str) -> list[StreamChunk]:
        if self._skip_reasoning:
            text = self._skip(text, "reasoning")
            if not text:
                return []
        self._attempt_reasoning += text
        return [ReasoningDeltaChunk(text)]

    def _skip(self, text: str, kind: str) -> str:
        """Drop the part of ``text`` the client already has; flag a divergence."""
        skip = self._skip_text if kind == "text" else self._skip_reasoning
        size = min(len(skip), len(text))
        if text[:size] != skip[:size]:
            self.diverged = True
            return ""
        rest = skip[size:]
        if kind == "text":
            self._skip_text = rest
        else:
            self._skip_reasoning = rest
        return text[size:]

    def flush_reasoning(self) -> list[StreamChunk]:
        """Release this attempt's held reasoning (before its first released text)."""
        if self._reasoning_released:
            return []
        self._reasoning_released = True
        held = "".join(self._reasoning)
        self._reasoning = []
        return self._release_reasoning(held) if held else []

    # -- RESPOND mode ----------------------------------------------------------------------

    def _respond_text(self, delta: str) -> list[StreamChunk]:
        if self._native_state is _State.STRING or self._native_state is _State.AFTER:
            return []
        if self._state is _State.PREFIX:
            start = match_respond_prefix(self._text, native=False)
            if start is None:
                self._state = _State.HOLD
                return []
            if start == _PARTIAL:
                return []
            self._state = _State.STRING
            delta = self._text[start:]
        if self._state is _State.STRING:
            decoded, _after = self._string.feed(delta)
            safe = self._leak.feed(decoded)
            if self._string.closed:
                self._state = _State.AFTER
                safe += self._leak.flush()
            return self._release_text(safe) if safe else []
        return []

    def _respond_native(self, chunk: ToolCallDeltaChunk) -> list[StreamChunk]:
        if chunk.index != 0:
            self._native_other = True
        if chunk.name is not None and chunk.index == 0:
            self._native_name = (self._native_name or "") + chunk.name
        if (
            self._native_other
            or self._state in (_State.STRING, _State.AFTER)
            or self._native_state in (_State.AFTER, _State.HOLD)
        ):
            return []
        if self._native_name is None or not RESPOND_TOOL_NAME.startswith(self._native_name):
            self._native_state = _State.HOLD
            return []
        self._native_args += chunk.arguments_delta
        if self._native_name != RESPOND_TOOL_NAME:
            return []  # the name may still be arriving in pieces
        delta = chunk.arguments_delta
        if self._native_state is _State.PREFIX:
            start = match_respond_prefix(self._native_args, native=True)
            if start is None:
                self._native_state = _State.HOLD
                return []
            if start == _PARTIAL:
                return []
            self._native_state = _State.STRING
            delta = self._native_args[start:]
        decoded, _after = self._native_string.feed(delta)
        safe = self._leak.feed(decoded)
        if self._native_string.closed:
            self._native_state = _State.AFTER
            safe += self._leak.flush()
        return self._release_text(safe) if safe else []

    def release_held_message(self) -> list[StreamChunk]:
        """RESPOND mode: the message ended without its closing quote (out of tokens); release
        the tail held as a possible marker's start (nothing, if guardrail text was found)."""
        return self.release(self._leak.flush())

    # -- PROSE mode ------------------------------------------------------------------------

    def _prose_text(self, delta: str) -> list[StreamChunk]:
        if self._state is _State.HOLD:
            self._held.append(delta)
            return []
        assert self._marker is not None
        text = self._pending + delta
        found = self._marker.search(text)
        if found is not None:
            self._state = _State.HOLD
            self._pending = ""
            self._held.append(text[found.start() :])
            # What follows is a call's start, which no guardrail text continues: the tail the
            # leak filter held is prose.
            safe = self._leak.feed(text[: found.start()]) + self._leak.flush()
        else:
            keep = _held_suffix(text, self._names)
            safe, self._pending = text[: len(text) - keep], text[len(text) - keep :]
            safe = self._leak.feed(safe)
        return self._release_text(safe) if safe else []

    def release_prose_tail(self) -> list[StreamChunk]:
        """PROSE mode: the reply turned out to be prose after all; release the rest of it, up
        to any guardrail text in it."""
        tail = self._leak.feed(self._pending + "".join(self._held)) + self._leak.flush()
        self._pending = ""
        self._held = []
        return self._release_text(tail) if tail else []
