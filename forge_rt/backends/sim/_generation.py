"""One generation in progress: the planned reply cut into tokens, and what was emitted so far.

The API codecs read a :class:`Generation` to build response bodies and stream events, so all
three wire formats describe the same tokens, usage and timings.
"""

from __future__ import annotations

import enum
import time
from typing import Any

import msgspec

from forge_rt.backends.sim._model import PlannedReply
from forge_rt.backends.sim._tokens import THINK_CLOSE, THINK_OPEN, Tokenizer

__all__ = ["Generation", "Unit", "UnitKind", "object_or_none", "plan_units"]

_decode_json = msgspec.json.decode


def object_or_none(text: str) -> dict[str, Any] | None:
    """``text`` decoded as a JSON object, or ``None`` if it is not one."""
    try:
        value = _decode_json(text)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


class UnitKind(enum.IntEnum):
    """What one generated token contributes to the reply."""

    SILENT = 0  # costs time, shows nothing (chat markers, the tool-call wrapper)
    REASONING = 1
    CONTENT = 2
    CALL_START = 3  # the last token before a call's arguments: the call's id and name are known
    ARGS = 4


class Unit(msgspec.Struct, frozen=True, array_like=True):
    """One token of output: its text, what it is, and which tool call it belongs to."""

    piece: str
    kind: UnitKind
    call: int = -1


def plan_units(plan: PlannedReply, tokenizer: Tokenizer) -> list[Unit]:
    """The reply as tokens, in the order the model writes them (the same as the chat template)."""
    silent, content = UnitKind.SILENT, UnitKind.CONTENT
    units: list[Unit] = []
    if plan.reasoning:
        reasoning = UnitKind.REASONING
        units.append(Unit(THINK_OPEN, silent))
        units += [Unit(p, reasoning) for p in tokenizer.pieces(plan.reasoning)]
        units.append(Unit(THINK_CLOSE, silent))
    units += [Unit(p, content) for p in tokenizer.pieces(plan.content)]
    for index, call in enumerate(plan.calls):
        tokens, start, end = tokenizer.call_tokens(call.name, call.arguments)
        units += [Unit(p, silent, index) for p in tokens[: start - 1]]
        units.append(Unit(tokens[start - 1], UnitKind.CALL_START, index))
        units += [Unit(p, UnitKind.ARGS, index) for p in tokens[start:end]]
        units += [Unit(p, silent, index) for p in tokens[end:]]
    return units


class Generation:
    """State of one reply being generated, shared by the engine and the API codec.

    ``units`` is what will be generated (already cut to ``max_tokens`` and the context window);
    ``emitted`` how many have been. ``finish_reason`` is the OpenAI one (``stop``,
    ``tool_calls`` or ``length``); codecs map it to their API's vocabulary.
    """

    def __init__(
        self,
        *,
        id: str,
        model: str,
        plan: PlannedReply,
        units: list[Unit],
        truncated: bool,
        prompt_tokens: int,
    ) -> None:
        self.id = id
        self.model = model
        self.created = int(time.time())
        self.plan = plan
        self.units = units
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = 0
        self.prompt_ms = 0.0
        self.predicted_ms = 0.0
        self.emitted = 0
        self._truncated = truncated
        if truncated:
            self.finish_reason = "length"
        elif plan.finish_reason is not None:
            self.finish_reason = plan.finish_reason
        else:
            self.finish_reason = "tool_calls" if plan.calls else "stop"

    @property
    def completion_tokens(self) -> int:
        return self.emitted

    @property
    def _whole(self) -> bool:
        """Everything planned was emitted: the plan itself is the answer (no re-joining)."""
        return not self._truncated and self.emitted == len(self.units)

    def _text(self, kind: UnitKind) -> str:
        return "".join(u.piece for u in self.units[: self.emitted] if u.kind is kind)

    @property
    def content(self) -> str:
        """Visible text emitted so far."""
        return self.plan.content if self._whole else self._text(UnitKind.CONTENT)

    @property
    def reasoning(self) -> str:
        """Reasoning text emitted so far."""
        if self._whole:
            return self.plan.reasoning or ""
        return self._text(UnitKind.REASONING)

    def calls(self) -> list[tuple[str, str, str, bool]]:
        """Tool calls started so far: ``(id, name, arguments so far, complete)``."""
        if self._whole:
            return [(c.id, c.name, c.arguments, True) for c in self.plan.calls]
        out: list[tuple[str, str, str, bool]] = []
        done = self.units[: self.emitted]
        for index, call in enumerate(self.plan.calls):
            pieces = [u for u in done if u.call == index]
            if not any(u.kind is UnitKind.CALL_START for u in pieces):
                break
            args = "".join(u.piece for u in pieces if u.kind is UnitKind.ARGS)
            out.append((call.id, call.name, args, args == call.arguments))
        return out

    def object_calls(self) -> tuple[list[tuple[str, str, dict[str, Any]]], str]:
        """Calls as ``(id, name, arguments object)`` for APIs that carry arguments as objects.

        A call whose arguments are not (or not yet, when cut short) a JSON object cannot go on
        such a wire; like a server whose tool parser failed, it is returned as raw text instead
        (the second item, in the chat template's Hermes form).
        """
        calls: list[tuple[str, str, dict[str, Any]]] = []
        raw: list[str] = []
        for call_id, name, arguments, complete in self.calls():
            value = object_or_none(arguments) if complete else None
            if value is None:
                raw.append(f'<tool_call>{{"name": "{name}", "arguments": {arguments}')
            else:
                calls.append((call_id, name, value))
        return calls, "".join(raw)

    def usage_openai(self) -> dict[str, object]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }

    def timings_llama(self) -> dict[str, object]:
        prompt_n = self.prompt_tokens - self.cached_tokens
        return {
            "cache_n": self.cached_tokens,
            "prompt_n": prompt_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_second": prompt_n / self.prompt_ms * 1000 if self.prompt_ms else None,
            "predicted_n": self.completion_tokens,
            "predicted_ms": self.predicted_ms,
            "predicted_per_second": (
                self.completion_tokens / self.predicted_ms * 1000 if self.predicted_ms else None
            ),
        }
