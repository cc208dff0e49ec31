"""How long a slot waits on its backend: ``StallLimits`` and ``BackendRetry``.

``StallLimits`` bounds how long a running call may produce nothing before the slot gives up on
it; ``BackendRetry`` is how long a backend that is briefly away (a restart, a reload) is ridden
out before a call fails. Both are settings of a SlotWorker (``SlotWorker.start``,
``Session.open``), read by its executors.
"""

from __future__ import annotations

import math

import msgspec

from forge_rt.core import InferenceRequest, PromptProgressChunk
from forge_rt.errors import BackendError, ConfigurationError, FaultKind
from forge_rt.runtime._report_pace import ReportPace
from forge_rt.runtime._slot_messages import _Failed

__all__ = ["DEFAULT_RETRY", "BackendRetry", "StallLimits"]

_RETRIED_KINDS = frozenset(
    {
        FaultKind.CONNECT_REFUSED,
        FaultKind.CONNECT_TIMEOUT,
        FaultKind.RESET_BEFORE_FIRST_BYTE,
        FaultKind.RESET_MID_STREAM,  # only while retry-safe: nothing of it reached the caller
    }
)


class BackendRetry(msgspec.Struct, frozen=True, kw_only=True):
    """Riding out a backend that is briefly away (a restart, a reload), for ``window_s`` seconds.

    A call that failed before anything reached its caller -- the connection refused, reset
    before the response began or before its first chunk (a server killed mid-prefill), or a
    503 -- is tried again after a backoff that starts at
    ``first_backoff_s``, doubles up to ``max_backoff_s`` and is jittered (half to all of it), until
    the window is spent; then the last error goes to the caller. The embedded model restarts in
    about 3 s on the development machine; the 30 s default covers that ten times over. Faults
    that would only repeat (a 4xx, a 500, a stall) are never retried here, and neither is a
    backend the slot has never reached: a wrong URL fails at once instead of after the window.
    """

    window_s: float = 30.0
    first_backoff_s: float = 0.1
    max_backoff_s: float = 2.0

    def covers(self, outcome: object, elapsed_s: float) -> bool:
        """Whether ``outcome`` is worth another try, ``elapsed_s`` into the window."""
        if not isinstance(outcome, _Failed) or elapsed_s > self.window_s:
            return False
        error = outcome.error
        if not isinstance(error, BackendError) or not error.retry_safe:
            return False
        return error.kind in _RETRIED_KINDS or error.status == 503


DEFAULT_RETRY = BackendRetry()
"""What a SlotWorker rides out unless told otherwise: 30 s of a backend being away."""


class StallLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How long a running call may produce nothing before the slot gives up on it.

    The first token may take ``first_token_s`` plus one second per ``prefill_floor_tps`` prompt
    tokens (estimated at four characters each, tool schemas included): prefill grows with the
    prompt, so a fixed limit would either cut long prompts or wait too long on short ones. A
    backend that reports its progress on the prompt (llama-server, asked by
    :class:`~forge_rt.clients.LlamaServerClient`) restarts that wait with each report, for the
    tokens it says are left (:meth:`prefill_limit`): a prefill slowed by a crowded CPU keeps
    going as long as it moves, and a server that stops moving is caught. After the first token,
    each next chunk must come within ``between_chunks_s``. ``None`` turns a limit off. The
    defaults leave a wide margin over
    the embedded Qwen2.5-Coder on the 2-core development CPU (about 160 prompt tokens/s and
    20 generated tokens/s for the 0.5B, a third of that for the 1.5B, idle): a prefill floor eight
    times slower than the 0.5B's and a gap between tokens 500 times longer than its usual one.

    Once the slot's backend has reported progress on earlier calls, a call that has had its
    first report waits for its next one (or its first token after the last) at most
    ``report_gap_factor`` times the longest such wait seen recently, and at least
    ``report_gap_floor_s`` (see :mod:`forge_rt.runtime._report_pace`): a llama-server that
    stops in mid-prefill is caught in seconds instead of at the prefill limit.
    ``report_gap_factor=None`` turns that off.

    A call fetched whole (``whole=True``) streams nothing to watch between, so it gets one limit
    for the whole call: the first-token limit plus its ``max_tokens`` (``assumed_max_tokens``
    when the request sets none) at ``decode_floor_tps`` -- ten times slower than the 0.5B
    generates. A hung backend then ends the call in minutes, not at the client's read timeout.
    """

    first_token_s: float | None = 30.0
    prefill_floor_tps: float = 20.0
    between_chunks_s: float | None = 30.0
    decode_floor_tps: float = 2.0
    assumed_max_tokens: int = 2048
    report_gap_factor: float | None = 4.0
    report_gap_floor_s: float = 3.0

    def __post_init__(self) -> None:
        if self.report_gap_factor is not None and self.report_gap_factor < 1:
            raise ConfigurationError(
                f"StallLimits.report_gap_factor must be >= 1 or None, got {self.report_gap_factor}"
            )
        if self.report_gap_floor_s <= 0:
            raise ConfigurationError(
                f"StallLimits.report_gap_floor_s must be > 0, got {self.report_gap_floor_s}"
            )

    def report_pace(self) -> ReportPace | None:
        """A fresh pace for a slot's executors to share, or ``None`` with it turned off."""
        if self.report_gap_factor is None:
            return None
        return ReportPace(factor=self.report_gap_factor, floor_s=self.report_gap_floor_s)

    def first_token_limit(self, request: InferenceRequest) -> float:
        if self.first_token_s is None:
            return math.inf
        size = sum(len(m.content) for m in request.messages) + sum(
            len(spec.description) + len(str(spec.json_schema())) for spec in request.tools
        )
        return self.first_token_s + size / 4 / self.prefill_floor_tps

    def prefill_limit(self, progress: PromptProgressChunk) -> float:
        """How long the rest of the prompt may take after a progress report: the first-token
        base plus the tokens it says are left, at the prefill floor."""
        if self.first_token_s is None:
            return math.inf
        return self.first_token_s + progress.remaining / self.prefill_floor_tps

    def whole_call_limit(self, request: InferenceRequest) -> float:
        if self.first_token_s is None or self.between_chunks_s is None:
            return math.inf
        tokens = request.sampling.max_tokens or self.assumed_max_tokens
        return self.first_token_limit(request) + tokens / self.decode_floor_tps
