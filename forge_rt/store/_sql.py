"""The SQL both stores share: the schema, its migrations, and commit/load/list/delete.

A store runs a blocking DB-API connection (``sqlite3``, ``psycopg``) in a worker thread, one
operation at a time (a ``CapacityLimiter(1)``), so the trio loop never waits on the disk. A
thread runs to its end even when the caller is cancelled: a commit that started lands, and the
cancellation is delivered after it.

The schema is versioned: ``forge_rt_schema`` holds the version; opening a store applies the
migrations from that version to :data:`SCHEMA_VERSION` in one transaction (a fresh database
starts at 0), and refuses a database written by a newer forge_rt.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import msgspec
import trio

from actors import quiet_logger
from forge_rt.core import Message
from forge_rt.errors import SessionConflictError, StoreError, StoreSchemaError
from forge_rt.store._records import Lease, SessionInfo, StoredSession

__all__ = ["SCHEMA_VERSION", "SqlStore"]

_log = quiet_logger(__name__)

T = TypeVar("T")

# Each entry migrates the schema from its index to its index + 1. ``{blob}`` and ``{real}`` are
# the dialect's binary and floating-point column types. Never edit a shipped entry: add one.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE forge_rt_schema (version INTEGER NOT NULL)",
        "INSERT INTO forge_rt_schema (version) VALUES (0)",
        """CREATE TABLE forge_rt_sessions (
            name TEXT PRIMARY KEY,
            workflow TEXT NOT NULL,
            status TEXT NOT NULL,
            version INTEGER NOT NULL,
            message_count INTEGER NOT NULL,
            state {blob} NOT NULL,
            created_at {real} NOT NULL,
            updated_at {real} NOT NULL
        )""",
        """CREATE TABLE forge_rt_messages (
            session TEXT NOT NULL,
            seq INTEGER NOT NULL,
            body {blob} NOT NULL,
            PRIMARY KEY (session, seq)
        )""",
    ),
    (
        """CREATE TABLE forge_rt_leases (
            session TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            expires_at {real} NOT NULL
        )""",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)
"""The schema version this forge_rt writes (and migrates older stores to)."""

_encode_message = msgspec.json.Encoder().encode
_decode_message = msgspec.json.Decoder(Message).decode

_INFO_COLUMNS = (
    "name, workflow, status, message_count, version, created_at, updated_at, owner, expires_at"
)
_INFO_FROM = "forge_rt_sessions LEFT JOIN forge_rt_leases ON forge_rt_leases.session = name"


def _info(row: Sequence[Any]) -> SessionInfo:
    name, workflow, status, count, version, created, updated, owner, expires = row
    return SessionInfo(
        name=name,
        workflow=workflow,
        status=status,
        messages=count,
        version=version,
        created_at=created,
        updated_at=updated,
        owner=owner,
        lease_expires_at=expires,
    )


class SqlStore(abc.ABC):
    """A :class:`~forge_rt.store.SessionStore` over one DB-API connection; subclasses say how
    to connect, how a write transaction starts, and which errors their driver raises."""

    _param = "?"  # the driver's placeholder
    _blob = "BLOB"
    _real = "REAL"

    def __init__(self, description: str) -> None:
        self._description = description
        self._limiter = trio.CapacityLimiter(1)
        self._conn: Any = None

    @property
    def description(self) -> str:
        return self._description

    # --- what a dialect supplies ---------------------------------------------------------------

    @abc.abstractmethod
    def _connect(self) -> Any:
        """A new DB-API connection in autocommit mode (transactions are explicit)."""

    @abc.abstractmethod
    def _transaction(self, conn: Any) -> AbstractContextManager[Any]:
        """A write transaction that holds the lock a commit's read-check-write needs."""

    @abc.abstractmethod
    def _driver_errors(self) -> tuple[type[Exception], ...]:
        """The driver's error classes, turned into StoreError at this boundary."""

    @abc.abstractmethod
    def _lock_schema(self, cur: Any) -> None:
        """Serialise migrations between processes opening the same database."""

    def _lock_session_sql(self) -> str:
        """What follows the commit's SELECT of a session row to lock it (a hook)."""
        return ""

    # --- the thread boundary -----------------------------------------------------------------

    async def _run(self, what: str, work: Callable[[Any], T]) -> T:
        if self._conn is None:
            raise StoreError(f"the store at {self._description} is closed", store=self._description)
        conn = self._conn

        def guarded() -> T:
            try:
                return work(conn)
            except self._driver_errors() as exc:
                raise StoreError(
                    f"the store at {self._description} failed to {what}: {exc}",
                    store=self._description,
                ) from exc

        return await trio.to_thread.run_sync(guarded, limiter=self._limiter)

    async def open(self) -> None:
        """Connect and bring the schema to :data:`SCHEMA_VERSION`."""

        def connect() -> Any:
            try:
                return self._connect()
            except self._driver_errors() as exc:
                raise StoreError(
                    f"cannot open the store at {self._description}: {exc}",
                    store=self._description,
                ) from exc

        self._conn = await trio.to_thread.run_sync(connect, limiter=self._limiter)
        try:
            found = await self._run("migrate its schema", self._migrate)
        except BaseException:
            await self.aclose()
            raise
        _log.debug("store.opened", store=self._description, schema=found)

    def _migrate(self, conn: Any) -> int:
        with self._transaction(conn) as cur:
            self._lock_schema(cur)
            version = self._schema_version(cur)
            if version > SCHEMA_VERSION:
                raise StoreSchemaError(
                    f"the store at {self._description} has schema version {version}, newer than "
                    f"this forge_rt's {SCHEMA_VERSION}: upgrade forge_rt to use it",
                    store=self._description,
                    found=version,
                    supported=SCHEMA_VERSION,
                )
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    cur.execute(statement.format(blob=self._blob, real=self._real))
                cur.execute(f"UPDATE forge_rt_schema SET version = {self._param}", (step + 1,))
            if version < SCHEMA_VERSION:
                _log.info(
                    "store.migrated", store=self._description, found=version, now=SCHEMA_VERSION
                )
            return version

    def _schema_version(self, cur: Any) -> int:
        cur.execute(self._tables_sql())
        tables = {row[0] for row in cur.fetchall()}
        if "forge_rt_schema" not in tables:
            if tables & {"forge_rt_sessions", "forge_rt_messages"}:
                raise StoreSchemaError(
                    f"the store at {self._description} has forge_rt tables but no schema "
                    "version: it was not written by forge_rt, or is damaged",
                    store=self._description,
                    found=None,
                    supported=SCHEMA_VERSION,
                )
            return 0
        cur.execute("SELECT version FROM forge_rt_schema")
        rows = cur.fetchall()
        if len(rows) != 1:
            raise StoreSchemaError(
                f"the store at {self._description} has {len(rows)} schema versions recorded",
                store=self._description,
                found=None,
                supported=SCHEMA_VERSION,
            )
        version: int = rows[0][0]
        return version

    @abc.abstractmethod
    def _tables_sql(self) -> str:
        """A query listing the names of the database's tables."""

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await trio.to_thread.run_sync(conn.close, limiter=self._limiter)

    async def __aenter__(self) -> SqlStore:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- the store's operations ----------------------------------------------------------------

    async def sessions(self) -> list[SessionInfo]:
        def work(conn: Any) -> list[SessionInfo]:
            cur = conn.cursor()
            cur.execute(f"SELECT {_INFO_COLUMNS} FROM {_INFO_FROM} ORDER BY updated_at DESC, name")
            return [_info(row) for row in cur.fetchall()]

        return await self._run("list its sessions", work)

    async def load(self, name: str) -> StoredSession | None:
        p = self._param

        def work(conn: Any) -> StoredSession | None:
            with self._transaction(conn) as cur:  # one snapshot of the row and its log
                cur.execute(
                    f"SELECT {_INFO_COLUMNS}, state FROM {_INFO_FROM} WHERE name = {p}",
                    (name,),
                )
                row = cur.fetchone()
                if row is None:
                    return None
                cur.execute(
                    f"SELECT body FROM forge_rt_messages WHERE session = {p} ORDER BY seq",
                    (name,),
                )
                bodies = [bytes(r[0]) for r in cur.fetchall()]
            info = _info(row[:-1])
            if len(bodies) != info.messages:
                raise StoreError(
                    f"session {name!r} in {self._description} lists {info.messages} messages "
                    f"but its log holds {len(bodies)}: the store is damaged",
                    store=self._description,
                )
            return StoredSession(
                info=info,
                messages=tuple(_decode_message(b) for b in bodies),
                state=bytes(row[-1]),
            )

        return await self._run(f"load session {name!r}", work)

    async def commit(
        self,
        name: str,
        *,
        workflow: str,
        messages: Sequence[Message],
        state: bytes,
        status: str,
        expect_version: int,
    ) -> int:
        p = self._param
        bodies = [_encode_message(m) for m in messages]
        now = time.time()

        def work(conn: Any) -> int:
            with self._transaction(conn) as cur:
                if expect_version == 0:
                    cur.execute(
                        "INSERT INTO forge_rt_sessions (name, workflow, status, version, "
                        "message_count, state, created_at, updated_at) "
                        f"VALUES ({p}, {p}, {p}, 0, 0, {p}, {p}, {p}) "
                        "ON CONFLICT (name) DO NOTHING",
                        (name, workflow, status, b"", now, now),
                    )
                cur.execute(
                    "SELECT version, message_count FROM forge_rt_sessions "
                    f"WHERE name = {p}{self._lock_session_sql()}",
                    (name,),
                )
                row = cur.fetchone()
                found = None if row is None else row[0]
                if found != expect_version:
                    raise SessionConflictError(
                        f"session {name!r} in {self._description} is at version {found}, not "
                        f"the {expect_version} this process loaded: another writer changed it; "
                        "start the session again to continue from what is stored",
                        store=self._description,
                        session=name,
                        expected=expect_version,
                        found=found,
                    )
                count = row[1]
                cur.executemany(
                    f"INSERT INTO forge_rt_messages (session, seq, body) VALUES ({p}, {p}, {p})",
                    [(name, count + i + 1, body) for i, body in enumerate(bodies)],
                )
                version = expect_version + 1
                cur.execute(
                    f"UPDATE forge_rt_sessions SET version = {p}, message_count = {p}, "
                    f"state = {p}, status = {p}, updated_at = {p} WHERE name = {p}",
                    (version, count + len(bodies), state, status, now, name),
                )
            return version

        return await self._run(f"commit session {name!r}", work)

    async def delete(self, name: str) -> bool:
        p = self._param

        def work(conn: Any) -> bool:
            with self._transaction(conn) as cur:
                cur.execute(f"DELETE FROM forge_rt_messages WHERE session = {p}", (name,))
                cur.execute(f"DELETE FROM forge_rt_leases WHERE session = {p}", (name,))
                cur.execute(f"DELETE FROM forge_rt_sessions WHERE name = {p}", (name,))
                deleted: bool = cur.rowcount > 0
            return deleted

        return await self._run(f"delete session {name!r}", work)

    async def claim(self, name: str, owner: str, *, now: float, until: float) -> Lease:
        p = self._param

        def work(conn: Any) -> Lease:
            with self._transaction(conn) as cur:
                cur.execute(
                    "INSERT INTO forge_rt_leases (session, owner, expires_at) "
                    f"VALUES ({p}, {p}, {p}) ON CONFLICT (session) DO UPDATE "
                    "SET owner = excluded.owner, expires_at = excluded.expires_at "
                    "WHERE forge_rt_leases.owner = excluded.owner "
                    f"OR forge_rt_leases.expires_at <= {p}",
                    (name, owner, until, now),
                )
                cur.execute(
                    f"SELECT owner, expires_at FROM forge_rt_leases WHERE session = {p}", (name,)
                )
                holder, expires = cur.fetchone()
            return Lease(session=name, owner=holder, expires_at=expires)

        return await self._run(f"claim session {name!r}", work)

    async def renew(self, names: Sequence[str], owner: str, *, until: float) -> set[str]:
        if not names:
            return set()
        p = self._param
        listed = ", ".join([p] * len(names))

        def work(conn: Any) -> set[str]:
            with self._transaction(conn) as cur:
                cur.execute(
                    f"UPDATE forge_rt_leases SET expires_at = {p} "
                    f"WHERE owner = {p} AND session IN ({listed})",
                    (until, owner, *names),
                )
                cur.execute(
                    "SELECT session FROM forge_rt_leases "
                    f"WHERE owner = {p} AND session IN ({listed})",
                    (owner, *names),
                )
                return {row[0] for row in cur.fetchall()}

        return await self._run(f"renew {len(names)} session leases", work)

    async def release(self, names: Sequence[str], owner: str) -> None:
        if not names:
            return
        p = self._param
        listed = ", ".join([p] * len(names))

        def work(conn: Any) -> None:
            with self._transaction(conn) as cur:
                cur.execute(
                    f"DELETE FROM forge_rt_leases WHERE owner = {p} AND session IN ({listed})",
                    (owner, *names),
                )

        await self._run(f"release {len(names)} session leases", work)
