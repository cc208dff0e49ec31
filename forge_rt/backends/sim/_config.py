"""What a simulated backend is told to be: its identity, timing, model behaviour and faults.

Everything a test or benchmark tunes lives in one frozen :class:`SimConfig`. It is a pydantic model
because users write it by hand (and the CLI builds it from flags): a bad rate or a negative speed
fails at construction with a message naming the field, not later inside a request.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from forge_rt.backends.sim._view import RequestView

__all__ = [
    "Dialect",
    "FailureRates",
    "Fault",
    "Intent",
    "Oracle",
    "SimConfig",
    "SimReply",
    "SimToolCall",
]


class Fault(enum.StrEnum):
    """A transport or server fault the sim can inflict on one inference request.

    ``HTTP_500`` / ``HTTP_503``: an error status with a JSON error body in the API's own shape.
    ``RESET_BEFORE_FIRST_BYTE``: the request is read, then the socket is reset (TCP RST) before any
    response byte. ``RESET_MID_STREAM``: part of the response (some SSE events, or part of a JSON
    body) is sent, then the socket is reset. ``MALFORMED_SSE``: a stream carries one ``data:`` line
    that is not JSON, then continues normally (a non-stream body is SSE-framed instead of plain
    JSON). ``HANG``: nothing is ever sent; the request holds no slot and ends when the client goes
    away. ``SLOW_DRIP``: the whole response is written one byte per send, ``slow_drip_interval_s``
    apart. ``TRUNCATED_JSON``: a non-stream body is cut mid-JSON (with a matching
    ``content-length``, so the HTTP framing is valid); a stream ends cleanly after a cut ``data:``
    line, without its final chunk or ``[DONE]``. ``STALL_IN_PREFILL``: the request takes its
    slot and starts on the prompt (a stream that asked for ``return_progress`` gets the first
    progress report), then nothing more comes -- llama.cpp stuck mid-prefill.
    """

    HTTP_500 = "http_500"
    HTTP_503 = "http_503"
    RESET_BEFORE_FIRST_BYTE = "reset_before_first_byte"
    RESET_MID_STREAM = "reset_mid_stream"
    MALFORMED_SSE = "malformed_sse"
    HANG = "hang"
    SLOW_DRIP = "slow_drip"
    TRUNCATED_JSON = "truncated_json"
    STALL_IN_PREFILL = "stall_in_prefill"


class Dialect(enum.StrEnum):
    """How one reply was rendered; recorded per reply in :attr:`SimStats.dialects`.

    The first group is what the seeded-random model draws from :class:`FailureRates`; ``TEXT``
    is a correct final answer in text, ``SCRIPTED`` a reply taken from the script and
    ``CONSTRAINED`` a JSON instance of a schema the request constrained the output to.
    """

    NATIVE = "native"
    BARE_JSON = "bare_json"
    FENCED_JSON = "fenced_json"
    HERMES = "hermes"
    QWEN_CODER = "qwen_coder"
    MISTRAL = "mistral"
    BARE_TEXT = "bare_text"
    UNKNOWN_TOOL = "unknown_tool"
    WRONG_ARGS = "wrong_args"
    PREMATURE_TERMINAL = "premature_terminal"
    TEXT = "text"
    SCRIPTED = "scripted"
    CONSTRAINED = "constrained"


class SimToolCall(BaseModel):
    """One tool call the sim writes: a name and arguments.

    ``arguments`` is normally an object; a string is sent verbatim as the OpenAI ``arguments``
    text (for scripting malformed native calls). The Anthropic and Ollama wire formats carry
    arguments as objects, so there a string that is not a JSON object comes back as raw text in
    the content, as a server whose tool-call parser failed would return it. ``id`` defaults to a
    deterministic ``call_…`` id.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class SimReply(BaseModel):
    """One scripted reply: exactly what the model "writes" for one request.

    ``text`` is the raw ``content``; ``tool_calls`` are native calls (OpenAI ``tool_calls``,
    Anthropic ``tool_use`` blocks, Ollama ``tool_calls``); ``reasoning`` goes to
    ``reasoning_content`` / a thinking block. ``fault`` makes this reply's request fail that way
    (the reply is consumed); ``finish_reason`` overrides the default (``tool_calls`` when there
    are calls, else ``stop``).
    """

    model_config = ConfigDict(frozen=True)

    text: str = ""
    tool_calls: tuple[SimToolCall, ...] = ()
    reasoning: str | None = None
    fault: Fault | None = None
    finish_reason: str | None = None


class FailureRates(BaseModel):
    """Probability of each way a small model gets an intended tool call wrong.

    Each field is a probability; the remainder (``1 - sum``) is a correct native call. The call
    dialects render the intended call as text in ``content``: ``bare_json``
    (``{"name": …, "arguments": {…}}``), ``fenced_json`` (the same in a fenced json block),
    ``hermes`` (``<tool_call>{…}</tool_call>``), ``qwen_coder``
    (``<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>``, one element
    per line), ``mistral`` (``[TOOL_CALLS]NAME{…}``). ``bare_text`` is prose with no call.
    ``unknown_tool``, ``wrong_args`` and ``premature_terminal`` are native calls that are wrong in
    content: an invented tool name, a dropped required argument or a wrongly typed one, the
    terminal ``respond`` tool called while other tools are still uncalled.
    """

    model_config = ConfigDict(frozen=True)

    bare_json: float = Field(default=0.0, ge=0.0, le=1.0)
    fenced_json: float = Field(default=0.0, ge=0.0, le=1.0)
    hermes: float = Field(default=0.0, ge=0.0, le=1.0)
    qwen_coder: float = Field(default=0.0, ge=0.0, le=1.0)
    mistral: float = Field(default=0.0, ge=0.0, le=1.0)
    bare_text: float = Field(default=0.0, ge=0.0, le=1.0)
    unknown_tool: float = Field(default=0.0, ge=0.0, le=1.0)
    wrong_args: float = Field(default=0.0, ge=0.0, le=1.0)
    premature_terminal: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_total(self) -> FailureRates:
        total = sum(self.as_dict().values())
        if total > 1.0 + 1e-9:
            raise ValueError(
                f"failure rates add up to {total:.3f}; they are probabilities of exclusive "
                "outcomes and must sum to at most 1"
            )
        return self

    def any(self) -> bool:
        """Whether any failure has a non-zero rate."""
        return any(self._by_dialect.values())

    def as_dict(self) -> dict[Dialect, float]:
        """Each failure dialect with its probability, in declaration order."""
        return dict(self._by_dialect)

    @functools.cached_property
    def _by_dialect(self) -> dict[Dialect, float]:
        return {Dialect(name): getattr(self, name) for name in type(self).model_fields}


# What an oracle says a perfect model would do next: call a tool, or answer with this text.
Intent: TypeAlias = SimToolCall | str
Oracle: TypeAlias = Callable[[RequestView], Intent]


def _normalise_script(value: Any) -> Any:
    if value is None or not isinstance(value, Mapping):
        return value
    return {
        key: [SimReply(text=r) if isinstance(r, str) else r for r in replies]
        if isinstance(replies, Sequence) and not isinstance(replies, str)
        else replies
        for key, replies in value.items()
    }


class SimConfig(BaseModel):
    """Everything that decides how a :class:`SimBackend` behaves.

    Identity: ``model`` (reported by ``/v1/models``, ``/props``, ``/api/tags``), ``n_ctx`` (the
    context window of each slot; a longer prompt is refused with llama-server's 400
    ``exceed_context_size_error``), ``n_slots``, ``host``/``port`` (port 0 picks a free one),
    ``api_key`` (when set, OpenAI requests need ``Authorization: Bearer <key>`` and Anthropic
    requests ``x-api-key: <key>``).

    Time: ``prefill_tps`` and ``decode_tps`` are tokens per second (``None`` or ``inf`` means
    instant, the default, so tests are fast); ``first_token_latency_s`` is added once per
    request after prefill. A stream that asks for ``return_progress`` (llama-server's field)
    gets a ``prompt_progress`` report when prefill starts and after each ``prefill_batch`` tokens,
    as llama-server sends them. ``slow_drip_interval_s`` is the gap between bytes of a
    ``slow_drip`` fault.

    Model: with ``script`` set, replies come from it (see :class:`SimReply`; a plain string is a
    text reply); otherwise ``oracle`` says what a perfect model would do and ``rates`` how often
    it is rendered wrong, drawn from a ``random.Random`` seeded by (``seed``, conversation,
    turn). ``fault_rates`` injects faults at random (drawn in request order from ``seed``).

    Tokens: text is split by a fixed regex into words (with their leading space), single
    punctuation marks and runs of whitespace; each word is then cut into pieces of
    ``round(1 / tokens_per_char)`` characters (default 4 characters per token, like common BPE
    vocabularies on English). Chat markers such as ``<|im_start|>`` are single tokens.

    ``reply_log_size`` bounds :attr:`SimStats.replies` (the oldest records are dropped first).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    model: str = "sim-model"
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    n_ctx: int = Field(default=8192, gt=0)
    n_slots: int = Field(default=1, gt=0)
    prefill_tps: float | None = Field(default=None, gt=0)
    decode_tps: float | None = Field(default=None, gt=0)
    first_token_latency_s: float = Field(default=0.0, ge=0)
    prefill_batch: int = Field(default=128, gt=0)
    seed: int = 0
    script: dict[str, list[SimReply]] | None = None
    rates: FailureRates = FailureRates()
    fault_rates: dict[Fault, float] = Field(default_factory=dict)
    oracle: Oracle | None = None
    tokens_per_char: float = Field(default=0.25, gt=0, le=1)
    api_key: str | None = None
    slow_drip_interval_s: float = Field(default=0.001, ge=0)
    reply_log_size: int = Field(default=10_000, ge=0)

    @field_validator("prefill_tps", "decode_tps", mode="after")
    @classmethod
    def _infinite_is_instant(cls, value: float | None) -> float | None:
        return None if value is not None and math.isinf(value) else value

    @field_validator("script", mode="before")
    @classmethod
    def _strings_are_text_replies(cls, value: Any) -> Any:
        return _normalise_script(value)

    @field_validator("fault_rates", mode="after")
    @classmethod
    def _check_fault_rates(cls, value: dict[Fault, float]) -> dict[Fault, float]:
        for fault, rate in value.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault rate for {fault.value} is {rate}; use a value in [0, 1]")
        total = sum(value.values())
        if total > 1.0 + 1e-9:
            raise ValueError(f"fault rates add up to {total:.3f}; they must sum to at most 1")
        return value

    @property
    def chars_per_token(self) -> int:
        """Characters per word piece, from ``tokens_per_char``."""
        return max(1, round(1 / self.tokens_per_char))
