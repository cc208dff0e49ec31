"""The sidecar next to an eval's JSONL: every command that wrote to it, and with which settings.

``eval_results.jsonl`` gets ``eval_results.meta.json``. Records stay small (one line per run,
keyed by backend, model, ablation, scenario and run); what is the same for a whole invocation --
the exact command line, the simulated failure rates, the sampling, the seed -- is written once
per invocation here. The report prints these commands, and a resumed eval checks that it would
not mix results made with different settings under the same backend and model labels.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from forge_rt.errors import ForgeError

__all__ = [
    "EvalMeta",
    "Invocation",
    "Outcome",
    "meta_path",
    "read_meta",
    "recording",
    "source_commit",
    "utc_now",
    "write_meta",
]


class Invocation(msgspec.Struct, kw_only=True):
    """One ``forge-rt eval`` invocation against a results file.

    ``settings`` are what decides the model's behaviour (backend, backend kind, model, sampling,
    simulated failure rates, seed); ``outcome`` is ``running`` while it runs, then ``done``,
    ``interrupted`` or ``failed: <why>``. ``commit`` is the source tree's git commit when run
    from a checkout (``None`` from an installed package): a results file resumed after the
    guardrails changed holds runs of several commits, and says which.
    """

    command: str
    started: str
    settings: dict[str, Any]
    scenarios: list[str]
    ablations: list[str]
    runs: int
    version: str
    commit: str | None = None
    finished: str | None = None
    outcome: str = "running"
    new_records: int = 0

    @property
    def label(self) -> tuple[str, str]:
        """The (backend, model) labels its records carry."""
        return (str(self.settings.get("backend", "")), str(self.settings.get("model", "")))


class EvalMeta(msgspec.Struct, kw_only=True):
    """Everything in one sidecar file: the invocations, oldest first."""

    invocations: list[Invocation] = msgspec.field(default_factory=list)

    def conflicting(self, settings: dict[str, Any]) -> Invocation | None:
        """An earlier invocation with the same backend and model labels but other settings."""
        label = (str(settings.get("backend", "")), str(settings.get("model", "")))
        for invocation in self.invocations:
            if invocation.label == label and invocation.settings != settings:
                return invocation
        return None


_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(EvalMeta)


def meta_path(out: Path) -> Path:
    """The sidecar of the results file ``out``: same directory, suffix ``.meta.json``."""
    return out.with_suffix(".meta.json")


def read_meta(out: Path) -> EvalMeta:
    """The sidecar of ``out`` (empty when there is none yet)."""
    path = meta_path(out)
    if not path.exists():
        return EvalMeta()
    try:
        return _decoder.decode(path.read_bytes())
    except msgspec.DecodeError as exc:
        raise ValueError(
            f"{path}: not an eval sidecar ({exc}); move it away to start a new one"
        ) from exc


def write_meta(out: Path, meta: EvalMeta) -> None:
    """Replace the sidecar of ``out`` atomically (a crash leaves the old or the new file)."""
    path = meta_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = msgspec.json.format(_encoder.encode(meta), indent=2) + b"\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def utc_now() -> str:
    """Now, as an ISO-8601 UTC timestamp with seconds."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class Outcome:
    """How a recorded invocation ended: ``failure`` is the backend's error when it failed."""

    def __init__(self) -> None:
        self.failure: ForgeError | None = None


def source_commit() -> str | None:
    """The git commit (short, ``+dirty`` with uncommitted changes) of the checkout forge_rt
    runs from, or ``None`` where it is not a git checkout (an installed package) or no ``git``
    is installed to read it."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    head = _git(root, "rev-parse", "--short", "HEAD")
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return f"{head}+dirty" if dirty else head


def _git(root: Path, *args: str) -> str:
    """What ``git args`` prints in the checkout at ``root``, stripped."""
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@contextmanager
def recording(out: Path, meta: EvalMeta, invocation: Invocation, new: Sized) -> Iterator[Outcome]:
    """Write ``invocation`` to ``out``'s sidecar now and again when the block ends, with how
    it ended (``done``, ``failed: ...``, ``interrupted``) and how many records it added
    (``len(new)``).

    A :class:`~forge_rt.errors.ForgeError` from the block ends it as ``failed`` and is kept on
    the yielded :class:`Outcome` for the caller to report once the sidecar is written; anything
    else propagates.
    """
    meta.invocations.append(invocation)
    write_meta(out, meta)
    outcome = Outcome()
    try:
        yield outcome
        invocation.outcome = "done"
    except ForgeError as exc:
        outcome.failure = exc
        invocation.outcome = f"failed: {type(exc).__name__}: {exc}"[:500]
    except KeyboardInterrupt:
        invocation.outcome = "interrupted"
        raise
    finally:
        invocation.finished = utc_now()
        invocation.new_records = len(new)
        write_meta(out, meta)
