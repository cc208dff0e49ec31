"""Logging set-up for the command line only; the library itself never configures logging."""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]


def configure_logging(*, json: bool, level: str = "info") -> None:
    """Send structlog output to stderr: human-readable console, or one JSON object per line."""
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        # Not cached: a module's logger bound while one command ran would keep that command's
        # level after it (the tests run commands in-process, one after another).
        cache_logger_on_first_use=False,
    )
