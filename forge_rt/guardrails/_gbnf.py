"""GBNF grammars as values: parse one, test a text against it, and take what is left after a prefix.

A constrained call that is preempted half-way can only be continued exactly if the continuation
is held to *the rest* of the grammar: the backend applies a grammar to the new text alone, so
sending the original grammar again would demand a whole reply after half of one. The rest is
another grammar: :meth:`Gbnf.remainder` runs the prefix through the grammar the way llama.cpp's
sampler does (a set of parse stacks, one character at a time) and writes the stacks that
survive back out as GBNF. Every original rule is kept, so the result is as large as the input.

The parser reads the GBNF that llama.cpp accepts for context-free rules: double-quoted
literals, ``[...]`` classes (``^`` negation, ranges, the ``\\x``, ``\\u``, ``\\U``, ``\\t``,
``\\n``, ``\\r`` escapes), ``.``, rule references, groups, alternatives, ``?``, ``*``, ``+``,
``{m}``, ``{m,}``, ``{m,n}`` and ``#`` comments. Token-level features (``<[...]>``, ``!``)
are refused with :class:`~forge_rt.errors.GrammarError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from forge_rt.errors import GrammarError

__all__ = ["Gbnf"]

# A prefix whose parse has more live stacks than this is too ambiguous to continue cheaply;
# grammars built from tool schemas stay at a handful.
_MAX_STACKS = 256
# Expansions of non-terminals per character, a guard against left recursion.
_MAX_EXPANSIONS = 50_000


# --- the grammar as values -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lit:
    text: str  # never empty


@dataclass(frozen=True, slots=True)
class _Class:
    ranges: tuple[tuple[int, int], ...]
    negated: bool

    def matches(self, char: str) -> bool:
        code = ord(char)
        inside = any(low <= code <= high for low, high in self.ranges)
        return inside != self.negated


@dataclass(frozen=True, slots=True)
class _Ref:
    name: str


@dataclass(frozen=True, slots=True)
class _Alt:
    options: tuple[tuple[_Node, ...], ...]


@dataclass(frozen=True, slots=True)
class _Rep:
    node: _Node
    low: int
    high: int | None  # None: unbounded


_Node = _Lit | _Class | _Ref | _Alt | _Rep
_Stack = tuple[_Node, ...]  # what is still to be matched, innermost first


# --- parsing -------------------------------------------------------------------------------------

_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str) -> GrammarError:
        line = self.text.count("\n", 0, self.pos) + 1
        return GrammarError(f"GBNF line {line}: {message}", line=line)

    def skip_space(self, *, newlines: bool) -> None:
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            elif char in " \t" or (newlines and char in "\r\n"):
                self.pos += 1
            else:
                return

    def rules(self) -> dict[str, _Alt]:
        rules: dict[str, _Alt] = {}
        self.skip_space(newlines=True)
        while self.pos < len(self.text):
            match = _NAME.match(self.text, self.pos)
            if match is None:
                raise self.error(f"expected a rule name at {self.text[self.pos : self.pos + 20]!r}")
            name = match.group()
            self.pos = match.end()
            self.skip_space(newlines=False)
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after rule name {name!r}")
            self.pos += 3
            if name in rules:
                raise self.error(f"rule {name!r} is defined twice")
            rules[name] = self.alternatives(nested=False)
            self.skip_space(newlines=True)
        return rules

    def alternatives(self, *, nested: bool) -> _Alt:
        options = [self.sequence(nested=nested)]
        while self.pos < len(self.text) and self.text[self.pos] == "|":
            self.pos += 1
            options.append(self.sequence(nested=nested))
        return _Alt(tuple(options))

    def sequence(self, *, nested: bool) -> tuple[_Node, ...]:
        items: list[_Node] = []
        while True:
            # Inside a group a rule may run over several lines; at the top a newline ends it
            # unless the next line goes on with '|'.
            self.skip_space(newlines=nested)
            if not nested and self.pos < len(self.text) and self.text[self.pos] in "\r\n":
                save = self.pos
                self.skip_space(newlines=True)
                if self.pos < len(self.text) and self.text[self.pos] == "|":
                    return tuple(items)
                self.pos = save
                return tuple(items)
            if self.pos >= len(self.text) or self.text[self.pos] in "|)":
                return tuple(items)
            node = self.atom()
            items.extend(self.postfix(node))

    def atom(self) -> _Node | None:
        char = self.text[self.pos]
        if char == '"':
            self.pos += 1
            chars: list[str] = []
            while True:
                if self.pos >= len(self.text):
                    raise self.error("unterminated literal")
                if self.text[self.pos] == '"':
                    self.pos += 1
                    break
                chars.append(self.char())
            return _Lit("".join(chars)) if chars else None
        if char == "[":
            self.pos += 1
            negated = self.text.startswith("^", self.pos)
            self.pos += negated
            ranges: list[tuple[int, int]] = []
            while True:
                if self.pos >= len(self.text):
                    raise self.error("unterminated character class")
                if self.text[self.pos] == "]":
                    self.pos += 1
                    break
                low = ord(self.char())
                high = low
                if self.text.startswith("-", self.pos) and not self.text.startswith("-]", self.pos):
                    self.pos += 1
                    high = ord(self.char())
                ranges.append((low, high))
            return _Class(tuple(ranges), negated)
        if char == ".":
            self.pos += 1
            return _Class((), negated=True)
        if char == "(":
            self.pos += 1
            group = self.alternatives(nested=True)
            self.skip_space(newlines=True)
            if not self.text.startswith(")", self.pos):
                raise self.error("expected ')'")
            self.pos += 1
            return group
        if char in "<!":
            raise self.error("token-level GBNF (<[...]>, !) is not supported")
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise self.error(f"unexpected {char!r}")
        self.pos = match.end()
        return _Ref(match.group())

    def char(self) -> str:
        char = self.text[self.pos]
        if char != "\\":
            self.pos += 1
            return char
        kind = self.text[self.pos + 1 : self.pos + 2]
        if kind in _SIMPLE_ESCAPES:
            self.pos += 2
            return _SIMPLE_ESCAPES[kind]
        if kind in _HEX_ESCAPES:
            width = _HEX_ESCAPES[kind]
            digits = self.text[self.pos + 2 : self.pos + 2 + width]
            if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"bad \\{kind} escape")
            self.pos += 2 + width
            return chr(int(digits, 16))
        raise self.error(f"unknown escape \\{kind}")

    def postfix(self, node: _Node | None) -> list[_Node]:
        """``node`` with any repetition after it applied (an empty literal: nothing at all)."""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in "?*+":
                self.pos += 1
                low, high = {"?": (0, 1), "*": (0, None), "+": (1, None)}[char]
            elif char == "{":
                end = self.text.find("}", self.pos)
                if end < 0:
                    raise self.error("unterminated '{'")
                body = self.text[self.pos + 1 : end]
                match = re.fullmatch(r"\s*(\d+)\s*(?:(,)\s*(\d*)\s*)?", body)
                if match is None:
                    raise self.error(f"bad repetition {{{body}}}")
                low = int(match.group(1))
                if match.group(2) is None:
                    high = low
                else:
                    high = int(match.group(3)) if match.group(3) else None
                if high is not None and high < low:
                    raise self.error(f"bad repetition {{{body}}}")
                self.pos = end + 1
            else:
                break
            if node is not None:
                node = _Rep(node, low, high)
        return [] if node is None else [node]


# --- writing -------------------------------------------------------------------------------------


def _escape(char: str, *, in_class: bool) -> str:
    if char == "\\":
        return "\\\\"
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    if char == "\t":
        return "\\t"
    if (in_class and char in "[]^-") or (not in_class and char == '"'):
        return "\\" + char if char in '"[]' else f"\\x{ord(char):02X}"
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02X}"
    return char


def _write_node(node: _Node, names: Mapping[str, str]) -> str:
    match node:
        case _Lit(text):
            return '"' + "".join(_escape(c, in_class=False) for c in text) + '"'
        case _Class(ranges, negated):
            parts = []
            for low, high in ranges:
                part = _escape(chr(low), in_class=True)
                if high != low:
                    part += "-" + _escape(chr(high), in_class=True)
                parts.append(part)
            if not parts and negated:
                return "."
            return "[" + ("^" if negated else "") + "".join(parts) + "]"
        case _Ref(name):
            return names.get(name, name)
        case _Alt(options):
            return "( " + " | ".join(_write_sequence(seq, names) for seq in options) + " )"
        case _Rep(inner, low, high):
            body = _write_node(inner, names)
            if not isinstance(inner, _Lit | _Class | _Ref | _Alt):
                body = f"( {body} )"
            if high is None:
                return body + ("*" if low == 0 else "+" if low == 1 else f"{{{low},}}")
            if (low, high) == (0, 1):
                return body + "?"
            return body + (f"{{{low}}}" if low == high else f"{{{low},{high}}}")
    raise AssertionError(f"unknown node {node!r}")


def _write_sequence(seq: Iterable[_Node], names: Mapping[str, str]) -> str:
    text = " ".join(_write_node(node, names) for node in seq)
    return text or '""'


# --- the grammar ---------------------------------------------------------------------------------


class Gbnf:
    """A parsed GBNF grammar (start rule ``root``); immutable."""

    def __init__(self, text: str) -> None:
        self._rules = _Parser(text).rules()
        if "root" not in self._rules:
            raise GrammarError("GBNF has no 'root' rule")
        for alt in self._rules.values():
            for name in _refs(alt):
                if name not in self._rules:
                    raise GrammarError(f"GBNF refers to undefined rule {name!r}")

    def accepts(self, text: str) -> bool:
        """Whether ``text`` is a whole sentence of the grammar."""
        stacks = self._after(text)
        return stacks is not None and any(not stack for stack in self._closure(stacks))

    def remainder(self, prefix: str) -> str | None:
        """A GBNF grammar for exactly the texts that complete ``prefix`` to a sentence; None
        when ``prefix`` cannot begin a sentence, or its parse is too ambiguous to continue."""
        stacks = self._after(prefix)
        if stacks is None:
            return None
        base = "root"
        while base in self._rules:
            base += "-whole"
        names = {"root": base}
        options = [_write_sequence(stack, names) for stack in sorted(stacks, key=repr)]
        lines = ["root ::= " + " | ".join(options)]
        lines += [
            f"{names.get(name, name)} ::= "
            + " | ".join(_write_sequence(seq, names) for seq in alt.options)
            for name, alt in self._rules.items()
        ]
        return "\n".join(lines) + "\n"

    # The parse: a set of stacks, each the sequence of nodes still to match.

    def _after(self, text: str) -> set[_Stack] | None:
        stacks: set[_Stack] = {(_Ref("root"),)}
        for char in text:
            advanced: set[_Stack] = set()
            for stack in self._closure(stacks):
                if not stack:
                    continue
                head, rest = stack[0], stack[1:]
                if isinstance(head, _Lit):
                    if head.text[0] == char:
                        advanced.add((_Lit(head.text[1:]), *rest) if len(head.text) > 1 else rest)
                elif isinstance(head, _Class) and head.matches(char):
                    advanced.add(rest)
            if not advanced or len(advanced) > _MAX_STACKS:
                return None
            stacks = advanced
        return stacks

    def _closure(self, stacks: Iterable[_Stack]) -> Iterator[_Stack]:
        """Every stack reachable without reading a character whose head is a terminal (or empty)."""
        seen: set[_Stack] = set()
        pending = list(stacks)
        expansions = 0
        while pending:
            stack = pending.pop()
            if stack in seen:
                continue
            seen.add(stack)
            if not stack or isinstance(stack[0], _Lit | _Class):
                yield stack
                continue
            expansions += 1
            if expansions > _MAX_EXPANSIONS:
                raise GrammarError("GBNF expansion does not terminate (left recursion?)")
            head, rest = stack[0], stack[1:]
            if isinstance(head, _Ref):
                for seq in self._rules[head.name].options:
                    pending.append((*seq, *rest))
            elif isinstance(head, _Alt):
                for seq in head.options:
                    pending.append((*seq, *rest))
            else:
                assert isinstance(head, _Rep)
                if head.low == 0:
                    pending.append(rest)
                if head.high is None or head.high > 0:
                    left = _Rep(
                        head.node,
                        max(head.low - 1, 0),
                        None if head.high is None else head.high - 1,
                    )
                    tail = (left, *rest) if left.high is None or left.high > 0 else rest
                    pending.append((head.node, *tail))


def _refs(alt: _Alt) -> Iterator[str]:
    for seq in alt.options:
        for node in seq:
            yield from _node_refs(node)


def _node_refs(node: _Node) -> Iterator[str]:
    match node:
        case _Ref(name):
            yield name
        case _Alt():
            yield from _refs(node)
        case _Rep(inner, _, _):
            yield from _node_refs(inner)
