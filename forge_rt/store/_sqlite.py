"""The embedded session store: one SQLite file, write-ahead logged, no server.

WAL lets readers (``forge-rt`` listing sessions, a second process) read while the daemon
writes. ``synchronous="normal"`` (the default) makes a commit durable against the process
dying (``kill -9``, a crash): the commit is in the WAL, in the operating system's hands, when
:meth:`commit` returns; ``"full"`` also syncs it to the disk, against a power cut, at the cost of
an fsync per commit. Several processes may open one file; a commit holds the write lock
(``BEGIN IMMEDIATE``) from its version check to its end, so they never interleave a session.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from forge_rt.store._sql import SqlStore

__all__ = ["SqliteStore"]

# How long a commit waits for another process's write lock before failing with StoreError.
_BUSY_TIMEOUT_MS = 10_000


class SqliteStore(SqlStore):
    """Sessions in the SQLite file at ``path`` (created with its folder if missing).

    ``async with SqliteStore(path) as store:`` opens it and migrates its schema; or pass the
    path to ``Session.open(client, store=path)``, which opens and closes it.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: Literal["normal", "full"] = "normal"
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        self.path = Path(path)
        self._synchronous = synchronous
        super().__init__(str(self.path))

    def _connect(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,  # autocommit: transactions are explicit BEGIN ... COMMIT
            check_same_thread=False,  # one worker thread at a time, by the store's limiter
            timeout=_BUSY_TIMEOUT_MS / 1000,
        )
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            conn.close()
            raise sqlite3.OperationalError(f"cannot use write-ahead logging (journal mode {mode})")
        conn.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        return conn

    @contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE")  # the write lock now, so the version check holds
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def _lock_schema(self, cur: Any) -> None:
        """Nothing more to take: ``BEGIN IMMEDIATE`` already holds the database's write lock."""

    def _driver_errors(self) -> tuple[type[Exception], ...]:
        return (sqlite3.Error,)

    def _tables_sql(self) -> str:
        return "SELECT name FROM sqlite_master WHERE type = 'table'"
