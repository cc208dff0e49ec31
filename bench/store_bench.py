"""What a durable session costs per turn: the store's commits against the turn's inference.

Each turn is a lookup and an answer (two inferences, two tool results: about eight commits --
the user's message, each iteration, each reply, each tool result, the answer). Every store's
commits are timed inside the turn (``time.perf_counter`` around each ``commit``), so the figure is
the time the turn spent waiting on its store, measured in the same run as:

- the same turns on no store (the runtime's own cost per turn, the baseline), on an instant
  scripted model, for SQLite (``synchronous`` normal and full) and PostgreSQL (a throwaway server
  with fsync on, on loopback);
- with ``--local-turns N``: N turns on the embedded Qwen2.5-Coder-0.5B with each store,
  where the turn's time -- nearly all of it inference -- is what the store is weighed against.

::

    python bench/store_bench.py                       # scripted model, 200 turns per store
    python bench/store_bench.py --local-turns 5 --out docs/bench/store-2026-12-02.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from forge_rt.backends.local import DEFAULT_MODEL, LocalModelServer
from forge_rt.clients import LlamaServerClient
from forge_rt.core import (
    InferenceRequest,
    LLMClient,
    MessageType,
    ToolCall,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.errors import BudgetExhaustedError
from forge_rt.eval._metrics import percentile
from forge_rt.runtime import Session
from forge_rt.store import PostgresStore, SessionInfo, SessionStore, SqliteStore, StoredSession
from forge_rt.testing import ScriptedClient, throwaway_postgres

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def get_weather(city: str) -> str:
    return f"22C and sunny in {city}"


WORKFLOW = Workflow(
    name="weather",
    tools=[ToolDef(spec=ToolSpec(name="get_weather", parameters=CITY), callable=get_weather)],
    required_steps=["get_weather"],
    system_prompt_template="You answer weather questions. Call get_weather, then respond.",
)


def scripted(request: InferenceRequest) -> list[ToolCall]:
    if request.messages[-1].type is MessageType.USER_INPUT:
        return [ToolCall(tool="get_weather", args={"city": "Oslo"})]
    return [ToolCall(tool="respond", args={"message": "22C and sunny in Oslo."})]


class TimedStore:
    """A store whose commits are timed and counted (the bench's only instrument)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.seconds = 0.0
        self.commits = 0

    @property
    def description(self) -> str:
        return self.store.description

    async def sessions(self) -> list[SessionInfo]:
        return await self.store.sessions()

    async def load(self, name: str) -> StoredSession | None:
        return await self.store.load(name)

    async def commit(self, name: str, **kw: Any) -> int:
        started = time.perf_counter()
        version = await self.store.commit(name, **kw)
        self.seconds += time.perf_counter() - started
        self.commits += 1
        return version

    async def delete(self, name: str) -> bool:
        return await self.store.delete(name)

    async def aclose(self) -> None:
        await self.store.aclose()


async def turns(
    client: LLMClient, store: SessionStore | None, count: int, *, constrain: str = "never"
) -> dict[str, Any]:
    """``count`` turns, each in a new session; per-turn medians of wall time and store time.

    A turn the model fails (a budget ran out) is still a turn, its store time counted; its
    error is listed in ``failed_turns``."""
    timed = TimedStore(store) if store is not None else None
    walls: list[float] = []
    stored: list[float] = []
    commits: list[int] = []
    failed: list[str] = []
    workflow = WORKFLOW.model_copy(update={"constrain": constrain})
    async with Session.open(client, store=timed) as session:
        for i in range(count):
            before_s, before_n = (timed.seconds, timed.commits) if timed else (0.0, 0)
            started = time.perf_counter()
            handle = await session.start(workflow, name=f"bench-{i}-{time.time_ns()}")
            try:
                await handle.send("What is the weather in Oslo?")
            except BudgetExhaustedError as exc:  # a real model may fail the task: still a turn
                failed.append(type(exc).__name__)
            walls.append(time.perf_counter() - started)
            if timed is not None:
                stored.append(timed.seconds - before_s)
                commits.append(timed.commits - before_n)
            await session.system.stop(handle._ref, mode="cancel")
    figures: dict[str, Any] = {
        "turns": count,
        "turn_ms_median": 1000 * statistics.median(walls),
        "failed_turns": failed,
    }
    if timed is not None:
        figures["store_ms_median"] = 1000 * statistics.median(stored)
        figures["store_ms_p95"] = 1000 * percentile(stored, 95)
        figures["commits_per_turn"] = statistics.median(commits)
    return figures


async def scripted_phase(count: int, folder: Path, postgres_url: str) -> dict[str, Any]:
    client = ScriptedClient(scripted)
    figures: dict[str, Any] = {"none": await turns(client, None, count)}
    async with SqliteStore(folder / "normal.db") as sqlite:
        figures["sqlite_normal"] = await turns(client, sqlite, count)
    async with SqliteStore(folder / "full.db", synchronous="full") as sqlite_full:
        figures["sqlite_full"] = await turns(client, sqlite_full, count)
    async with PostgresStore(postgres_url) as postgres:
        figures["postgres"] = await turns(client, postgres, count)
    return figures


async def local_phase(count: int, folder: Path, postgres_url: str) -> dict[str, Any]:
    figures: dict[str, Any] = {"model": DEFAULT_MODEL}
    async with (
        LocalModelServer.start(DEFAULT_MODEL, n_ctx=4096) as server,
        LlamaServerClient(server.url) as client,
    ):
        stores: dict[str, SqliteStore | PostgresStore] = {
            "sqlite_normal": SqliteStore(folder / "local.db"),
            "postgres": PostgresStore(postgres_url),
        }
        for name, store in stores.items():
            async with store:
                row = await turns(client, store, count, constrain="auto")
            row["store_share_of_turn"] = row["store_ms_median"] / row["turn_ms_median"]
            figures[name] = row
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="scripted turns per store")
    parser.add_argument("--local-turns", type=int, default=0, help="turns on the embedded 0.5B")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, throwaway_postgres(fsync=True) as postgres_url:
        folder = Path(tmp)
        figures: dict[str, Any] = {
            "scripted": trio.run(scripted_phase, args.turns, folder, postgres_url)
        }
        if args.local_turns:
            figures["local"] = trio.run(local_phase, args.local_turns, folder, postgres_url)
    figures["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    base = figures["scripted"]["none"]["turn_ms_median"]
    for name in ("sqlite_normal", "sqlite_full", "postgres"):
        row = figures["scripted"][name]
        print(
            f"{name}: {row['store_ms_median']:.2f} ms of store per turn "
            f"({row['commits_per_turn']:.0f} commits; turn {row['turn_ms_median']:.2f} ms "
            f"vs {base:.2f} ms with no store)"
        )
    for name, local in figures.get("local", {}).items():
        if name == "model":
            continue
        print(
            f"embedded 0.5B, {name}: {local['store_ms_median']:.2f} ms of store per turn in a "
            f"{local['turn_ms_median'] / 1000:.1f} s turn, nearly all inference "
            f"({100 * local['store_share_of_turn']:.3f}%)"
        )


if __name__ == "__main__":
    main()
