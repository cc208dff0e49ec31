"""A deterministic tokenizer and chat template, so prompt costs and cache hits are computable.

Real tokenizers are not needed to model time: what matters is that the same text always gives the
same tokens, that a longer text gives proportionally more, and that a conversation's prompt is an
extension of its previous prompt plus reply, so a per-slot prefix cache behaves as it does on
llama-server. Text is split by :data:`_PIECE` into words with their leading space, single
punctuation marks, newlines and runs of other whitespace; words are cut into fixed-length pieces.
Chat markers are single tokens. The template is ChatML (Qwen's), tool calls rendered Hermes-style.
"""

from __future__ import annotations

import functools
import re

import msgspec

from forge_rt.backends.sim._view import RequestView, ViewMessage, ViewTool

__all__ = [
    "IM_END",
    "IM_START",
    "SPECIAL_TOKENS",
    "Tokenizer",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
SPECIAL_TOKENS = (IM_START, IM_END, THINK_OPEN, THINK_CLOSE, CALL_OPEN, CALL_CLOSE)

_PIECE = re.compile(r"[^\S\n]?\w+|[^\S\n]?[^\w\s]|\n|[^\S\n]+")
_SPECIAL = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
_ROLE = re.compile(r"\w+")
_encode_json = msgspec.json.Encoder().encode


class Tokenizer:
    """Text to token pieces (and ids, for ``/tokenize``), and conversations to prompt tokens.

    Token ids are assigned in order of first appearance in this tokenizer's lifetime (special
    tokens first), so ``/detokenize`` can invert any id ``/tokenize`` returned.
    """

    def __init__(self, chars_per_token: int, cache_size: int = 4096) -> None:
        self._width = chars_per_token
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        for special in SPECIAL_TOKENS:
            self._id(special)
        self.pieces = functools.lru_cache(maxsize=cache_size)(self._split)

    def _split(self, text: str) -> tuple[str, ...]:
        """The token pieces of ``text``; joining them gives ``text`` back."""
        width = self._width
        out: list[str] = []
        for piece in _PIECE.findall(text):
            if len(piece) <= width:
                out.append(piece)
            else:
                out.extend(piece[i : i + width] for i in range(0, len(piece), width))
        return tuple(out)

    def _id(self, piece: str) -> int:
        known = self._ids.get(piece)
        if known is not None:
            return known
        self._ids[piece] = len(self._pieces)
        self._pieces.append(piece)
        return len(self._pieces) - 1

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; a chat marker in it is one token, as llama-server's
        ``/tokenize`` parses special tokens (so a rendered prompt counts as the request did)."""
        ids: list[int] = []
        after = ""
        for i, part in enumerate(_SPECIAL.split(text)):
            if i % 2:
                ids.append(self._id(part))
                after = part
                continue
            if after == IM_START:  # the role after a turn marker is one token, as prompt() has it
                role = _ROLE.match(part)
                if role is not None:
                    ids.append(self._id(role.group()))
                    part = part[role.end() :]
            ids.extend(self._id(p) for p in self.pieces(part))
        return ids

    def piece(self, token_id: int) -> str:
        """The text of one token id; ``KeyError`` names an id this tokenizer never produced."""
        if not 0 <= token_id < len(self._pieces):
            raise KeyError(
                f"token id {token_id} was never produced by this sim's tokenizer "
                f"(known ids are 0..{len(self._pieces) - 1})"
            )
        return self._pieces[token_id]

    def call_tokens(self, name: str, arguments: str) -> tuple[list[str], int, int]:
        """Tokens of one Hermes-style tool call, and the span ``[start, end)`` of its arguments."""
        head = self.pieces('{"name": ' + _encode_json(name).decode() + ', "arguments": ')
        args = self.pieces(arguments)
        start = 1 + len(head)
        tokens = [CALL_OPEN, *head, *args, *self.pieces("}"), CALL_CLOSE]
        return tokens, start, start + len(args)

    def assistant_body(self, message: ViewMessage) -> list[str]:
        """Tokens of an assistant turn's body: reasoning, text, tool calls (no markers)."""
        out: list[str] = []
        if message.reasoning:
            out += [THINK_OPEN, *self.pieces(message.reasoning), THINK_CLOSE]
        out += self.pieces(message.content)
        for call in message.tool_calls:
            out += self.call_tokens(call.name, call.arguments)[0]
        return out

    def _tools_block(self, tools: tuple[ViewTool, ...]) -> tuple[str, ...]:
        spec = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
        return self.pieces("\n\n# Tools\n" + _encode_json(spec).decode())

    def prompt(self, view: RequestView) -> list[str]:
        """The prompt tokens of a request: ChatML turns, then the assistant's opening (+ prefill)."""
        out: list[str] = []
        messages = view.messages
        system = [m.content for m in messages if m.role == "system"]
        if system or view.tools:
            out += [IM_START, "system", "\n", *self.pieces("\n".join(system))]
            if view.tools:
                out += self._tools_block(view.tools)
            out += [IM_END, "\n"]
        for message in messages:
            if message.role == "system":
                continue
            out += [IM_START, message.role, "\n"]
            if message.role == "assistant":
                out += self.assistant_body(message)
            else:
                out += self.pieces(message.content)
            out += [IM_END, "\n"]
        out += [IM_START, "assistant", "\n"]
        if view.prefill:
            out += self.pieces(view.prefill)
        return out
