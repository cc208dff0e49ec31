"""Finding JSON in model text and reading the near-JSON small models write.

Two tools, both linear in the text they look at:

- :class:`BraceIndex` finds where a ``{`` or ``[`` closes, string-aware, with C-speed regex
  searches; every bracket it walks past is remembered, so brace soup costs one pass at most.
- :func:`parse_lenient` reads one value the way a forgiving human would: trailing commas, single
  quotes, Python literals (``True``/``None``), unquoted keys, ``"a" + "b"`` concatenation,
  comments, raw newlines inside strings, doubled outer braces ``{{...}}`` and, when allowed,
  brackets left open at the end of a truncated reply. It is only used after ``msgspec`` has
  rejected the exact text, so well-formed JSON never pays for it.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ["BraceIndex", "JsonRepairError", "decode_exact", "loads_lenient", "parse_lenient"]

_TOKEN = re.compile(r'[{}\[\]"]')
# The rest of a double-quoted string after its opening quote (unrolled loop: no backtracking blow-up).
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_MAX_DEPTH = 32  # deeper than any tool's arguments; bounds the reader's recursion
_MAX_NUMBER = 400  # characters in one number literal


class JsonRepairError(ValueError):
    """The text is not JSON even by the lenient reading; ``pos`` is where reading stopped."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} at offset {pos}")
        self.pos = pos


def decode_exact(span: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``span`` is strict JSON, else ``(False, None)``."""
    try:
        return True, msgspec.json.decode(span)
    except msgspec.DecodeError:
        return False, None
    except RecursionError:
        # msgspec reports nesting beyond its own limit this way; such text is no tool call.
        return False, None
    except UnicodeEncodeError:
        # A lone surrogate cannot be UTF-8 encoded for msgspec; the lenient reader copes.
        return False, None


class BraceIndex:
    """Where each JSON-looking bracket in one text closes (see :meth:`end`), string-aware;
    every bracket met on the way is cached, which keeps repeated queries linear overall."""

    __slots__ = ("_ends", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._ends: dict[int, int] = {}

    def end(self, start: int) -> int:
        """Index just past the close of the bracket at ``start``; -1 if it never closes."""
        known = self._ends.get(start)
        if known is not None:
            return known
        text = self._text
        ends = self._ends
        stack = [start]
        pos = start + 1
        search = _TOKEN.search
        rest = _STRING_REST.match
        while True:
            m = search(text, pos)
            if m is None:
                break
            i = m.start()
            c = text[i]
            if c == '"':
                s = rest(text, i + 1)
                if s is None:
                    break
                pos = s.end()
                continue
            pos = i + 1
            if c == "{" or c == "[":
                stack.append(i)
                continue
            opened = stack.pop()
            ends[opened] = pos
            if not stack:
                return pos
        for opened in stack:
            ends[opened] = -1
        return -1


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DOUBLE_SPECIAL = re.compile(r'["\\]')
_SINGLE_SPECIAL = re.compile(r"['\\]")
_IDENT = re.compile(r"[A-Za-z_$][\w$\-]*")
# Whitespace and comments; block comments are bounded so an unclosed "/*" costs little to reject.
_SPACE = re.compile(r"(?:\s+|//[^\n]*|/\*.{0,400}?\*/|<!--.{0,400}?-->)+", re.S)
_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "'": "'",
}
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}


class _Lenient:
    """A forgiving recursive-descent JSON reader over ``text[pos:stop]``."""

    __slots__ = ("close_at_end", "pos", "stop", "text")

    def __init__(self, text: str, pos: int, stop: int, *, close_at_end: bool) -> None:
        self.text = text
        self.pos = pos
        self.stop = stop
        self.close_at_end = close_at_end

    def fail(self, message: str) -> JsonRepairError:
        return JsonRepairError(message, self.pos)

    def skip_space(self) -> None:
        m = _SPACE.match(self.text, self.pos, self.stop)
        if m is not None:
            self.pos = m.end()

    def at_end(self) -> bool:
        return self.pos >= self.stop

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nesting too deep")
        self.skip_space()
        if self.at_end():
            raise self.fail("expected a value, the text ended")
        c = self.text[self.pos]
        if c == "{":
            return self.object(depth)
        if c == "[":
            return self.array(depth)
        if c == '"' or c == "'":
            return self.concatenation()
        m = _NUMBER.match(self.text, self.pos, self.stop)
        if m is not None:
            literal = m.group()
            if len(literal) > _MAX_NUMBER:
                raise self.fail("number too long")  # int() refuses >4300 digits anyway
            self.pos = m.end()
            if "." in literal or "e" in literal or "E" in literal:
                return float(literal)
            return int(literal)
        m = _IDENT.match(self.text, self.pos, self.stop)
        if m is not None and m.group() in _LITERALS:
            self.pos = m.end()
            return _LITERALS[m.group()]
        raise self.fail(f"unexpected {c!r}")

    def concatenation(self) -> str:
        parts = [self.string()]
        while True:
            mark = self.pos
            self.skip_space()
            if self.at_end() or self.text[self.pos] != "+":
                self.pos = mark
                return "".join(parts)
            self.pos += 1
            self.skip_space()
            if self.at_end() or self.text[self.pos] not in "\"'":
                raise self.fail("'+' must join two strings")
            parts.append(self.string())

    def string(self) -> str:
        text = self.text
        special = _DOUBLE_SPECIAL if text[self.pos] == '"' else _SINGLE_SPECIAL
        self.pos += 1
        out: list[str] = []
        while True:
            m = special.search(text, self.pos, self.stop)
            if m is None:
                raise self.fail("unterminated string")
            i = m.start()
            out.append(text[self.pos : i])
            if text[i] != "\\":
                self.pos = i + 1
                return "".join(out)
            if i + 1 >= self.stop:
                raise self.fail("unterminated string")
            e = text[i + 1]
            if e == "u":
                out.append(self.unicode_escape(i))
                continue
            out.append(_ESCAPES.get(e, "\\" + e))
            self.pos = i + 2

    def unicode_escape(self, i: int) -> str:
        digits = self.text[i + 2 : i + 6]
        if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise self.fail("bad \\u escape")
        code = int(digits, 16)
        self.pos = i + 6
        if 0xD800 <= code < 0xDC00 and self.text[self.pos : self.pos + 2] == "\\u":
            low = self.text[self.pos + 2 : self.pos + 6]
            if len(low) == 4 and all(d in "0123456789abcdefABCDEF" for d in low):
                low_code = int(low, 16)
                if 0xDC00 <= low_code < 0xE000:
                    self.pos += 6
                    return chr(0x10000 + ((code - 0xD800) << 10) + (low_code - 0xDC00))
        if 0xD800 <= code < 0xE000:
            raise self.fail("lone surrogate in \\u escape")
        return chr(code)

    def key(self) -> str:
        c = self.text[self.pos]
        if c == '"' or c == "'":
            return self.string()
        m = _IDENT.match(self.text, self.pos, self.stop)
        if m is None:
            raise self.fail(f"expected a key, got {c!r}")
        self.pos = m.end()
        return m.group()

    def object(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nesting too deep")
        self.pos += 1
        result: dict[str, Any] = {}
        self.skip_space()
        if not self.at_end() and self.text[self.pos] == "{":
            # Doubled braces: {{"name": ...}} -- read the inner object, expect the outer close.
            inner = self.object(depth + 1)
            self.skip_space()
            if self.at_end():
                if self.close_at_end:
                    return inner
                raise self.fail("unclosed object")
            if self.text[self.pos] == "}":
                self.pos += 1
                return inner
            raise self.fail("doubled brace not closed")
        while True:
            self.skip_space()
            if self.at_end():
                if self.close_at_end:
                    return result
                raise self.fail("unclosed object")
            c = self.text[self.pos]
            if c == "}":
                self.pos += 1
                return result
            name = self.key()
            self.skip_space()
            if self.at_end() or self.text[self.pos] != ":":
                raise self.fail("expected ':' after a key")
            self.pos += 1
            result[name] = self.value(depth + 1)
            self.skip_space()
            if self.at_end():
                if self.close_at_end:
                    return result
                raise self.fail("unclosed object")
            c = self.text[self.pos]
            if c == ",":
                self.pos += 1
            elif c == "}":
                self.pos += 1
                return result
            elif c != '"' and c != "'":
                # A missing comma before the next quoted key is tolerated; nothing else is.
                raise self.fail(f"expected ',' or '}}', got {c!r}")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        while True:
            self.skip_space()
            if self.at_end():
                if self.close_at_end:
                    return result
                raise self.fail("unclosed array")
            if self.text[self.pos] == "]":
                self.pos += 1
                return result
            result.append(self.value(depth + 1))
            self.skip_space()
            if self.at_end():
                if self.close_at_end:
                    return result
                raise self.fail("unclosed array")
            c = self.text[self.pos]
            if c == ",":
                self.pos += 1
            elif c == "]":
                self.pos += 1
                return result
            else:
                raise self.fail(f"expected ',' or ']', got {c!r}")


def parse_lenient(
    text: str, start: int = 0, stop: int | None = None, *, close_at_end: bool = False
) -> tuple[Any, int]:
    """Read one near-JSON value at ``text[start]``; return it and the index just past it. With
    ``close_at_end`` a reply cut off inside an object or array (not inside a string) is closed
    at ``stop``. Raises :class:`JsonRepairError` when even the lenient reading fails."""
    reader = _Lenient(text, start, len(text) if stop is None else stop, close_at_end=close_at_end)
    value = reader.value(0)
    return value, reader.pos


def loads_lenient(text: str) -> Any:
    """``text`` as JSON: strict first, then the lenient reading, which must consume all of it."""
    ok, value = decode_exact(text)
    if ok:
        return value
    value, end = parse_lenient(text, 0)
    trailing = _SPACE.match(text, end)
    if end != len(text) and (trailing is None or trailing.end() != len(text)):
        raise JsonRepairError("unexpected text after the value", end)
    return value
