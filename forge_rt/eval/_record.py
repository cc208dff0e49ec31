"""One eval run's record, appended to a JSONL file; the key lets a re-run skip what is done."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["RunRecord", "append_record", "read_records"]


class RunRecord(msgspec.Struct, kw_only=True):
    """Everything one scenario run produced, with the config that produced it."""

    scenario: str
    tags: tuple[str, ...]
    run: int
    ablation: str
    backend: str
    model: str
    completed: bool
    correct: bool
    reason: str = ""
    error_type: str | None = None
    error: str | None = None
    output: str = ""
    iterations: int = 0
    inferences: int = 0
    tool_calls: int = 0
    ideal_calls: int = 0
    tool_errors: int = 0
    retries: dict[str, int] = msgspec.field(default_factory=dict)
    # How often each guardrail rule decided a reply (forge_rt.guardrails.RULES).
    rules: dict[str, int] = msgspec.field(default_factory=dict)
    rescued: dict[str, int] = msgspec.field(default_factory=dict)
    collapsed: int = 0
    escalations: int = 0
    repetition_stops: int = 0
    compactions: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    constraint: str | None = None
    wall_s: float = 0.0
    high_priority_ttft_s: float | None = None
    background_ttft_s: float | None = None
    # The run's trace (forge_rt.trace), relative to the results file's folder.
    trace: str | None = None
    # Which suite the case is from ("own", "generated", "bfcl") and its half (forge_rt.eval._split).
    suite: str = "own"
    split: str = ""
    # Benchmark cases (BFCL): each answer as the client received it, the calls decoded from them
    # ({name: arguments}, per turn and step for multi-turn cases) and the benchmark's verdict.
    replies: list[dict[str, Any]] = msgspec.field(default_factory=list)
    calls: list[Any] = msgspec.field(default_factory=list)
    checker: dict[str, Any] = msgspec.field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        return (self.backend, self.model, self.ablation, self.scenario, self.run)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(RunRecord)


def append_record(path: Path, record: RunRecord) -> None:
    """Append one record as a JSON line (flushed, so an interrupted eval keeps what it did)."""
    with path.open("ab") as out:
        out.write(_encoder.encode(record) + b"\n")


def read_records(path: Path) -> Iterator[RunRecord]:
    """Every record in ``path`` (none if it does not exist)."""
    if not path.exists():
        return
    with path.open("rb") as source:
        for number, line in enumerate(source, 1):
            if line.strip():
                try:
                    yield _decoder.decode(line)
                except msgspec.DecodeError as exc:
                    raise ValueError(f"{path}:{number}: not a run record ({exc})") from exc
