"""Consecutive-failure budgets: how many bad replies and failed tools the loop tolerates.

Each budget counts failures *in a row*; a success resets it. ``max_*`` is how many failures are
fed back to the model as corrections -- the next one in the row exhausts the budget and raises a
typed error carrying the attempt count, the last raw reply or exception, and the cause.
"""

from __future__ import annotations

from actors import quiet_logger
from forge_rt.errors import ToolCallError, ToolExecutionError

__all__ = ["ErrorTracker"]

log = quiet_logger(__name__)


class ErrorTracker:
    """Counts consecutive retries (no usable call) and consecutive tool errors: with
    ``max_retries=3`` a fourth bad reply in a row raises :class:`ToolCallError`; with
    ``max_tool_errors=2`` the third tool failure raises :class:`ToolExecutionError`, and with
    ``max_tool_errors=0`` the first (no recovery)."""

    def __init__(self, max_retries: int = 3, max_tool_errors: int = 2) -> None:
        if max_retries < 0 or max_tool_errors < 0:
            raise ValueError(
                f"budgets must be >= 0, got max_retries={max_retries}, "
                f"max_tool_errors={max_tool_errors}"
            )
        self.max_retries = max_retries
        self.max_tool_errors = max_tool_errors
        self._retries = 0
        self._tool_errors = 0

    @property
    def retries(self) -> int:
        """Bad replies in a row so far."""
        return self._retries

    @property
    def tool_errors(self) -> int:
        """Failed tool executions in a row so far."""
        return self._tool_errors

    def record_retry(self, raw: str | None, cause: str) -> int:
        """Count one reply that held no usable call; returns how many in a row (the nudge tier).
        Raises :class:`ToolCallError` once the row is longer than ``max_retries``."""
        self._retries += 1
        if self._retries > self.max_retries:
            log.warning("guardrails.retries_exhausted", attempts=self._retries, cause=cause)
            raise ToolCallError(
                f"the model sent {self._retries} replies in a row without a valid tool call "
                f"(retry budget {self.max_retries}); last problem: {cause}. Check that the "
                "backend serves a tool-capable chat template, or raise max_retries",
                attempts=self._retries,
                last_raw=raw,
                cause=cause,
            )
        return self._retries

    def record_tool_error(self, tool: str, exc: BaseException) -> int:
        """Count one failed tool execution; returns how many in a row. Raises
        :class:`ToolExecutionError` (from ``exc``) once the row exceeds ``max_tool_errors``."""
        self._tool_errors += 1
        if self._tool_errors > self.max_tool_errors:
            log.warning("guardrails.tool_errors_exhausted", tool=tool, attempts=self._tool_errors)
            raise ToolExecutionError(
                f"tool {tool!r} failed with {type(exc).__name__}: {exc} -- {self._tool_errors} "
                f"tool failure(s) in a row (budget {self.max_tool_errors}). Fix the tool or its "
                "inputs, or raise max_tool_errors",
                tool=tool,
                attempts=self._tool_errors,
                last_error=exc,
            ) from exc
        return self._tool_errors

    def restore(self, *, retries: int, tool_errors: int) -> None:
        """Resume with ``retries`` and ``tool_errors`` already used (a stored session's)."""
        self._retries = retries
        self._tool_errors = tool_errors

    def reset_retries(self) -> None:
        """A reply held valid calls: the retry row is broken."""
        self._retries = 0

    def reset_tool_errors(self) -> None:
        """A tool succeeded: the tool-error row is broken."""
        self._tool_errors = 0
