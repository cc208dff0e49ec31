"""Durable sessions: what a Session with a store commits, and how a restarted process carries on.

The crash test stops the store dead after each of a turn's commits in turn (the process "dies"
right after that commit returned: nothing later reaches the database), throws the whole session
away, and restarts on the same file: every run must end with the conversation whole -- the user's
message once, every call answered once, the answer -- and the order placed at most once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
import trio.lowlevel

from forge_rt.core import (
    InferenceRequest,
    Message,
    MessageType,
    Role,
    ToolCall,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.errors import ConfigurationError, SessionWorkflowMismatchError
from forge_rt.runtime import Session
from forge_rt.store import Lease, SessionInfo, SqliteStore, StoredSession
from forge_rt.testing import ScriptedClient
from forge_rt.trace import replay

ITEM = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}


class Shop:
    """``lookup`` (idempotent) and ``order`` (not), recording every call that really ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def lookup(self, item: str) -> str:
        self.calls.append(("lookup", item))
        await trio.lowlevel.checkpoint()
        return f"{item}: in stock"

    async def order(self, item: str) -> str:
        self.calls.append(("order", item))
        await trio.lowlevel.checkpoint()
        return f"ordered {item}"

    def workflow(self, name: str = "shop") -> Workflow:
        return Workflow(
            name=name,
            tools=[
                ToolDef(spec=ToolSpec(name="lookup", parameters=ITEM), callable=self.lookup),
                ToolDef(
                    spec=ToolSpec(name="order", parameters=ITEM),
                    callable=self.order,
                    idempotent=False,
                ),
            ],
            required_steps=["lookup"],  # an interrupted order is answered, and may be the end
            system_prompt_template="You order things.",
            constrain="never",
        )


def shop_model(request: InferenceRequest) -> list[ToolCall]:
    """A model that reads the history: look up, then order, then say so."""
    results = {
        m.tool_name: m.content for m in request.messages if m.type is MessageType.TOOL_RESULT
    }
    if "lookup" not in results:
        return [ToolCall(tool="lookup", args={"item": "lamp"})]
    if "order" not in results:
        return [ToolCall(tool="order", args={"item": "lamp"})]
    return [ToolCall(tool="respond", args={"message": f"done: {results['order']}"})]


class DyingStore:
    """A store that dies after ``limit`` commits: the next one never returns, nor reaches the
    database (``None``: never dies; ``commits`` counts them either way)."""

    def __init__(self, store: SqliteStore, limit: int | None) -> None:
        self.store = store
        self.limit = limit
        self.commits = 0
        self.died = trio.Event()

    @property
    def description(self) -> str:
        return self.store.description

    async def sessions(self) -> list[SessionInfo]:
        return await self.store.sessions()

    async def load(self, name: str) -> StoredSession | None:
        return await self.store.load(name)

    async def commit(self, name: str, **kw: Any) -> int:
        if self.limit is not None and self.commits >= self.limit:
            self.died.set()
            await trio.sleep_forever()
        self.commits += 1
        return await self.store.commit(name, **kw)

    async def delete(self, name: str) -> bool:
        return await self.store.delete(name)

    async def claim(self, name: str, owner: str, *, now: float, until: float) -> Lease:
        return await self.store.claim(name, owner, now=now, until=until)

    async def renew(self, names: Sequence[str], owner: str, *, until: float) -> set[str]:
        return await self.store.renew(names, owner, until=until)

    async def release(self, names: Sequence[str], owner: str) -> None:
        await self.store.release(names, owner)

    async def aclose(self) -> None:
        await self.store.aclose()


async def run_until_death(
    path: Path, shop: Shop, limit: int | None, *, trace: Path | None = None
) -> int:
    """Run one turn of a session on a store that dies after ``limit`` commits; the commits made."""
    async with SqliteStore(path) as sqlite:
        dying = DyingStore(sqlite, limit)
        async with trio.open_nursery() as nursery:

            async def turn() -> None:
                client = ScriptedClient(shop_model)
                async with Session.open(client, store=dying, trace=trace) as session:
                    handle = await session.start(shop.workflow(), name="alice")
                    await handle.send("Buy a lamp.")
                nursery.cancel_scope.cancel()

            async def die() -> None:
                await dying.died.wait()
                nursery.cancel_scope.cancel()  # the process is gone: every task stops

            nursery.start_soon(turn)
            nursery.start_soon(die)
        return dying.commits


async def restart(
    path: Path, shop: Shop, *, trace: Path | None = None
) -> tuple[str, tuple[Message, ...]]:
    """A new process on the same file: finish whatever the store says is unfinished."""
    client = ScriptedClient(shop_model)
    async with Session.open(client, store=path, trace=trace) as session:
        handle = await session.start(shop.workflow(), name="alice")
        if handle.stored is None:  # the message was never accepted: the user sends it again
            result = await handle.send("Buy a lamp.")
            return result.output, result.messages
        if handle.interrupted:
            result = await handle.resume()
            return result.output, result.messages
        history = await handle.history()
        return history[-1].content, history


def assert_whole(messages: Sequence[Message]) -> None:
    users = [m.content for m in messages if m.role is Role.USER]
    assert users == ["Buy a lamp."]
    asked = [c.call_id for m in messages if not m.transient for c in m.tool_calls or ()]
    answered = [m.tool_call_id for m in messages if m.tool_call_id]
    assert sorted(asked) == sorted(answered)  # every call answered, exactly once
    assert len(asked) == len(set(asked))


async def test_a_turn_survives_dying_after_any_of_its_commits(tmp_path: Path) -> None:
    reference = Shop()
    total = await run_until_death(tmp_path / "reference.db", reference, None)
    assert total >= 8  # the turn's message, iterations, tool results, replies, its end
    assert reference.calls == [("lookup", "lamp"), ("order", "lamp")]
    interrupted = 0
    for limit in range(total):
        shop = Shop()
        path = tmp_path / f"died-after-{limit}.db"
        traces = tmp_path / f"traces-{limit}"
        await run_until_death(path, shop, limit, trace=traces)
        before = list(shop.calls)
        output, messages = await restart(path, shop, trace=traces)
        assert_whole(messages)
        # Both lives wrote the trace, and it replays as decided whatever the point of death:
        # a result that finished before it is recorded by the second life, and traced there.
        report = replay(traces)
        assert report.differences == [], f"died after commit {limit}"
        # The order is placed exactly once, whenever the process died.
        assert shop.calls.count(("order", "lamp")) == 1, f"died after commit {limit}"
        if output != "done: ordered lamp":
            # Died after the order ran, before its result was stored: the model is told it may
            # have happened, and it is not placed again.
            assert output.startswith("done: [Interrupted] `order`"), f"died after {limit}"
            assert ("order", "lamp") in before
        interrupted += output != "done: ordered lamp"
    assert interrupted == 1  # exactly one commit point falls inside the order's run


async def test_a_finished_session_comes_back_with_its_history_and_steps(tmp_path: Path) -> None:
    shop = Shop()
    path = tmp_path / "s.db"
    async with Session.open(ScriptedClient(shop_model), store=path) as session:
        handle = await session.start(shop.workflow(), name="alice")
        first = await handle.send("Buy a lamp.")
    seen: list[InferenceRequest] = []

    def model(request: InferenceRequest) -> list[ToolCall]:
        seen.append(request)
        return [ToolCall(tool="respond", args={"message": "you bought a lamp"})]

    async with Session.open(ScriptedClient(model), store=path) as session:
        [info] = await session.sessions()
        assert (info.name, info.workflow, info.status) == ("alice", "shop", "idle")
        assert info.owner is None  # the first session gave its lease up when it closed
        handle = await session.start(shop.workflow(), name="alice")
        assert handle.stored is not None
        assert handle.stored.owner is not None  # loaded once this session held it
        assert msgspec.structs.replace(handle.stored, owner=None, lease_expires_at=None) == info
        assert not handle.interrupted
        assert await handle.history() == first.messages
        second = await handle.send("What did I buy?")
    assert second.output == "you bought a lamp"
    assert second.completed_steps[:2] == ("lookup", "order")  # the steps were kept
    assert seen[0].messages[: len(first.messages)] == first.messages
    assert shop.calls == [("lookup", "lamp"), ("order", "lamp")]


async def test_a_stored_session_needs_its_own_workflow(tmp_path: Path) -> None:
    shop = Shop()
    path = tmp_path / "s.db"
    async with Session.open(ScriptedClient(shop_model), store=path) as session:
        await (await session.start(shop.workflow(), name="alice")).send("Buy a lamp.")
        with pytest.raises(SessionWorkflowMismatchError) as info:
            await session.start(shop.workflow("other"), name="alice")
    assert (info.value.stored, info.value.requested) == ("shop", "other")


async def test_sessions_and_forget_need_a_store() -> None:
    async with Session.open(ScriptedClient([])) as session:
        with pytest.raises(ConfigurationError, match="store="):
            await session.sessions()


async def test_forgotten_sessions_start_afresh(tmp_path: Path) -> None:
    shop = Shop()
    path = tmp_path / "s.db"
    async with Session.open(ScriptedClient(shop_model), store=path) as session:
        handle = await session.start(shop.workflow(), name="alice")
        await handle.send("Buy a lamp.")
        await session.system.stop(handle._ref, mode="cancel")
        assert await session.forget("alice") is True
        again = await session.start(shop.workflow(), name="alice")
        assert again.stored is None
        assert await session.sessions() == []
