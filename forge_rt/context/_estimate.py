"""Token estimation: a fast heuristic that a backend's real counts can calibrate.

Counting tokens exactly needs the model's tokenizer, which lives in the backend. Compaction runs
before every inference, over the whole history, so it needs a count in microseconds: this module
estimates from the text and lets the backend correct the estimate, once from ``/tokenize``
(:meth:`TokenEstimator.calibrate`) and then continuously from the prompt size it reports with each
reply (:meth:`TokenEstimator.observe_usage`).

The heuristic weighs characters: ordinary text costs one unit per UTF-8 byte, a digit costs
:data:`DIGIT_WEIGHT` units (tokenizers such as Qwen's split numbers digit by digit) and JSON
punctuation ``{}[]":,`` costs :data:`PUNCT_WEIGHT` units; tokens are units divided by ``ratio``.
Each message adds the structure its chat template wraps around it. The defaults were fitted on
Qwen2.5-Coder's tokenizer through llama.cpp's ``/tokenize`` (English prose 4.5 chars/token, Python
source 4.2, JSON tool results 1.7 to 3.2 from number-heavy to text-heavy, CJK text about 1.6
chars/token; the weighted model is within 2% on each kind) and its ChatML template (5 tokens
around every message, 11 around every tool call, 9 more around every tool result).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import msgspec

from forge_rt.core import Message, Role

__all__ = [
    "CALIBRATION_TEXTS",
    "DEFAULT_RATIO",
    "DIGIT_WEIGHT",
    "MIN_RATIO_DELTA_UNITS",
    "PUNCT_WEIGHT",
    "TokenEstimator",
]

DEFAULT_RATIO = 4.6
"""Weighted units per token, fitted on Qwen2.5-Coder's tokenizer (see the module docstring)."""

DIGIT_WEIGHT = 4.6
"""Units a digit costs: one token at the default ratio."""

PUNCT_WEIGHT = 2.75
"""Units one of ``{}[]":,`` costs: about 0.6 token at the default ratio."""

MIN_RATIO_DELTA_UNITS = 256.0
"""Smallest change of message text between two usage observations that the ratio learns from
(about 55 tokens: enough that a token of rounding at either end is noise, not signal)."""

_DIGITS = b"0123456789"
_PUNCT = b'{}[]":,'
_json_encode = msgspec.json.Encoder().encode

CALIBRATION_TEXTS: tuple[str, ...] = (
    "You are a careful assistant. Use the tools you are given to answer the question, and call "
    "exactly one tool at a time. When you have everything you need, call the final tool.",
    '{"city": "Lisbon", "temperature_c": 19, "conditions": "scattered showers", "wind_kph": 23}',
    '{"rows": [{"region": "EMEA", "quarter": 3, "revenue": 418230.75}, {"region": "APAC", '
    '"quarter": 3, "revenue": 391004.1}], "currency": "EUR", "complete": true}',
    "def summarise(rows: list[dict[str, float]]) -> float:\n"
    '    """Sum the revenue column, skipping nothing."""\n'
    '    return sum(row["revenue"] for row in rows)\n',
    "The employee record shows a hire date of 2019-04-12, a manager change in March 2023 and two "
    "open expense reports totalling 1,284.40 EUR.",
    "Der Bericht für das dritte Quartal zeigt höhere Umsätze in München. 東京の天気は晴れです。",
)
"""Texts worth sending to a backend's ``/tokenize`` to calibrate: prose, JSON, code, numbers, non-ASCII."""


def _text_units(text: str) -> float:
    """The weighted length of ``text`` (see the module docstring); deterministic, 0 for ``""``."""
    return _bytes_units(text.encode()) if text else 0.0


def _bytes_units(data: bytes) -> float:
    size = len(data)
    digits = size - len(data.translate(None, _DIGITS))
    punct = size - len(data.translate(None, _PUNCT))
    return size + digits * (DIGIT_WEIGHT - 1.0) + punct * (PUNCT_WEIGHT - 1.0)


def _message_units(message: Message) -> float:
    units = _text_units(message.content)
    if message.tool_calls:
        for call in message.tool_calls:
            units += _text_units(call.tool) + _bytes_units(_json_encode(call.args))
    return units


class TokenEstimator:
    """Estimates tokens of text and messages; calibrated by a backend's counts; deterministic.

    ``ratio`` is weighted units per token (about characters per token for English prose).
    ``message_tokens``, ``call_tokens`` and ``tool_result_tokens`` are the chat template's fixed
    cost around a message, a tool call and a tool result. ``usage_alpha`` is the weight a new
    usage observation gets in the moving averages of :meth:`observe_usage`.

    Per-message work is cached (up to ``cache_size`` messages, oldest evicted first), so
    re-estimating a history that grew by one message costs one message's work. Messages are frozen
    but not always hashable (tool-call arguments are dicts), so the cache is keyed by identity and
    keeps a reference to the message: an entry's id can never be reused while the entry exists.
    """

    def __init__(
        self,
        *,
        ratio: float = DEFAULT_RATIO,
        message_tokens: int = 5,
        call_tokens: int = 11,
        tool_result_tokens: int = 9,
        usage_alpha: float = 0.25,
        cache_size: int = 32_768,
    ) -> None:
        if not (ratio > 0 and math.isfinite(ratio)):
            raise ValueError(f"TokenEstimator ratio must be a positive number, got {ratio!r}")
        if min(message_tokens, call_tokens, tool_result_tokens) < 0:
            raise ValueError(
                "TokenEstimator message_tokens, call_tokens and tool_result_tokens must be >= 0, "
                f"got {message_tokens}, {call_tokens}, {tool_result_tokens}"
            )
        if not 0.0 < usage_alpha <= 1.0:
            raise ValueError(f"TokenEstimator usage_alpha must be in (0, 1], got {usage_alpha!r}")
        if cache_size < 0:
            raise ValueError(f"TokenEstimator cache_size must be >= 0, got {cache_size}")
        self._ratio = float(ratio)
        self._message_tokens = message_tokens
        self._call_tokens = call_tokens
        self._tool_result_tokens = tool_result_tokens
        self._alpha = usage_alpha
        self._cache_size = cache_size
        self._offset = 0.0
        self._last_observation: tuple[float, int] | None = None
        self._cache: OrderedDict[int, tuple[Message, int, float]] = OrderedDict()

    @property
    def ratio(self) -> float:
        """Weighted units per token currently in use."""
        return self._ratio

    def count(self, text: str) -> int:
        """Estimated tokens of ``text`` alone, with no message structure around it."""
        return math.ceil(_text_units(text) / self._ratio)

    def _entry(self, message: Message) -> tuple[Message, int, float]:
        """(message, structure tokens, text units), from the cache or computed and cached."""
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit
        return self._remember(message, _message_units(message))

    def _structure(self, message: Message) -> int:
        tokens = self._message_tokens
        if message.tool_calls:
            tokens += self._call_tokens * len(message.tool_calls)
        if message.role is Role.TOOL:
            tokens += self._tool_result_tokens
        return tokens

    def _rewrite_cost(self, message: Message, content: str) -> tuple[int, float]:
        """Tokens and units ``message`` would cost with ``content`` instead (compaction's what-if;
        the rewritten message has no ``token_estimate``)."""
        units = _text_units(content)
        if message.tool_calls:
            units += _message_units(message) - _text_units(message.content)
        return self._structure(message) + math.ceil(units / self._ratio), units

    def _remember(self, message: Message, units: float) -> tuple[Message, int, float]:
        """Cache ``units`` for ``message`` (compaction seeds the messages it builds this way)."""
        entry = (message, self._structure(message), units)
        if self._cache_size:
            if len(self._cache) >= self._cache_size:
                self._cache.popitem(last=False)
            self._cache[id(message)] = entry
        return entry

    def count_message(self, message: Message) -> int:
        """Estimated tokens of one message: its text, its tool calls' names and JSON arguments,
        and the template's structure around them.

        A message whose ``token_estimate`` is set is taken at its word: that field is for counts
        the caller knows better (``with_content`` clears it when the text changes).
        """
        if message.token_estimate is not None:
            return message.token_estimate
        _, structure, units = self._entry(message)
        return structure + math.ceil(units / self._ratio)

    def count_each(self, messages: Iterable[Message]) -> list[int]:
        """:meth:`count_message` of every message, in order (what compaction strategies need)."""
        cache_get = self._cache.get
        ratio = self._ratio
        ceil = math.ceil
        counts: list[int] = []
        append = counts.append
        for message in messages:
            if message.token_estimate is not None:
                append(message.token_estimate)
                continue
            hit = cache_get(id(message))
            if hit is None or hit[0] is not message:
                hit = self._remember(message, _message_units(message))
            append(hit[1] + ceil(hit[2] / ratio))
        return counts

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Estimated tokens of a whole history (the sum of :meth:`count_message`)."""
        return sum(self.count_each(messages))

    def calibrate(self, samples: Iterable[tuple[str, int]]) -> float:
        """Fit ``ratio`` to ``(text, true token count)`` pairs, e.g. from a backend's ``/tokenize``.

        The fit is total units over total tokens, so long samples weigh more; it replaces the
        current ratio outright (usage observations then refine it). Returns the new ratio.
        """
        units = 0.0
        tokens = 0
        for text, count in samples:
            if count < 0:
                raise ValueError(
                    f"calibrate: a token count must be >= 0, got {count} for {text!r:.60}"
                )
            units += _text_units(text)
            tokens += count
        if tokens == 0 or units == 0.0:
            raise ValueError(
                "calibrate needs at least one non-empty text with a positive token count; "
                f"got {units:g} units over {tokens} tokens"
            )
        self._ratio = units / tokens
        return self._ratio

    @property
    def offset_tokens(self) -> int:
        """Tokens a backend counts in a prompt beyond the estimate of its messages (tool schemas,
        the template's preamble and generation prompt), as learned by :meth:`observe_usage`."""
        return round(self._offset)

    def count_prompt(self, messages: Iterable[Message]) -> int:
        """Estimated size of the prompt built from ``messages``: :meth:`count_messages` plus
        :attr:`offset_tokens`. This is what a context budget is compared against."""
        return self.count_messages(messages) + round(self._offset)

    def observe_usage(self, messages: Sequence[Message], reported_prompt_tokens: int) -> float:
        """Learn from the prompt size a backend reported for a prompt built from ``messages``.

        ``reported_prompt_tokens`` is the whole prompt (cached tokens included), as in a reply's
        ``usage.prompt_tokens``. A prompt holds more than its messages (tool schemas, a preamble),
        and that part does not grow with the history, so two things are learned, each as an
        exponential moving average with weight ``usage_alpha`` for the new observation:

        * the ratio, from the *change* between this observation and the previous one (the fixed
          part cancels out), when the message text changed by at least
          :data:`MIN_RATIO_DELTA_UNITS` and the reported size moved the same way;
        * the offset (:attr:`offset_tokens`): reported tokens minus the estimate of the messages;
          it absorbs the fixed part and whatever the heuristic misses.

        One odd reply moves either a little; a consistent backend pulls them all the way. Messages
        with a ``token_estimate`` count as known. Feed one estimator the prompts of one kind (one
        workflow's tools): the offset is per prompt shape. Returns the new ratio.
        """
        if reported_prompt_tokens <= 0:
            raise ValueError(
                "observe_usage: reported_prompt_tokens must be positive, "
                f"got {reported_prompt_tokens}"
            )
        known = 0
        units = 0.0
        for message in messages:
            if message.token_estimate is not None:
                known += message.token_estimate
            else:
                _, structure, message_units = self._entry(message)
                known += structure
                units += message_units
        text_tokens = reported_prompt_tokens - known
        previous = self._last_observation
        self._last_observation = (units, text_tokens)
        alpha = self._alpha
        if previous is not None:
            delta_units = units - previous[0]
            delta_tokens = text_tokens - previous[1]
            if abs(delta_units) >= MIN_RATIO_DELTA_UNITS and delta_units * delta_tokens > 0:
                observed_ratio = delta_units / delta_tokens
                self._ratio = (1.0 - alpha) * self._ratio + alpha * observed_ratio
        observed_offset = reported_prompt_tokens - self.count_messages(messages)
        if previous is None:
            self._offset = observed_offset
        else:
            self._offset = (1.0 - alpha) * self._offset + alpha * observed_offset
        return self._ratio
