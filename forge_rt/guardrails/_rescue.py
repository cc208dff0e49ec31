"""Rescue parsing: the tool calls in a model's text reply, whatever dialect it wrote them in.

Small local models rarely return structured ``tool_calls``; they write the call as text. This
module finds every call in a reply -- bare, fenced or embedded JSON, arrays of calls, Hermes and
Qwen-Coder XML, Mistral ``[TOOL_CALLS]``, Llama ``<|python_tag|>``, Python call syntax, XML
attribute forms -- repairs the near-JSON small models write, splits reasoning blocks off, and
converts argument values to the types the tool's schema declares where that is unambiguous.

The scan is a single left-to-right pass over the text. A regex whose first characters are the
only interesting ones (`` ` `` ``<`` ``[`` ``{``) jumps between candidates; JSON spans are found
with a string-aware bracket index and decoded with msgspec, and the lenient reader runs only when
that fails. Text inside a recognised structure is never scanned twice, and echoed tool results
(``<tool_response>``) and echoed tool definitions are skipped, never mistaken for calls.
"""

from __future__ import annotations

import operator
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec

from actors import quiet_logger
from forge_rt.core import ToolCall, ToolSpec
from forge_rt.core._jsonschema import ARGUMENT_KEYS, NAME_KEYS
from forge_rt.guardrails._dialects import (
    FENCE,
    HERMES_CLOSE,
    MISTRAL_TOKEN,
    PYTHON_TAG,
    TOOLS_CLOSE,
    Dialect,
)
from forge_rt.guardrails._json_repair import (
    BraceIndex,
    JsonRepairError,
    decode_exact,
    loads_lenient,
    parse_lenient,
)
from forge_rt.guardrails._rescue_args import coerce_args, schema_of
from forge_rt.guardrails._rescue_python import call_end, parse_call_args
from forge_rt.guardrails._rescue_xml import (
    XmlCall,
    read_attr_call,
    read_element_call,
    read_function_name_call,
    read_named_tag_call,
    read_qwen_coder_call,
)

__all__ = ["RescueResult", "rescue", "rescue_tool_calls", "split_reasoning"]

log = quiet_logger(__name__)


class RescueResult(msgspec.Struct, frozen=True, kw_only=True):
    """Everything rescue parsing found in one reply: ``calls`` of known tools, arguments coerced
    to the schema's types, in text order, with ``dialects`` naming the shape of each;
    ``unknown_calls``, well-formed call shapes naming tools that do not exist; ``reasoning``, the
    text of any think blocks, and ``text`` the reply without them; ``malformed``, call-like
    fragments that could not be read even after repair (for the retry nudge to quote)."""

    calls: list[ToolCall]
    unknown_calls: list[ToolCall]
    dialects: tuple[Dialect, ...]
    reasoning: str | None
    text: str
    malformed: tuple[str, ...] = ()


# --- reasoning blocks -------------------------------------------------------------------------

# An opening tag counts at the start of a line, a closing tag with no opener where it ends a
# line; so tags inside a JSON string value (which carries no raw newline) never count.
_REASONING_TAG = re.compile(r"<think>|<thinking>|<reasoning>|\[THINK\]")
_REASONING_ORPHAN = re.compile(r"(</think>|</thinking>|</reasoning>|\[/THINK\])[ \t]*(?:\n|$)")
_REASONING_CLOSE = {
    "<think>": "</think>",
    "<thinking>": "</thinking>",
    "<reasoning>": "</reasoning>",
    "[THINK]": "[/THINK]",
}


def _open_tag(text: str, pos: int, stop: int) -> re.Match[str] | None:
    """The first reasoning opener in ``text[pos:stop]`` that starts its line."""
    while True:
        m = _REASONING_TAG.search(text, pos, stop)
        if m is None:
            return None
        line_start = text.rfind("\n", 0, m.start()) + 1
        if not text[line_start : m.start()].strip(" \t"):
            return m
        pos = m.end()


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, rest)``: think blocks (``<think>``, ``[THINK]`` ...) split off the text.

    Blocks open at the start of a line. One never closed makes the rest of the text reasoning
    (cut off while thinking); a closing tag ending a line with no opener before it (the template
    opened the block) makes everything before it reasoning. ``reasoning`` is None when there was
    none; ``rest`` is stripped of the whitespace the blocks leave behind.
    """
    if "think" not in text and "THINK" not in text and "reasoning>" not in text:
        return None, text
    opened = _open_tag(text, 0, len(text))
    orphan = _REASONING_ORPHAN.search(text, 0, opened.start() if opened else len(text))
    if opened is None and orphan is None:
        return None, text
    thoughts: list[str] = []
    kept: list[str] = []
    pos = 0
    if orphan is not None:
        thoughts.append(text[: orphan.start()])
        pos = orphan.end(1)
    while True:
        m = _open_tag(text, pos, len(text))
        if m is None:
            kept.append(text[pos:])
            break
        kept.append(text[pos : m.start()])
        tag = m.group()
        close = text.find(_REASONING_CLOSE[tag], m.end())
        if close < 0:
            thoughts.append(text[m.end() :])
            break
        thoughts.append(text[m.end() : close])
        pos = close + len(_REASONING_CLOSE[tag])
    reasoning = "\n\n".join(t.strip() for t in thoughts if t.strip())
    return (reasoning or None), "".join(kept).strip()


# --- the tools a reply may call ---------------------------------------------------------------


def _fold(name: str) -> str:
    name = name.strip()
    for prefix in ("functions.", "tools.", "default_api."):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if name.endswith(".call"):
        name = name[: -len(".call")]
    return name.casefold()


class _ToolIndex:
    """Name lookup for one tool set: exact, then a unique case/prefix-insensitive match."""

    __slots__ = ("folded", "props", "specs")

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self.specs: dict[str, ToolSpec] = {}
        for spec in tools:
            self.specs.setdefault(spec.name, spec)
        self.folded: dict[str, str | None] = {}
        for name in self.specs:
            key = _fold(name)
            self.folded[key] = None if key in self.folded else name
        self.props: dict[str, tuple[str, ...]] = {
            name: tuple(schema_of(spec).get("properties", {})) for name, spec in self.specs.items()
        }

    def resolve(self, name: str) -> str | None:
        if name in self.specs:
            return name
        return self.folded.get(_fold(name))


_INDEXES: OrderedDict[tuple[int, ...], tuple[tuple[ToolSpec, ...], _ToolIndex]] = OrderedDict()


def _index(tools: Sequence[ToolSpec]) -> _ToolIndex:
    key = tuple(map(id, tools))
    hit = _INDEXES.get(key)
    if hit is not None and all(map(operator.is_, hit[0], tools)):
        return hit[1]
    index = _ToolIndex(tools)
    _INDEXES[key] = (tuple(tools), index)
    if len(_INDEXES) > 256:
        _INDEXES.popitem(last=False)
    return index


# --- interpreting decoded JSON ----------------------------------------------------------------

_MISSING: Any = msgspec.UNSET
_WRAPPER_KEYS = ("tool_calls", "function_call", "tool_call", "tool_use")
_NOT_ARGS = frozenset({*NAME_KEYS, "type", "id", "call_id"})


class _Flat:
    """Arguments written beside the name (``{"name": "x", "city": "Lyon"}``)."""

    __slots__ = ("items",)

    def __init__(self, items: dict[str, Any]) -> None:
        self.items = items


class _Positional:
    """Python-call arguments: positional ones map onto the schema's properties in order."""

    __slots__ = ("keywords", "positional")

    def __init__(self, positional: list[Any], keywords: dict[str, Any]) -> None:
        self.positional = positional
        self.keywords = keywords


class _Raw:
    """A call as found, before its name is resolved and its arguments normalised."""

    __slots__ = ("args", "llama", "name")

    def __init__(self, name: str, args: Any, *, llama: bool = False) -> None:
        self.name = name
        self.args = args
        self.llama = llama


class _Echo:
    """Marker: a tool definition echoed back, which is not a call."""


_ECHO = _Echo()


def _calls_in(value: Any, depth: int = 0) -> list[_Raw] | _Echo | None:
    """The call shapes in a decoded JSON value; ``_ECHO`` for tool definitions; None if none."""
    if type(value) is dict and len(value) == 2:
        name = value.get("name")
        if type(name) is str and "arguments" in value:
            return [_Raw(name, value["arguments"])]  # the common shape, without the walk below
    if depth > 4:
        return None
    if isinstance(value, list):
        return _calls_in_list(value, depth)
    if not isinstance(value, dict):
        return None
    wrapped = _calls_in_wrapper(value, depth)
    if wrapped is not None:
        return wrapped
    function = value.get("function")
    if isinstance(function, dict):
        return _openai_call(function)
    return _named_call(value)


def _calls_in_list(items: list[Any], depth: int) -> list[_Raw] | _Echo | None:
    """The calls of every item of a JSON array, in order; ``_ECHO`` only when no item is a call
    and one echoes a tool definition."""
    found: list[_Raw] = []
    echo = False
    for item in items:
        inner = _calls_in(item, depth + 1)
        if isinstance(inner, list):
            found.extend(inner)
        elif inner is _ECHO:
            echo = True
    return found or (_ECHO if echo else None)


def _calls_in_wrapper(value: dict[str, Any], depth: int) -> list[_Raw] | _Echo | None:
    """The calls under the first wrapper key (``tool_calls``, ...) that holds any; else None.
    Checked first: an object that wraps calls (an OpenAI message) is not itself a call."""
    for key in _WRAPPER_KEYS:
        wrapped = value.get(key)
        if isinstance(wrapped, list | dict):
            inner = _calls_in(wrapped, depth + 1)
            if inner is not None:
                return inner
    return None


def _openai_call(function: dict[str, Any]) -> list[_Raw] | _Echo | None:
    """The call in an OpenAI-style ``{"function": {...}}`` object: its ``arguments``; a
    ``description`` without them is an echoed tool definition; ``parameters`` without one is a
    call written with the definition's key; a bare name is a call whose arguments are missing."""
    name = function.get("name")
    if not isinstance(name, str):
        return None
    if "arguments" in function:
        return [_Raw(name, function["arguments"])]
    if "description" in function:
        return _ECHO
    if "parameters" in function:
        return [_Raw(name, function["parameters"])]
    return [_Raw(name, _MISSING)]


def _named_call(value: dict[str, Any]) -> list[_Raw] | _Echo | None:
    """The call in an object that names its tool under one of :data:`NAME_KEYS`: the first
    argument key present holds the arguments (``parameters`` beside a ``description`` is an
    echoed definition); with none, a ``description`` marks a definition, and otherwise the
    other keys are the arguments."""
    name = next((value[k] for k in NAME_KEYS if isinstance(value.get(k), str)), None)
    if name is None:
        return None
    for key in ARGUMENT_KEYS:
        if key in value:
            if key == "parameters" and "description" in value:
                return _ECHO
            return [_Raw(name, value[key], llama=key == "parameters")]
    if "description" in value:
        return _ECHO
    return [_Raw(name, _Flat({k: v for k, v in value.items() if k not in _NOT_ARGS}))]


# --- the scanner ------------------------------------------------------------------------------

# Contexts a region of text is scanned in; each decides the dialect of a JSON call found there.
_TOP, _FENCE, _HERMES, _TOOLS, _PYTAG, _MISTRAL = range(6)
_JSON_DIALECT = {
    _FENCE: Dialect.FENCED_JSON,
    _HERMES: Dialect.HERMES_XML,
    _TOOLS: Dialect.HERMES_XML,
    _PYTAG: Dialect.LLAMA_PYTHON_TAG,
    _MISTRAL: Dialect.MISTRAL,
}
_CLOSERS = {_FENCE: FENCE, _HERMES: HERMES_CLOSE, _TOOLS: TOOLS_CLOSE, _PYTAG: "<|eom_id|>"}

_STRUCT = re.compile(
    rf"({re.escape(FENCE)})"
    rf"|({re.escape(PYTHON_TAG)}|<\|eom_id\|>|<\|eot_id\|>|{re.escape(MISTRAL_TOKEN)})"
    r"|(</?[A-Za-z_][\w\-]*(?:=|(?=[\s/>])))"
    r"|(\{|\[(?=\s*\{))"
)
_TOKEN_STARTS = ("`", "<", "[", "{")  # every _STRUCT match starts with one of these
_FENCE_LANG = re.compile(r"[ \t]*[\w+\-.]*[ \t]*(?:\n|$)")
_VISIBLE = re.compile(r"[^\s`}\]]")  # stray closers and fences are debris, not prose
# ``name{`` or ``name[ARGS]{`` (optionally ``[CALL_ID]id`` between): the name touches its marker.
_MISTRAL_NAME = re.compile(r"\s*([A-Za-z_][\w.\-]*)(?:\[CALL_ID\][\w\-]*)?(?:\[ARGS\]\s*)?(?=\{)")
_SPACE = re.compile(r"\s*")
_LINE_PREFIX = re.compile(r"[ \t>*\-`]*(?:\d+[.)][ \t]*)?(?:[A-Za-z_]\w*[ \t]*=[ \t]*)?")
_ATTR_TAGS = frozenset({"function", "invoke", "call", "tool", "tool_use"})
_MAX_NAME = 128
_MAX_NESTING = 4
_MAX_FRAGMENT = 2000
_CALL_KEY = re.compile(rf"""["']?(?:{"|".join(NAME_KEYS)})["']?\s*:""")


def _identifier_before(text: str, end: int, extra: str) -> int:
    """Start of the identifier (letters, digits, ``_`` and ``extra``) that ends at ``end``."""
    start = end
    while start > 0 and end - start < _MAX_NAME:
        c = text[start - 1]
        if c.isalnum() or c == "_" or c in extra:
            start -= 1
        else:
            break
    while start < end and not (text[start].isalpha() or text[start] == "_"):
        start += 1
    return start


class _Scanner:
    """One pass over one reply; collects calls, unknown calls and malformed fragments."""

    __slots__ = (
        "braces",
        "budget",
        "depth",
        "exhausted",
        "found",
        "index",
        "malformed",
        "next_args",
        "next_chars",
        "next_paren",
        "nowhere",
        "prose",
        "quiet_until",
        "spans",
        "text",
    )

    def __init__(self, text: str, index: _ToolIndex) -> None:
        self.text = text
        self.index = index
        self.braces = BraceIndex(text)
        self.found: list[tuple[_Raw, Dialect]] = []
        self.spans: list[tuple[int, int]] = []
        self.malformed: list[tuple[int, int]] = []
        self.prose = False
        # Text up to here is a broken or cut-off call, not prose around the calls.
        self.quiet_until = 0
        # Bound on decode work: brace soup must not turn a linear scan quadratic.
        self.budget = 16 * len(text) + 65536
        self.exhausted = False
        # Next "(" / "[ARGS]" at or after the scan position; -1 = not looked up, nowhere = none.
        self.nowhere = len(text) + 1
        self.next_paren = -1
        self.next_args = -1
        self.next_chars = [-1] * len(_TOKEN_STARTS)
        self.depth = 0

    # -- helpers -------------------------------------------------------------------------------

    def emit(self, start: int, end: int, raw: _Raw, dialect: Dialect) -> None:
        self.found.append((raw, dialect))
        self.spans.append((start, end))

    def spend(self, amount: int) -> bool:
        self.budget -= amount
        if self.budget < 0:
            self.exhausted = True
            return False
        return True

    def mark_prose(self, ctx: int, start: int, end: int) -> None:
        if ctx != _TOP or self.prose or end <= self.quiet_until:
            return
        if _VISIBLE.search(self.text, max(start, self.quiet_until), end):
            self.prose = True

    def read_json(
        self, start: int, stop: int, ctx: int, *, want_call: bool = True
    ) -> tuple[Any, int, bool] | None:
        """The JSON value at ``start``: (value, end, repaired), or None when unreadable.

        Strict readings come first: the value filling its line (one call per line, the usual
        case), the value filling its region (a pretty-printed call alone in a fence), the exact
        bracketed span. Then the lenient reader, on that span, and finally (:meth:`read_guess`)
        up to the region's closer and up to the end of the line, closing what was left open.
        """
        if self.exhausted:
            return None
        region_end = self.region_end(start, stop, ctx)
        read = self.read_filling(start, stop, region_end)
        if read is not None or self.exhausted:  # out of budget: no further reading is tried
            return read
        end = self.braces.end(start)
        read = self.read_span(start, end, stop)
        if read is not None or self.exhausted:
            return read
        bound = region_end if region_end >= 0 else stop
        return self.read_guess(start, end, bound, want_call=want_call)

    def region_end(self, start: int, stop: int, ctx: int) -> int:
        """Where the closer of context ``ctx``'s region is, before ``stop``; -1 if none."""
        closer = _CLOSERS.get(ctx)
        return self.text.find(closer, start, stop) if closer is not None else -1

    def read_filling(self, start: int, stop: int, region_end: int) -> tuple[Any, int, bool] | None:
        """The strict value filling the rest of its line, else the rest of its region."""
        line_end = self.text.find("\n", start, stop)
        limits = [stop if line_end < 0 else line_end]
        if region_end >= 0 and (line_end < 0 or region_end > line_end):
            limits.append(region_end)
        for limit in limits:
            read = self.decode_until(start, limit)
            if read is not None or self.exhausted:
                return read
        return None

    def decode_until(self, start: int, limit: int) -> tuple[Any, int, bool] | None:
        """``text[start:limit]``, trailing space dropped, as strict JSON; None if it is not
        (only a span that ends in ``}`` or ``]`` is tried)."""
        text = self.text
        while limit > start and text[limit - 1] in " \t\r\n":
            limit -= 1
        if limit <= start or text[limit - 1] not in "}]":
            return None
        if not self.spend(limit - start):
            return None
        ok, value = decode_exact(text[start:limit])
        return (value, limit, False) if ok else None

    def read_span(self, start: int, end: int, stop: int) -> tuple[Any, int, bool] | None:
        """The value in the bracketed span ``[start, end)``: strict, else leniently repaired.
        A lenient reading counts only if it leaves nothing visible of the span unread: text it
        skipped would be a part of the call it lost."""
        if not 0 < end <= stop:
            return None
        if not self.spend(end - start):
            return None
        ok, value = decode_exact(self.text[start:end])
        if ok:
            return value, end, False
        read = self.lenient(start, end, close_at_end=False)
        if read is None:
            return None
        value, parsed_end = read
        if parsed_end == end or not _VISIBLE.search(self.text, parsed_end, end):
            return value, end, True
        return None

    def read_guess(
        self, start: int, end: int, bound: int, *, want_call: bool
    ) -> tuple[Any, int, bool] | None:
        """A value closed by the lenient reader at ``bound``, else at the end of the line: a
        guess at where a cut-off value ends, kept only if it holds a call (or, without
        ``want_call``, an object of arguments)."""
        line_end = self.text.find("\n", start, bound)
        for limit in (bound,) if line_end < 0 else (bound, line_end):
            if 0 < end <= limit:
                continue  # the exact span fits this bound and already failed
            read = self.lenient(start, limit, close_at_end=True)
            if read is None:
                continue
            value, parsed_end = read
            wanted = isinstance(_calls_in(value), list) if want_call else isinstance(value, dict)
            if wanted:
                return value, parsed_end, True
        return None

    def lenient(self, start: int, stop: int, *, close_at_end: bool) -> tuple[Any, int] | None:
        """:func:`parse_lenient`, charged to the work budget by the characters it read."""
        if self.exhausted:
            return None
        try:
            value, end = parse_lenient(self.text, start, stop, close_at_end=close_at_end)
        except JsonRepairError as exc:
            self.spend(exc.pos - start + 1)
            return None
        self.spend(end - start)
        return value, end

    # -- the scan ------------------------------------------------------------------------------

    def scan(self, lo: int, hi: int, ctx: int) -> int:
        """Scan ``text[lo:hi]`` in context ``ctx``; return where scanning stopped."""
        pos = lo
        m = self.next_token(pos, hi)
        while pos < hi:
            if m is not None and m.start() < pos:
                m = self.next_token(pos, hi)  # only look again once the last token is passed
            s = m.start() if m is not None else hi
            special = self.next_special(pos, s, ctx)
            if special is not None:
                self.mark_prose(ctx, pos, special[0])
                pos = special[1]
                continue
            if m is None:
                self.mark_prose(ctx, pos, hi)
                return hi
            self.mark_prose(ctx, pos, s)
            if m.group(1) is not None:
                if ctx == _FENCE:
                    return m.end()
                pos = self.fence(m.end(), hi)
            elif m.group(2) is not None:
                token = m.group(2)
                if token == MISTRAL_TOKEN:
                    pos = self.mistral(m.end(), hi)
                elif token == PYTHON_TAG:
                    pos = m.end() if ctx == _PYTAG else self.region(m.end(), hi, _PYTAG)
                elif ctx == _PYTAG:
                    return m.end()
                else:
                    pos = m.end()
            elif m.group(3) is not None:
                pos, region_ends = self.tag(m.group(3), s, m.end(), hi, ctx)
                if region_ends:
                    return pos
            else:
                pos = self.json_candidate(s, hi, ctx)
        return hi

    def next_token(self, pos: int, hi: int) -> re.Match[str] | None:
        """The first structural token in ``[pos, hi)``: ``str.find`` per first character
        (memchr speed) picks the candidates and the regex only confirms them, several times
        faster than ``_STRUCT.search`` walking prose."""
        text = self.text
        nexts = self.next_chars
        while True:
            for i, char in enumerate(_TOKEN_STARTS):
                if nexts[i] < pos:
                    found = text.find(char, pos)
                    nexts[i] = found if found >= 0 else self.nowhere
            at = min(nexts)
            if at >= hi:
                return None
            m = _STRUCT.match(text, at, hi)
            if m is not None:
                return m
            pos = at + 1

    def region(self, start: int, hi: int, ctx: int) -> int:
        """Scan a nested region (fence, tag block); nesting deeper than a few levels is text."""
        if self.depth >= _MAX_NESTING:
            return start
        self.depth += 1
        try:
            return self.scan(start, hi, ctx)
        finally:
            self.depth -= 1

    def fence(self, after_ticks: int, hi: int) -> int:
        lang = _FENCE_LANG.match(self.text, after_ticks, hi)
        start = lang.end() if lang is not None else after_ticks
        return self.region(start, hi, _FENCE)

    def tag(self, token: str, s: int, after: int, hi: int, ctx: int) -> tuple[int, bool]:
        """Handle a markup token: (where to continue, whether the current region ends there)."""
        closed = self.text.startswith(">", after)
        if token.startswith("</"):
            return self.closing_tag(token[2:], s, after, closed, ctx)
        name = token[1:]
        if name == "function=":
            xml = read_qwen_coder_call(self.text, s, hi)
            return self.xml(xml, s, Dialect.QWEN_CODER_XML, ctx), False
        if closed:
            handled = self.plain_tag(name, s, after, hi, ctx)
            if handled is not None:
                return handled
        pos = self.call_tag(name, closed, s, hi, ctx)
        if pos is not None:
            return pos, False
        self.mark_prose(ctx, s, after)
        return after, False

    def closing_tag(
        self, name: str, s: int, after: int, closed: bool, ctx: int
    ) -> tuple[int, bool]:
        """Handle ``</name``: it ends the region it closes, is skipped when it is a stray
        closer of a call block (debris, not prose), and is prose otherwise."""
        if closed and (
            (name == "tool_call" and ctx == _HERMES) or (name == "tools" and ctx == _TOOLS)
        ):
            return after + 1, True
        if closed and name in ("tool_call", "tools", "tool_response"):
            return after + 1, False  # a stray closing tag
        self.mark_prose(ctx, s, after)
        return after, False

    def plain_tag(
        self, name: str, s: int, after: int, hi: int, ctx: int
    ) -> tuple[int, bool] | None:
        """Handle an opening tag without attributes (``<tool_call>``): a Hermes block, a tools
        block, a tool response to skip, or an XML call; None for any other tag."""
        text = self.text
        if name == "tool_call":
            if ctx == _HERMES:
                return s, True  # a new call opens: the current one ends here
            return self.region(after + 1, hi, _HERMES), False
        if name == "tools":
            if ctx == _TOOLS:
                return after + 1, False
            return self.region(after + 1, hi, _TOOLS), False
        if name == "tool_response":
            close = text.find("</tool_response>", after, hi)
            return (close + len("</tool_response>") if close >= 0 else after + 1), False
        if name == "function-name":
            xml = read_function_name_call(text, s, hi)
            return self.xml(xml, s, Dialect.XML_TAGS, ctx), False
        if name == "function":
            return self.xml(read_element_call(text, s, hi), s, Dialect.XML_TAGS, ctx), False
        return None

    def call_tag(self, name: str, closed: bool, s: int, hi: int, ctx: int) -> int | None:
        """Where a call written as a tag ends: ``<function name="x" ...>`` (an attribute
        call) or ``<read_gauge>`` (a tag named after a tool); None when it is neither."""
        if name in _ATTR_TAGS and not closed:
            xml = read_attr_call(self.text, s, hi, name)
            if xml is not None:
                return self.xml(xml, s, Dialect.XML_ATTR, ctx)
        if name in self.index.specs:
            xml = read_named_tag_call(self.text, s, hi, name)
            if xml is not None:
                return self.xml(xml, s, Dialect.XML_TAGS, ctx)
        return None

    def xml(self, xml: XmlCall | None, s: int, dialect: Dialect, ctx: int) -> int:
        if xml is None:
            self.mark_prose(ctx, s, s + 1)
            return s + 1
        if xml.args is None:
            self.malformed.append((s, xml.end))
            return xml.end
        self.emit(s, xml.end, _Raw(xml.name, xml.args), dialect)
        return xml.end

    def json_candidate(self, s: int, hi: int, ctx: int) -> int:
        if self.exhausted:
            self.mark_prose(ctx, s, hi)
            return hi
        read = self.read_json(s, hi, ctx)
        if read is None:
            self.note_malformed(s, hi)
            self.mark_prose(ctx, s, s + 1)
            return s + 1
        value, end, repaired = read
        found = _calls_in(value)
        if isinstance(found, list) and found:
            for raw in found:
                if ctx == _TOP:
                    dialect = (
                        Dialect.LLAMA_JSON
                        if raw.llama
                        else Dialect.REPAIRED_JSON
                        if repaired
                        else Dialect.BARE_JSON
                    )
                elif ctx == _FENCE and repaired:
                    dialect = Dialect.REPAIRED_JSON
                else:
                    dialect = _JSON_DIALECT[ctx]
                self.emit(s, end, raw, dialect)
            return end
        if repaired and found is None:
            # A lenient reading that finds no call proves nothing; look inside instead.
            self.mark_prose(ctx, s, s + 1)
            return s + 1
        return end

    def note_malformed(self, s: int, hi: int) -> None:
        """Remember an unreadable candidate that looks like a call attempt."""
        end = self.braces.end(s)
        if end < 0 or end > hi:
            self.quiet_until = max(self.quiet_until, hi)  # cut off: the rest is the broken call
            end = hi
        if self.malformed and s < self.malformed[-1][1]:
            return
        if _CALL_KEY.search(self.text, s, min(end, s + 200)):
            self.malformed.append((s, end))
            self.quiet_until = max(self.quiet_until, end)

    def mistral(self, pos: int, hi: int) -> int:
        """Calls after ``[TOOL_CALLS]``: a JSON array/object, or ``name[ARGS]{...}`` runs."""
        text = self.text
        while pos < hi:
            space = _SPACE.match(text, pos, hi)
            pos = space.end() if space is not None else pos
            if text.startswith(MISTRAL_TOKEN, pos):
                pos += len(MISTRAL_TOKEN)
                continue
            if pos < hi and text[pos] in "[{":
                read = self.read_json(pos, hi, _MISTRAL)
                if read is None:
                    return pos
                value, end, _ = read
                found = _calls_in(value)
                if not isinstance(found, list):
                    return end
                for raw in found:
                    self.emit(pos, end, raw, Dialect.MISTRAL)
                pos = end
                continue
            m = _MISTRAL_NAME.match(text, pos, hi)
            if m is None:
                return pos
            read = self.read_json(m.end(), hi, _MISTRAL, want_call=False)
            if read is None:
                self.note_malformed(m.end(), hi)
                return m.end()
            value, end, _ = read
            self.emit(pos, end, _Raw(m.group(1), value), Dialect.MISTRAL)
            pos = end
        return pos

    # -- calls found by what precedes a "(" or "[ARGS]" ---------------------------------------

    def next_special(self, pos: int, limit: int, ctx: int) -> tuple[int, int] | None:
        """Handle the first Python call or ``name[ARGS]{`` rehearsal in ``[pos, limit)``."""
        text = self.text
        while True:
            if self.next_args < pos:
                found = text.find("[ARGS]", pos)
                self.next_args = found if found >= 0 else self.nowhere
            if self.next_paren < pos:
                found = text.find("(", pos)
                self.next_paren = found if found >= 0 else self.nowhere
            at = min(self.next_args, self.next_paren)
            if at >= limit:
                return None
            if at == self.next_args:
                handled = self.rehearsal(at, pos, limit)
            else:
                handled = self.python_call(at, pos, ctx)
            if handled is not None:
                return handled
            pos = at + 1

    def rehearsal(self, at: int, pos: int, limit: int) -> tuple[int, int] | None:
        text = self.text
        start = _identifier_before(text, at, ".-")
        if start == at or start < pos:
            return None
        brace = _SPACE.match(text, at + len("[ARGS]")).end()  # type: ignore[union-attr]
        if not text.startswith("{", brace):
            return None
        read = self.read_json(brace, len(text), _TOP, want_call=False)
        if read is None:
            self.note_malformed(brace, len(text))
            return None
        value, end, _ = read
        self.emit(start, end, _Raw(text[start:at], value), Dialect.REHEARSAL)
        return start, end

    def python_call(self, paren: int, pos: int, ctx: int) -> tuple[int, int] | None:
        text = self.text
        start = _identifier_before(text, paren, ".")
        if start == paren or start < pos:
            return None
        name = self.index.resolve(text[start:paren])
        if name is None:
            return None
        if ctx not in (_FENCE, _PYTAG):
            line_start = text.rfind("\n", 0, start) + 1
            prefix = _LINE_PREFIX.match(text, line_start, start)
            if prefix is None or prefix.end() != start:
                return None
        before = text[max(0, start - 4) : start]
        if before.endswith(("def ", "class ")) or (start > 0 and text[start - 1] == "."):
            return None
        end = call_end(text, paren, len(text))
        if end < 0:
            return None
        parsed = parse_call_args(text[paren:end])
        if parsed is None:
            return None
        dialect = Dialect.LLAMA_PYTHON_TAG if ctx == _PYTAG else Dialect.PYTHON_CALL
        self.emit(start, end, _Raw(name, _Positional(parsed.positional, parsed.keywords)), dialect)
        return start, end


# --- from raw finds to ToolCalls --------------------------------------------------------------


def _as_dict(value: Any) -> dict[str, Any] | None:
    """Arguments as a mapping: a dict, a JSON-encoded dict, or nothing at all (``{}``)."""
    if value is _MISSING or value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return {}
        if stripped.startswith("{"):
            try:
                decoded = loads_lenient(stripped)
            except JsonRepairError:
                return None
            return decoded if isinstance(decoded, dict) else None
    return None


def _known_args(raw: _Raw, props: tuple[str, ...]) -> dict[str, Any] | None:
    """Arguments of a call to a known tool, or None when they cannot be read as arguments."""
    args = raw.args
    if isinstance(args, _Flat):
        if props and any(k not in props for k in args.items):
            return None
        if not props and args.items:
            return None
        return args.items
    if isinstance(args, _Positional):
        if len(args.positional) > len(props):
            return None
        mapped = dict(zip(props, args.positional, strict=False))
        if any(k in mapped for k in args.keywords):
            return None
        return {**mapped, **args.keywords}
    mapping = _as_dict(args)
    if mapping is not None:
        return mapping
    if isinstance(args, list) and len(args) <= len(props):
        return dict(zip(props, args, strict=False))
    if len(props) == 1 and isinstance(args, str | int | float | bool):
        return {props[0]: args}
    return None


def rescue(text: str, tools: Sequence[ToolSpec], *, constrained: bool = False) -> RescueResult:
    """Every tool call in ``text``, in any dialect small models write. Reasoning blocks are
    split off first and never parsed. Calls of tools in ``tools`` (matched exactly, else by a
    unique case-insensitive match) go to ``calls`` with arguments coerced by :func:`coerce_args`;
    well-formed calls of other names go to ``unknown_calls``. With ``constrained`` (the reply was
    produced under :func:`tool_call_schema`), a reply that is exactly one call object, or an
    array of them, is :data:`Dialect.CONSTRAINED_JSON`; one that is not is rescued like any
    other text and the mismatch is logged."""
    reasoning, body = split_reasoning(text)
    index = _index(tools)
    scanner = _Scanner(body, index)
    scanner.scan(0, len(body), _TOP)
    if scanner.exhausted:
        log.warning(
            "rescue.scan_budget_exhausted",
            chars=len(body),
            detail="the reply holds so many unreadable brackets that the rest was not scanned",
        )
    calls: list[ToolCall] = []
    unknown: list[ToolCall] = []
    dialects: list[Dialect] = []
    bad: list[tuple[int, int]] = list(scanner.malformed)
    read: list[tuple[int, int]] = []
    for (raw, dialect), span in zip(scanner.found, scanner.spans, strict=True):
        name = index.resolve(raw.name)
        if name is None:
            if isinstance(raw.args, _Flat | _Positional):
                continue  # only explicit call shapes count as calls of unknown tools
            label = raw.name.strip()
            if not label or len(label) > _MAX_NAME:
                continue
            args = _as_dict(raw.args)
            unknown.append(ToolCall(tool=label, args=args if args is not None else {}))
            read.append(span)
            continue
        args = _known_args(raw, index.props[name])
        if args is None:
            if not isinstance(raw.args, _Flat):
                bad.append(span)
            continue
        calls.append(ToolCall(tool=name, args=coerce_args(index.specs[name], args)))
        dialects.append(
            Dialect.JSON_IN_PROSE if dialect is Dialect.BARE_JSON and scanner.prose else dialect
        )
        read.append(span)
    if constrained:
        dialects = _constrained_dialects(body, calls, unknown, dialects)
    fragments = tuple(
        body[s:e][:_MAX_FRAGMENT]
        for s, e in sorted(set(bad))
        if not any(rs < e and s < re_ for rs, re_ in read)
    )
    return RescueResult(
        calls=calls,
        unknown_calls=unknown,
        dialects=tuple(dialects),
        reasoning=reasoning,
        text=body,
        malformed=fragments,
    )


def _constrained_dialects(
    body: str, calls: list[ToolCall], unknown: list[ToolCall], dialects: list[Dialect]
) -> list[Dialect]:
    # The constraint admits one call object or an array of them (parallel calls).
    exact = calls and not unknown and all(d is Dialect.BARE_JSON for d in dialects)
    if exact and decode_exact(body.strip())[0]:
        return [Dialect.CONSTRAINED_JSON] * len(dialects)
    log.warning(
        "rescue.constraint_not_honoured",
        calls=len(calls),
        unknown=len(unknown),
        dialects=[d.value for d in dialects],
        detail="the reply was generated under a tool-call schema but is not one call or an "
        "array of calls; it was rescued as free text. Check that the backend applies "
        "json_schema/grammar.",
    )
    return dialects


def rescue_tool_calls(text: str, tools: Sequence[ToolSpec]) -> list[ToolCall]:
    """The calls of known tools in ``text`` (empty when there are none); see :func:`rescue`."""
    return rescue(text, tools).calls
