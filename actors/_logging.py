"""Loggers for library code: silent until the application configures logging.

structlog, unconfigured, prints every event to stdout; a library that logs through it would
write into its user's terminal (``actor terminated`` at every shutdown). A :class:`QuietLogger`
sends each event to structlog once the application has configured structlog, to the standard
library's logger of the same name once the application has configured ``logging`` (a root
handler), and nowhere before either -- the application decides, the library never does.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["QuietLogger", "quiet_logger"]

_LEVELS = logging.getLevelNamesMapping()


class QuietLogger:
    """The structlog calls library code makes (``debug`` ... ``exception``, ``bind``), routed
    where the application's configuration says at the moment of each call."""

    __slots__ = ("_context", "_name")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}

    def bind(self, **values: Any) -> QuietLogger:
        return QuietLogger(self._name, {**self._context, **values})

    def debug(self, event: str, **values: Any) -> None:
        self._emit("debug", event, values)

    def info(self, event: str, **values: Any) -> None:
        self._emit("info", event, values)

    def warning(self, event: str, **values: Any) -> None:
        self._emit("warning", event, values)

    def error(self, event: str, **values: Any) -> None:
        self._emit("error", event, values)

    def critical(self, event: str, **values: Any) -> None:
        self._emit("critical", event, values)

    def log(self, level: int, event: str, **values: Any) -> None:
        """At a standard library level number (``logging.INFO``)."""
        self._emit(logging.getLevelName(level).lower(), event, values)

    def exception(self, event: str, **values: Any) -> None:
        values.setdefault("exc_info", True)
        self._emit("error", event, values)

    def _emit(self, level: str, event: str, values: dict[str, Any]) -> None:
        fields = {**self._context, **values} if self._context else values
        if structlog.is_configured():
            getattr(structlog.get_logger(self._name), level)(event, **fields)
            return
        if not logging.getLogger().handlers:
            return  # nothing is configured: a library stays silent
        std = logging.getLogger(self._name)
        number = _LEVELS[level.upper()]
        if std.isEnabledFor(number):
            exc_info = fields.pop("exc_info", None)
            text = " ".join(f"{k}={v!r}" for k, v in fields.items())
            std.log(number, "%s %s", event, text, exc_info=exc_info)


def quiet_logger(name: str) -> QuietLogger:
    """The logger library module ``name`` should log through (see :class:`QuietLogger`)."""
    return QuietLogger(name)
