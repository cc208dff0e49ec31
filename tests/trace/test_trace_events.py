"""Trace events round-trip through JSONL; a trace that cannot be read fails with file and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from forge_rt.core import LLMResponse, TextResponse, ToolCall, Usage
from forge_rt.errors import TraceFormatError
from forge_rt.guardrails import GuardrailOptions
from forge_rt.trace import (
    SCHEMA_VERSION,
    CallRecord,
    Decision,
    JsonlTraceSink,
    PrerequisiteRecord,
    RecordDecision,
    Recorded,
    RefusalRecord,
    ReplyReceived,
    RequestSent,
    SlotEvent,
    TeeSink,
    ToolRan,
    ToolRecord,
    TraceEvent,
    TraceFolder,
    TraceHeader,
    TurnEnded,
    TurnStarted,
    VerdictMade,
    open_trace,
    read_trace,
)

HEADER = TraceHeader(
    schema_version=SCHEMA_VERSION,
    actor="a",
    t=0.0,
    workflow="shop",
    tools=[ToolRecord(name="lookup", parameters={"type": "object"}, model="m:M")],
    required_steps=("lookup",),
    prerequisites={"order": [PrerequisiteRecord(tool="lookup", match_arg="item")]},
    respond_tool=True,
    options=GuardrailOptions(max_retries=1, loop_repeats=None),
    completed_steps=("lookup",),
    constraint="json_schema",
)
EVENTS: list[TraceEvent] = [
    HEADER,
    TurnStarted(actor="a", t=1.0, turn=1, user_text="hi"),
    RequestSent(
        actor="a", t=1.5, turn=1, iteration=1, messages=2, messages_hash="ab", tools=("x",)
    ),
    ReplyReceived(
        actor="a",
        t=2.0,
        turn=1,
        iteration=1,
        response=LLMResponse(
            result=[ToolCall(tool="lookup", args={"item": "tea"}, call_id="c1")],
            usage=Usage(prompt_tokens=3, completion_tokens=4),
            raw_text='{"name": "lookup"}',
        ),
        constrained=True,
    ),
    ReplyReceived(
        actor="a",
        t=2.1,
        turn=1,
        iteration=2,
        response=LLMResponse(result=TextResponse(content="x")),
    ),
    VerdictMade(
        actor="a",
        t=2.2,
        turn=1,
        iteration=1,
        decision=Decision(
            kind="execute",
            calls=[CallRecord(tool="lookup", args={"item": "tea"}, call_id="c1")],
            refused=[RefusalRecord(tool="respond", reason="premature_terminal")],
            dialects=("json",),
            nudges=["not yet"],
        ),
    ),
    ToolRan(
        actor="a",
        t=3.0,
        turn=1,
        call=ToolCall(tool="lookup", args={"item": "tea"}, call_id="c1"),
        error_type="RuntimeError",
        error_kind="error",
        error="down",
        duration_s=0.5,
    ),
    Recorded(actor="a", t=3.1, turn=1, calls=["c1"], decision=RecordDecision(failed=1)),
    SlotEvent(actor="a", t=3.2, kind="preempted", job=4, priority=10, attempt=1, tokens=3),
    TurnEnded(actor="a", t=4.0, turn=1, ok=False, error_type="ToolCallError", error="no"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_each_event_round_trips_through_json(event: TraceEvent) -> None:
    """An event decodes from its JSON line to an equal event, tagged by its kind."""
    line = msgspec.json.encode(event)
    assert event == msgspec.json.decode(line, type=TraceEvent)
    assert msgspec.json.decode(line)["e"] == type(event).__struct_config__.tag


def test_a_folder_sink_writes_one_file_per_actor_readable_while_open(tmp_path: Path) -> None:
    """Each actor's events go to its own file, on disk as soon as they are emitted."""
    folder = TraceFolder(tmp_path)
    other = msgspec.structs.replace(HEADER, actor="b/2")
    for event in [HEADER, other, EVENTS[1]]:
        folder.emit(event)
    assert [HEADER, EVENTS[1]] == read_trace(tmp_path / "a.jsonl")
    assert [other] == read_trace(tmp_path / "b_2.jsonl")
    assert folder.bytes_written == sum(p.stat().st_size for p in tmp_path.iterdir())
    folder.close()


def test_a_tee_sends_every_event_to_each_sink(tmp_path: Path) -> None:
    """Both files of a tee hold the same events."""
    one, two = JsonlTraceSink(tmp_path / "1.jsonl"), JsonlTraceSink(tmp_path / "2.jsonl")
    tee = TeeSink(one, two)
    for event in EVENTS:
        tee.emit(event)
    tee.close()
    assert EVENTS == read_trace(tmp_path / "1.jsonl") == read_trace(tmp_path / "2.jsonl")


def test_events_emitted_before_a_kill_are_all_on_disk(tmp_path: Path) -> None:
    """A process killed with SIGKILL right after emitting leaves every event whole."""
    path = tmp_path / "killed.jsonl"
    script = (
        "import os, signal, msgspec\n"
        "from forge_rt.trace import JsonlTraceSink, TraceEvent\n"
        f"sink = JsonlTraceSink({str(path)!r})\n"
        f"for line in {[msgspec.json.encode(e).decode() for e in EVENTS]!r}:\n"
        "    sink.emit(msgspec.json.decode(line, type=TraceEvent))\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=Path.cwd(), check=False)
    assert done.returncode == -9
    assert read_trace(path) == EVENTS


def _trace(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_a_line_that_is_not_an_event_is_reported_with_its_place(tmp_path: Path) -> None:
    """A cut-off or foreign line fails with the file and line number, never skipped."""
    path = _trace(tmp_path, msgspec.json.encode(HEADER), b'{"e": "turn", "actor": "a", "t')
    with pytest.raises(
        TraceFormatError, match=r":2: not a trace event of schema version 2"
    ) as info:
        read_trace(path)
    assert (str(path), 2) == (info.value.path, info.value.line)


def test_a_trace_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    """A header of another version says which version this forge_rt reads."""
    other = msgspec.structs.replace(HEADER, schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(
        TraceFormatError, match=r"schema version 3; this forge_rt reads versions 1, 2$"
    ):
        read_trace(_trace(tmp_path, msgspec.json.encode(other)))


def test_a_version_1_header_is_read_with_its_bundled_switches_split(tmp_path: Path) -> None:
    """Version 1 wrote no schema_version and switched rules in bundles: each bundle becomes
    the switches of the rules it stood for, so replay rebuilds the run's guardrails."""
    header = msgspec.json.decode(msgspec.json.encode(HEADER))
    del header["schema_version"]
    header["options"] = {"max_retries": 1, "ground_answers": False, "cover_lists": False}
    (read,) = read_trace(_trace(tmp_path, msgspec.json.encode(header)))
    assert isinstance(read, TraceHeader)
    assert read.schema_version == SCHEMA_VERSION
    off = {"answer_grounding", "chain_ends", "list_coverage", "lost_numbers"}
    assert read.options == GuardrailOptions(max_retries=1).without(*off)


def test_events_before_their_actors_header_are_refused(tmp_path: Path) -> None:
    """An actor's first event must be its header (replay rebuilds its guardrails from it)."""
    with pytest.raises(TraceFormatError, match=r"event of actor 'a' before its header$"):
        read_trace(_trace(tmp_path, msgspec.json.encode(EVENTS[1])))


def test_a_missing_trace_or_empty_folder_is_refused(tmp_path: Path) -> None:
    """Neither a path that does not exist nor a folder without traces reads as empty."""
    with pytest.raises(TraceFormatError, match=r"no such trace file or folder$"):
        read_trace(tmp_path / "nope")
    with pytest.raises(TraceFormatError, match=r"a folder with no \*\.jsonl trace files$"):
        read_trace(tmp_path)


def test_a_trace_folder_is_read_with_its_subfolders(tmp_path: Path) -> None:
    """An eval's ``<out>.traces`` holds a folder per ablation: all of it is one trace."""
    for name in ("full/a.jsonl", "bare/b.jsonl"):
        sink = JsonlTraceSink(tmp_path / name)
        sink.emit(msgspec.structs.replace(HEADER, actor=name))
        sink.close()
    assert [e.actor for e in read_trace(tmp_path)] == ["bare/b.jsonl", "full/a.jsonl"]


def test_a_trace_path_opens_a_folder_or_one_file(tmp_path: Path) -> None:
    """A ``.jsonl`` path is one file for every actor; any other path a folder of them."""
    one, folder = open_trace(tmp_path / "all.jsonl"), open_trace(tmp_path / "each")
    sinks = [s.sinks[0] if isinstance(s, TeeSink) else s for s in (one, folder)]
    assert (JsonlTraceSink, TraceFolder) == tuple(type(s) for s in sinks)
    one.close()
    folder.close()
