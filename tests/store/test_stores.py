"""Both session stores, on real databases: an SQLite file, and a throwaway PostgreSQL server.

Every commit lands whole or not at all, versions refuse interleaved writers, the schema is
versioned, and what goes in comes out the same."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from forge_rt.core import Message, ToolCall
from forge_rt.errors import SessionConflictError, StoreError, StoreSchemaError
from forge_rt.store import SCHEMA_VERSION, PostgresStore, SessionStore, SqliteStore, store_for


@pytest.fixture(params=["sqlite", "postgres"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "sessions.db")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def store(store_location: str) -> AsyncIterator[SessionStore]:
    async with store_for(store_location) as opened:
        for info in await opened.sessions():  # the PostgreSQL server is shared by the session
            await opened.delete(info.name)
        yield opened


def history() -> list[Message]:
    call = ToolCall(tool="get_weather", args={"city": "Zürich", "days": [1, 2]}, call_id="c1")
    return [
        Message.system("You answer weather questions."),
        Message.user("Weather in Zürich?"),
        Message.assistant_calls([call]),
        Message.tool_result(call, "22C"),
    ]


async def test_a_commit_comes_back_as_it_went_in(store: SessionStore) -> None:
    messages = history()
    version = await store.commit(
        "alice",
        workflow="weather",
        messages=messages,
        state=b'{"x":1}',
        status="in_turn",
        expect_version=0,
    )
    assert version == 1
    stored = await store.load("alice")
    assert stored is not None
    assert stored.messages == tuple(messages)
    assert stored.state == b'{"x":1}'
    assert (stored.info.workflow, stored.info.status, stored.info.messages) == (
        "weather",
        "in_turn",
        4,
    )
    assert stored.info.version == 1


async def test_commits_append_in_order_and_replace_the_state(store: SessionStore) -> None:
    first, second = history()[:2], history()[2:]
    v1 = await store.commit(
        "s", workflow="w", messages=first, state=b"1", status="in_turn", expect_version=0
    )
    v2 = await store.commit(
        "s", workflow="w", messages=[], state=b"2", status="in_turn", expect_version=v1
    )
    v3 = await store.commit(
        "s", workflow="w", messages=second, state=b"3", status="idle", expect_version=v2
    )
    stored = await store.load("s")
    assert stored is not None
    assert stored.messages == tuple(first + second)
    assert (stored.state, stored.info.status, stored.info.version) == (b"3", "idle", v3)


async def test_a_stale_writer_is_refused_and_writes_nothing(store: SessionStore) -> None:
    """Two processes on one session: the one that loaded an older version cannot commit."""
    await store.commit(
        "s", workflow="w", messages=history()[:1], state=b"a", status="idle", expect_version=0
    )
    await store.commit(
        "s", workflow="w", messages=history()[1:2], state=b"b", status="idle", expect_version=1
    )
    with pytest.raises(SessionConflictError) as info:
        await store.commit(
            "s", workflow="w", messages=history()[2:], state=b"c", status="idle", expect_version=1
        )
    assert (info.value.session, info.value.expected, info.value.found) == ("s", 1, 2)
    with pytest.raises(SessionConflictError):  # creating a session that exists
        await store.commit(
            "s", workflow="w", messages=[], state=b"d", status="idle", expect_version=0
        )
    stored = await store.load("s")
    assert stored is not None
    assert (len(stored.messages), stored.state) == (2, b"b")


async def test_a_second_connection_sees_what_the_first_committed(store_location: str) -> None:
    async with store_for(store_location) as one, store_for(store_location) as two:
        await one.delete("shared")
        await one.commit(
            "shared", workflow="w", messages=history(), state=b"s", status="idle", expect_version=0
        )
        stored = await two.load("shared")
        assert stored is not None
        assert stored.messages == tuple(history())
        with pytest.raises(SessionConflictError):
            await two.commit(
                "shared", workflow="w", messages=[], state=b"t", status="idle", expect_version=0
            )
        await two.delete("shared")


async def test_sessions_are_listed_newest_first_and_can_be_forgotten(store: SessionStore) -> None:
    for name in ("a", "b", "c"):
        await store.commit(
            name, workflow="w", messages=history()[:1], state=b"", status="idle", expect_version=0
        )
    await store.commit(
        "a", workflow="w", messages=[], state=b"", status="in_turn", expect_version=1
    )
    listed = await store.sessions()
    assert listed[0].name == "a"
    assert {s.name: s.status for s in listed} == {"a": "in_turn", "b": "idle", "c": "idle"}
    assert await store.delete("b") is True
    assert await store.delete("b") is False
    assert await store.load("b") is None
    assert {s.name for s in await store.sessions()} == {"a", "c"}


async def test_a_lease_is_one_owners_until_it_expires(store: SessionStore) -> None:
    taken = await store.claim("alice", "north", now=100.0, until=130.0)
    assert (taken.owner, taken.expires_at) == ("north", 130.0)
    # Another owner is shown the live holder and gets nothing; the holder may claim again.
    assert (await store.claim("alice", "south", now=110.0, until=140.0)).owner == "north"
    assert (await store.claim("alice", "north", now=120.0, until=150.0)).expires_at == 150.0
    assert await store.renew(["alice", "bob"], "north", until=160.0) == {"alice"}
    assert (await store.claim("alice", "south", now=159.0, until=190.0)).owner == "north"
    # Not renewed past its expiry: the next claimer takes it, and the old owner's renewal fails.
    after = await store.claim("alice", "south", now=160.0, until=190.0)
    assert (after.owner, after.expires_at) == ("south", 190.0)
    assert await store.renew(["alice"], "north", until=200.0) == set()
    await store.release(["alice"], "north")  # not north's: nothing changes
    assert (await store.claim("alice", "north", now=170.0, until=200.0)).owner == "south"
    await store.release(["alice"], "south")
    assert (await store.claim("alice", "north", now=171.0, until=201.0)).owner == "north"
    await store.release(["alice"], "north")


async def test_the_listing_shows_each_sessions_lease(store: SessionStore) -> None:
    for name in ("held", "free"):
        await store.commit(
            name, workflow="w", messages=[], state=b"", status="in_turn", expect_version=0
        )
    await store.claim("held", "east", now=10.0, until=40.0)
    listed = {info.name: info for info in await store.sessions()}
    assert (listed["held"].owner, listed["held"].lease_expires_at) == ("east", 40.0)
    assert (listed["held"].held_by(39.0), listed["held"].held_by(40.0)) == ("east", None)
    assert listed["free"].owner is None
    assert listed["free"].held_by(0.0) is None
    loaded = await store.load("held")
    assert loaded is not None
    assert loaded.info == listed["held"]
    # Forgetting a session forgets its lease: a new session of that name starts free.
    assert await store.delete("held") is True
    assert (await store.claim("held", "west", now=11.0, until=41.0)).owner == "west"
    await store.release(["held"], "west")


async def test_a_store_of_the_first_schema_gains_leases_and_keeps_its_sessions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # a store as forge_rt wrote it before leases
        conn.executescript(
            """
            CREATE TABLE forge_rt_schema (version INTEGER NOT NULL);
            INSERT INTO forge_rt_schema (version) VALUES (1);
            CREATE TABLE forge_rt_sessions (name TEXT PRIMARY KEY, workflow TEXT NOT NULL,
                status TEXT NOT NULL, version INTEGER NOT NULL, message_count INTEGER NOT NULL,
                state BLOB NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL);
            CREATE TABLE forge_rt_messages (session TEXT NOT NULL, seq INTEGER NOT NULL,
                body BLOB NOT NULL, PRIMARY KEY (session, seq));
            INSERT INTO forge_rt_sessions VALUES ('kept', 'w', 'idle', 3, 0, x'', 1.0, 2.0);
            """
        )
    async with SqliteStore(path) as store:
        [info] = await store.sessions()
        assert (info.name, info.version, info.owner) == ("kept", 3, None)
        assert (await store.claim("kept", "me", now=5.0, until=9.0)).owner == "me"
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM forge_rt_schema").fetchall() == [(SCHEMA_VERSION,)]


async def test_a_closed_store_says_so(store_location: str) -> None:
    opened = store_for(store_location)
    async with opened:
        pass
    with pytest.raises(StoreError, match="closed"):
        await opened.sessions()


async def test_a_store_from_a_newer_forge_rt_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with SqliteStore(path):
        pass
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE forge_rt_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreSchemaError) as info:
        async with SqliteStore(path):
            pass
    assert (info.value.found, info.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)


async def test_tables_without_a_schema_version_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE forge_rt_sessions (name TEXT)")
    with pytest.raises(StoreSchemaError, match="no schema version"):
        async with SqliteStore(path):
            pass


async def test_a_fresh_store_is_at_the_current_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    async with SqliteStore(path):
        pass
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM forge_rt_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"junk\.db"):
        async with SqliteStore(path):
            pass


async def test_an_unreachable_postgres_is_a_store_error_without_the_password() -> None:
    with pytest.raises(StoreError) as info:
        async with PostgresStore("postgresql://u:secret@127.0.0.1:1/db", connect_timeout_s=2):
            pass
    assert "secret" not in str(info.value)
    assert "***" in info.value.store


def test_a_store_location_is_a_path_or_a_postgres_url() -> None:
    assert isinstance(store_for("x.db"), SqliteStore)
    with pytest.raises(ValueError, match="mysql://"):
        store_for("mysql://host/db")
