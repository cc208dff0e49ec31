"""Reply assembly every decoder shares: tool calls by index, think tags, calls-or-text.

A reply's structured tool calls become ``list[ToolCall]``; a reply without them, or with calls
whose arguments are not a JSON object, becomes a :class:`TextResponse` holding the raw text (and
the broken calls rendered as ``{"name": ..., "arguments": ...}`` lines) so the guardrails'
rescue and retry path sees everything the model wrote. Clients never repair content themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from actors import quiet_logger
from forge_rt.core import (
    ReasoningDeltaChunk,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
    new_call_id,
)
from forge_rt.wire._think import ThinkSplitter, split_think

__all__ = [
    "NO_TIMINGS",
    "RawCall",
    "ReplyAssembler",
    "ToolCallAssembler",
    "build_result",
    "join_reasoning",
    "json_object_or_none",
    "reply_result",
    "result_reasoning",
]

log = quiet_logger(__name__)

NO_TIMINGS = Timings(total_s=0.0)
"""The timings of a reply parsed outside a measured call."""


class RawCall(msgspec.Struct, kw_only=True):
    """A tool call as it came off the wire, before its arguments are trusted."""

    call_id: str | None
    name: str
    arguments: str | dict[str, Any]


def join_reasoning(*parts: str | None) -> str | None:
    """Reasoning from several sources (the API's field, think tags), one per line, or None."""
    kept = [p.strip() for p in parts if p and p.strip()]
    return "\n".join(kept) if kept else None


def json_object_or_none(arguments: str | dict[str, Any]) -> dict[str, Any] | None:
    """The arguments as a dict, or None when they are not a JSON object."""
    if isinstance(arguments, dict):
        return arguments
    if not arguments.strip():
        return {}
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def _render_raw(call: RawCall) -> str:
    args = (
        msgspec.json.encode(call.arguments).decode()
        if isinstance(call.arguments, dict)
        else call.arguments
    )
    return f'{{"name": {msgspec.json.encode(call.name).decode()}, "arguments": {args}}}'


def build_result(
    content: str, reasoning: str | None, calls: Sequence[RawCall]
) -> list[ToolCall] | TextResponse:
    """Structured calls when every one is well-formed, else the text for the rescue path.

    ``reasoning`` goes on the first call (one reasoning block per reply) or on the text.
    """
    if not calls:
        return TextResponse(content=content, reasoning=reasoning)
    parsed: list[ToolCall] = []
    for call in calls:
        args = json_object_or_none(call.arguments)
        if args is None or not call.name:
            rendered = "\n".join(_render_raw(c) for c in calls)
            log.warning(
                "tool_call_arguments_not_an_object",
                tool=call.name,
                action="returned as text for the rescue path",
            )
            text = f"{content}\n{rendered}" if content else rendered
            return TextResponse(content=text, reasoning=reasoning)
        parsed.append(
            ToolCall(
                tool=call.name,
                args=args,
                call_id=call.call_id or new_call_id(),
                reasoning=reasoning if not parsed else None,
            )
        )
    return parsed


def reply_result(
    raw: str, reasoning: str | None, calls: Sequence[RawCall]
) -> list[ToolCall] | TextResponse:
    """The result of a whole (non-streamed) reply: ``<think>`` blocks in ``raw`` join the API's
    own ``reasoning``, and the visible rest goes to :func:`build_result` with the calls.

    :class:`ReplyAssembler` is the streamed counterpart; both split with the same
    :class:`ThinkSplitter`, so ``send`` and ``stream`` agree to the character.
    """
    visible, think = split_think(raw)
    return build_result(visible, join_reasoning(reasoning, think), calls)


def result_reasoning(result: list[ToolCall] | TextResponse) -> str | None:
    """The reply's reasoning: the text's, or the first call's that has some (where
    :func:`build_result` puts it)."""
    if isinstance(result, TextResponse):
        return result.reasoning
    return next((c.reasoning for c in result if c.reasoning), None)


class _Partial:
    __slots__ = ("arguments", "call_id", "name")

    def __init__(self) -> None:
        self.call_id: str | None = None
        self.name = ""
        self.arguments: list[str] = []


class ToolCallAssembler:
    """Assembles streamed tool-call deltas **by index**.

    llama-server repeats the call's id and full name in every delta; concatenating them naively
    yields ``get_weatherget_weather…``. Here an id or name identical to what the index already
    has is a repeat and is ignored; a different name piece is appended (servers that split a
    name across deltas); arguments always concatenate. Deltas without an index (some servers)
    extend the last call unless they bring a new id.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _Partial] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(
        self,
        index: int | None,
        call_id: str | None,
        name: str | None,
        arguments: str | None,
    ) -> ToolCallDeltaChunk | None:
        """Fold one wire delta in; return the de-duplicated delta for the consumer, if any."""
        if index is None:
            last = max(self._calls, default=None)
            if last is None or (call_id and call_id != self._calls[last].call_id):
                index = 0 if last is None else last + 1
            else:
                index = last
        partial = self._calls.setdefault(index, _Partial())
        new_id: str | None = None
        if call_id and partial.call_id is None:
            partial.call_id = new_id = call_id
        new_name: str | None = None
        if name and name != partial.name:
            partial.name += name
            new_name = name
        args = arguments or ""
        if args:
            partial.arguments.append(args)
        if new_id is None and new_name is None and not args:
            return None
        return ToolCallDeltaChunk(index=index, call_id=new_id, name=new_name, arguments_delta=args)

    def raw_calls(self) -> list[RawCall]:
        """The assembled calls, in index order."""
        return [
            RawCall(call_id=p.call_id, name=p.name, arguments="".join(p.arguments))
            for _, p in sorted(self._calls.items())
        ]


class ReplyAssembler:
    """What every stream decoder builds up from a streamed reply, whatever its wire format.

    Text deltas go through a :class:`ThinkSplitter` (``<think>`` blocks become reasoning),
    reasoning the API sends in its own field is kept apart from those blocks, and tool-call
    deltas go through a :class:`ToolCallAssembler`. Each method returns the chunks the consumer
    should see; :meth:`finish` releases the text held back for a possible tag and builds the
    result the same way :func:`reply_result` does for a whole reply. Decoders keep only their
    own wire's state (finish reason, usage, end marker).
    """

    def __init__(self) -> None:
        self._think = ThinkSplitter()
        self.calls = ToolCallAssembler()
        self._raw: list[str] = []
        self._visible: list[str] = []
        self._reasoning: list[str] = []  # the API's own reasoning field
        self._thought: list[str] = []  # <think> blocks inside the text

    @property
    def raw_text(self) -> str:
        """The raw text received so far, think tags included."""
        return "".join(self._raw)

    def text(self, text: str) -> list[StreamChunk]:
        """A text delta, split into visible text and ``<think>`` reasoning."""
        self._raw.append(text)
        return [self._piece(kind, piece) for kind, piece in self._think.feed(text)]

    def reasoning(self, text: str) -> list[StreamChunk]:
        """A delta of the API's own reasoning field."""
        self._reasoning.append(text)
        return [ReasoningDeltaChunk(text)]

    def call(
        self, index: int | None, call_id: str | None, name: str | None, arguments: str | None
    ) -> list[StreamChunk]:
        """A tool-call delta (see :meth:`ToolCallAssembler.add`)."""
        chunk = self.calls.add(index, call_id, name, arguments)
        return [] if chunk is None else [chunk]

    def _piece(self, kind: str, piece: str) -> StreamChunk:
        if kind == "reasoning":
            self._thought.append(piece)
            return ReasoningDeltaChunk(piece)
        self._visible.append(piece)
        return TextDeltaChunk(piece)

    def finish(self) -> tuple[list[StreamChunk], list[ToolCall] | TextResponse]:
        """The stream ended: the last held-back text, and the reply's result."""
        tail = [self._piece(kind, piece) for kind, piece in self._think.flush()]
        reasoning = join_reasoning("".join(self._reasoning), "".join(self._thought))
        return tail, build_result("".join(self._visible), reasoning, self.calls.raw_calls())
