"""Where trace events go: a JSONL file, a folder of them (one per actor), or several sinks.

A sink's ``emit`` is synchronous on purpose. Events are emitted from inside the slot's
scheduler and the guarded step, where an added checkpoint would be a new place for a
cancellation to land and could reorder scheduling; a JSONL line is one unbuffered ``write``
of a few hundred bytes to the OS, which costs microseconds and survives ``kill -9`` (the OS
has it once ``write`` returns; only a machine crash can lose it).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

import msgspec

from forge_rt.trace._events import TraceEvent

__all__ = [
    "JsonlTraceSink",
    "TeeSink",
    "TraceFolder",
    "TraceSink",
    "open_trace",
    "opened_trace",
]


@runtime_checkable
class TraceSink(Protocol):
    """Receives every event of a run; ``close`` releases what it holds (its owner calls it)."""

    def emit(self, event: TraceEvent) -> None: ...

    def close(self) -> None: ...


_encoder = msgspec.json.Encoder()


class JsonlTraceSink:
    """Every event, one JSON object per line, appended to ``path`` (created with its folder).

    The file is unbuffered: each event is one ``write``, on disk (in the OS) when ``emit``
    returns, so a killed process leaves every event it emitted, whole.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = open(self.path, "ab", buffering=0)  # noqa: SIM115 -- closed by close()
        self.bytes_written = 0

    def emit(self, event: TraceEvent) -> None:
        line = _encoder.encode(event) + b"\n"
        self._file.write(line)
        self.bytes_written += len(line)

    def close(self) -> None:
        self._file.close()


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class TraceFolder:
    """One JSONL file per actor in ``folder`` (``<actor>.jsonl``), opened at its first event.

    What ``Session.open(trace=path)`` uses: a daemon's sessions each get their own file, which
    ``forge-rt trace show`` and ``forge-rt replay`` read alone or as the whole folder.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, JsonlTraceSink] = {}

    def path_for(self, actor: str) -> Path:
        """The file ``actor``'s events go to."""
        return self.folder / f"{_UNSAFE.sub('_', actor)}.jsonl"

    def emit(self, event: TraceEvent) -> None:
        sink = self._files.get(event.actor)
        if sink is None:
            sink = self._files[event.actor] = JsonlTraceSink(self.path_for(event.actor))
        sink.emit(event)

    @property
    def bytes_written(self) -> int:
        return sum(s.bytes_written for s in self._files.values())

    def close(self) -> None:
        for sink in self._files.values():
            sink.close()
        self._files.clear()


class TeeSink:
    """Every event to each of ``sinks``, in order; closing closes them all."""

    def __init__(self, *sinks: TraceSink) -> None:
        self.sinks = sinks

    def emit(self, event: TraceEvent) -> None:
        for sink in self.sinks:
            sink.emit(event)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def open_trace(target: str | os.PathLike[str]) -> TraceSink:
    """The sink ``Session.open(trace=path)`` opens: a :class:`TraceFolder` at ``target`` (a
    ``.jsonl`` path: one :class:`JsonlTraceSink` file), teed to OpenTelemetry spans when the
    ``opentelemetry`` API is installed (``pip install forge-rt[otel]``)."""
    path = Path(target)
    sink: TraceSink = JsonlTraceSink(path) if path.suffix == ".jsonl" else TraceFolder(path)
    from forge_rt.trace._otel import otel_available

    if otel_available():
        from forge_rt.trace._otel import OtelTraceSink

        return TeeSink(sink, OtelTraceSink())
    return sink


@asynccontextmanager
async def opened_trace(
    target: TraceSink | str | os.PathLike[str] | None,
) -> AsyncIterator[TraceSink | None]:
    """The sink for ``target``: a path is opened here (:func:`open_trace`) and closed on exit;
    a sink passed in stays its owner's to close; ``None`` is no trace."""
    if target is None or isinstance(target, TraceSink):
        yield target
        return
    sink = open_trace(target)
    try:
        yield sink
    finally:
        sink.close()
