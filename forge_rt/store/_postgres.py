"""Sessions in PostgreSQL, for several processes or machines sharing them (psycopg 3).

psycopg's async connection needs asyncio, so this store runs its synchronous connection in a
worker thread, like the SQLite store. A commit locks its session's row (``SELECT ... FOR
UPDATE``) from the version check to its end; migrations take a transaction-scoped advisory lock,
so two processes starting on an empty database do not both create the schema.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from forge_rt.store._sql import SqlStore

__all__ = ["PostgresStore"]

# The advisory lock key migrations hold: a fixed number derived from a fixed name.
_SCHEMA_LOCK = zlib.crc32(b"forge_rt.store.schema")


def _redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


class PostgresStore(SqlStore):
    """Sessions in the PostgreSQL database at ``url`` (``postgresql://user@host:port/db``).

    Needs the ``postgres`` extra (``pip install 'forge-rt[postgres]'``); ``Session.open(client,
    store="postgresql://...")`` opens and closes one.
    """

    _param = "%s"
    _blob = "BYTEA"
    _real = "DOUBLE PRECISION"

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        import psycopg  # the optional extra: imported where it is needed, an ImportError says so

        self._psycopg = psycopg
        self.url = url
        self._connect_timeout_s = connect_timeout_s
        super().__init__(_redacted(url))

    def _connect(self) -> Any:
        return self._psycopg.connect(
            self.url, autocommit=True, connect_timeout=max(1, round(self._connect_timeout_s))
        )

    @contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        with conn.transaction(), conn.cursor() as cur:
            yield cur

    def _driver_errors(self) -> tuple[type[Exception], ...]:
        return (self._psycopg.Error,)

    def _lock_schema(self, cur: Any) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))

    def _lock_session_sql(self) -> str:
        return " FOR UPDATE"

    def _tables_sql(self) -> str:
        return "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
