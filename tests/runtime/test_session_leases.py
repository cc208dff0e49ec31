"""Several processes on one store: each session is run by the one holding its lease.

Two ``Session`` objects on one SQLite file stand for two processes (their leases carry different
owners). A process that died holding a lease is a claim made straight on the store by an owner
that never renews it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from forge_rt.core import InferenceRequest, MessageType, ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ConfigurationError, SessionLeasedError, SessionWorkflowMismatchError
from forge_rt.runtime import Session, SessionLease
from forge_rt.store import SqliteStore
from forge_rt.testing import ScriptedClient

TITLE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


class WallClock:
    """Seconds since the epoch as the test says: every process on the store reads this one."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Library:
    """``borrow`` changes the world (not idempotent); it can be made to hang mid-call."""

    def __init__(self, *, hang: bool = False) -> None:
        self.borrowed: list[str] = []
        self.hang = hang
        self.entered = trio.Event()

    async def borrow(self, title: str) -> str:
        self.borrowed.append(title)
        self.entered.set()
        if self.hang:
            await trio.sleep_forever()
        return f"borrowed {title}"

    def workflow(self) -> Workflow:
        return Workflow(
            name="library",
            tools=[
                ToolDef(
                    spec=ToolSpec(name="borrow", parameters=TITLE),
                    callable=self.borrow,
                    idempotent=False,
                )
            ],
            system_prompt_template="You borrow books.",
            constrain="never",
        )


def reader(request: InferenceRequest) -> list[ToolCall]:
    done = [m.content for m in request.messages if m.type is MessageType.TOOL_RESULT]
    if not done:
        return [ToolCall(tool="borrow", args={"title": "Moby Dick"})]
    return [ToolCall(tool="respond", args={"message": f"done: {done[-1]}"})]


def lease(owner: str, clock: WallClock, ttl_s: float = 60.0) -> SessionLease:
    return SessionLease(owner=owner, ttl_s=ttl_s, clock=clock)


async def test_a_session_another_process_runs_is_refused_until_that_one_closes(
    tmp_path: Path,
) -> None:
    path, clock = tmp_path / "s.db", WallClock()
    client = ScriptedClient(reader)
    async with Session.open(client, store=path, lease=lease("north", clock)) as north:
        await north.start(Library().workflow(), name="ines")
        async with Session.open(client, store=path, lease=lease("south", clock)) as south:
            with pytest.raises(SessionLeasedError) as refused:
                await south.start(Library().workflow(), name="ines")
            assert (refused.value.owner, refused.value.expires_in) == ("north", 60.0)
            clock.now += 59.0  # one second before the claim would lapse unrenewed
            with pytest.raises(SessionLeasedError):
                await south.start(Library().workflow(), name="ines")
    async with Session.open(client, store=path, lease=lease("south", clock)) as south:
        handle = await south.start(Library().workflow(), name="ines")  # north gave it up
        assert (await handle.send("Borrow a book.")).output == "done: borrowed Moby Dick"


async def test_a_dead_processs_turn_is_taken_over_once_its_lease_expires(tmp_path: Path) -> None:
    path, clock = tmp_path / "s.db", WallClock()
    first = Library(hang=True)
    async with Session.open(ScriptedClient(reader), store=path, lease=lease("a", clock)) as one:
        handle = await one.start(first.workflow(), name="ines")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle.send, "Borrow a book.")
            await first.entered.wait()
            nursery.cancel_scope.cancel()  # the process stops mid-call
    async with SqliteStore(path) as store:  # ... and, as if killed, held the lease to the end
        await store.claim("ines", "a-killed", now=clock.now, until=clock.now + 60.0)

    second = Library()
    async with Session.open(ScriptedClient(reader), store=path, lease=lease("b", clock)) as two:
        assert await two.orphaned() == []  # its holder's lease is still live
        clock.now += 60.0
        [orphan] = await two.orphaned()
        assert (orphan.name, orphan.status, orphan.owner) == ("ines", "in_turn", "a-killed")
        taken = await two.start(second.workflow(), name="ines")
        assert taken.interrupted
        assert await two.orphaned() == []  # run here now
        result = await taken.resume()
    # The order that had started is not placed again: the model is told it may have happened.
    assert first.borrowed == ["Moby Dick"]
    assert second.borrowed == []
    assert result.output.startswith("done: [Interrupted] `borrow`")


async def test_a_restarted_process_takes_its_own_sessions_back_at_once(tmp_path: Path) -> None:
    path, clock = tmp_path / "s.db", WallClock()
    async with SqliteStore(path) as store:
        await store.commit(
            "ines", workflow="library", messages=[], state=b"", status="in_turn", expect_version=0
        )
        await store.claim("ines", "replica-1", now=clock.now, until=clock.now + 60.0)
    client = ScriptedClient(reader)
    async with Session.open(client, store=path, lease=lease("replica-2", clock)) as other:
        assert await other.orphaned() == []
    async with Session.open(client, store=path, lease=lease("replica-1", clock)) as again:
        assert [i.name for i in await again.orphaned()] == ["ines"]
        await again.start(Library().workflow(), name="ines")


class RenewalsSeen:
    """The SQLite store, telling the test of each renewal as it lands."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.renewed = trio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def renew(self, names: Sequence[str], owner: str, *, until: float) -> set[str]:
        kept = await self.store.renew(names, owner, until=until)
        self.renewed.set()
        self.renewed = trio.Event()
        return kept


async def test_a_live_process_keeps_its_lease_by_renewing_it(tmp_path: Path) -> None:
    clock = WallClock()
    async with SqliteStore(tmp_path / "s.db") as sqlite:
        store = RenewalsSeen(sqlite)
        north_lease = SessionLease(owner="north", ttl_s=60.0, renew_every_s=0.01, clock=clock)
        async with Session.open(ScriptedClient(reader), store=store, lease=north_lease) as north:
            await north.start(Library().workflow(), name="ines")
            for _ in range(3):  # two minutes pass, a claim lasts one: the renewals carry it
                clock.now += 40.0
                with trio.fail_after(30):
                    await store.renewed.wait()
            taken = await sqlite.claim("ines", "south", now=clock.now, until=clock.now + 60.0)
            assert taken.owner == "north"
            assert taken.expires_at > clock.now


async def test_a_start_that_fails_holds_no_lease(tmp_path: Path) -> None:
    path, clock = tmp_path / "s.db", WallClock()
    async with SqliteStore(path) as store:
        await store.commit(
            "ines", workflow="garden", messages=[], state=b"", status="idle", expect_version=0
        )
    client = ScriptedClient(reader)
    async with Session.open(client, store=path, lease=lease("north", clock)) as north:
        with pytest.raises(SessionWorkflowMismatchError):
            await north.start(Library().workflow(), name="ines")  # a library, not a garden
        async with SqliteStore(path) as store:
            taken = await store.claim("ines", "south", now=clock.now, until=clock.now + 60.0)
        assert taken.owner == "south"


def test_a_lease_needs_a_store_and_a_positive_ttl() -> None:
    with pytest.raises(ConfigurationError, match="ttl_s"):
        SessionLease(ttl_s=0)
    with pytest.raises(ConfigurationError, match="owner"):
        SessionLease(owner="")
    with pytest.raises(ConfigurationError, match="renew_every_s"):
        SessionLease(ttl_s=10, renew_every_s=10)

    async def without_store() -> None:
        async with Session.open(ScriptedClient(reader), lease=SessionLease()):
            pass

    with pytest.raises(ConfigurationError, match="store"):
        trio.run(without_store)
