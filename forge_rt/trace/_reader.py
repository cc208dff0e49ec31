"""Reading a trace back: a JSONL file, or a folder of them, as typed events."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from forge_rt.errors import TraceFormatError
from forge_rt.trace._events import SCHEMA_VERSION, TraceEvent, TraceHeader

__all__ = ["read_trace", "trace_files"]

_decoder = msgspec.json.Decoder(TraceEvent)

_READABLE = (1, SCHEMA_VERSION)

# Version 1 headers switched some guardrail rules in bundles; version 2 has a switch per rule.
_V1_BUNDLES = {
    "ground_answers": ("answer_grounding", "chain_ends"),
    "ground_arguments": ("guessed_values", "listing_pick"),
    "cover_lists": ("list_coverage", "lost_numbers"),
}


def _from_v1(line: bytes) -> bytes:
    """A version 1 header line as version 2: each bundled switch becomes the switches of the
    rules it stood for, so replay rebuilds the guardrails the run had. Any other line as is."""
    if b'"e":"header"' not in line:
        return line
    header = msgspec.json.decode(line)
    if not isinstance(header, dict) or header.get("schema_version", 1) != 1:
        return line
    options = dict(header.get("options") or {})
    for bundle, rules in _V1_BUNDLES.items():
        if bundle in options:
            value = options.pop(bundle)
            options.update(dict.fromkeys(rules, value))
    return msgspec.json.encode({**header, "options": options, "schema_version": SCHEMA_VERSION})


def trace_files(path: str | os.PathLike[str]) -> list[Path]:
    """``path`` itself, or the ``*.jsonl`` files in the folder ``path`` and its subfolders (an
    eval's ``<out>.traces``), sorted by path."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.jsonl"))
        if not files:
            raise TraceFormatError(f"{path}: a folder with no *.jsonl trace files", path=str(path))
        return files
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such trace file or folder", path=str(path))
    return [path]


def read_trace(path: str | os.PathLike[str]) -> list[TraceEvent]:
    """Every event of the trace at ``path`` (a file, or a folder of files), file by file.

    Raises :class:`~forge_rt.errors.TraceFormatError` naming the file and line of the first
    line that is not an event of this schema, of a header of another schema version, and of
    an actor whose first event is not its header. A last line cut short (the process was
    killed while writing it) is an error too: it is reported, never skipped.
    """
    events: list[TraceEvent] = []
    for file in trace_files(path):
        headed: set[str] = set()
        with open(file, "rb") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    event = _decoder.decode(_from_v1(line))
                except msgspec.DecodeError as exc:
                    raise TraceFormatError(
                        f"{file}:{number}: not a trace event of schema version "
                        f"{SCHEMA_VERSION}: {exc}",
                        path=str(file),
                        line=number,
                    ) from exc
                if isinstance(event, TraceHeader):
                    if event.schema_version not in _READABLE:
                        raise TraceFormatError(
                            f"{file}:{number}: trace schema version {event.schema_version}; "
                            f"this forge_rt reads versions {', '.join(map(str, _READABLE))}",
                            path=str(file),
                            line=number,
                        )
                    headed.add(event.actor)
                elif event.actor not in headed:
                    raise TraceFormatError(
                        f"{file}:{number}: event of actor {event.actor!r} before its header",
                        path=str(file),
                        line=number,
                    )
                events.append(event)
    return events
