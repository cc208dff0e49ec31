"""A chat daemon that survives ``kill -9``: sessions in a store, turns resumed after a restart.

It reads one JSON command per line on stdin and writes one JSON event per line on stdout::

    python examples/chat_daemon.py --backend http://127.0.0.1:8080 --store chat.db
    {"op": "say", "session": "alice", "text": "Remind me to water the plants in 10 minutes."}
    {"op": "say", "session": "alice", "text": "Turn off the heating."}
    {"op": "approve", "session": "alice", "call_id": "call_...", "yes": false, "reason": "not now"}
    {"op": "history", "session": "alice"}
    {"op": "quit"}

Events: ``ready`` (the stored sessions, at start), ``accepted`` (the user's message is committed:
from here on a crash loses nothing of it), ``message`` (each message of the turn, as it is
committed), ``approval`` (a call waits for a yes or no: answer with ``approve``; a restarted
daemon asks again), ``resumed`` (a turn a killed daemon left open is being finished), ``reply`` (the
turn's answer), ``history``, ``error``. ``--traces DIR`` writes each session's run trace
(``forge-rt trace show DIR/alice.jsonl``, ``forge-rt replay``). ``--store`` is an SQLite file (the
default, ``chat.db``) or a ``postgresql://`` URL; the backend is any OpenAI-compatible server
(``forge-rt sim`` for a try without a model, ``forge-rt model serve``-style llama.cpp servers,
vLLM, Ollama).

Several daemons may share one store (on PostgreSQL, on several machines): each session is run by
the daemon holding its lease. ``--owner NAME`` names this daemon in the store (a restarted daemon
with the same name takes its sessions back at once); ``--lease S`` is how long its claim lasts
unrenewed. Every ``S / 2`` seconds a daemon looks for turns whose daemon died (its lease
expired) and finishes them (``resumed``); a session another live daemon runs is an ``error``
(``SessionLeasedError``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

import structlog
import trio

from forge_rt.clients import make_client
from forge_rt.core import Message, Role, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ForgeError, SessionLeasedError
from forge_rt.guardrails import Allow, Approve, Deny, Policy
from forge_rt.runtime import ApprovalRequest, Session, SessionLease, WorkflowHandle

REMINDER = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "what to remind the user of"},
        "minutes": {"type": "integer", "minimum": 1, "description": "in how many minutes"},
    },
    "required": ["text", "minutes"],
}


def emit(event: str, **fields: Any) -> None:
    """One event, one line, flushed: the reader sees it the moment it is written."""
    print(json.dumps({"event": event, **fields}), flush=True)


def _shown(message: Message) -> dict[str, Any]:
    calls = [{"tool": c.tool, "args": c.args} for c in message.tool_calls or ()]
    return {"role": message.role.value, "content": message.content, "tool_calls": calls}


HEATING = {
    "type": "object",
    "properties": {"on": {"type": "boolean", "description": "true to turn it on"}},
    "required": ["on"],
}

# The heating is the user's to switch: every call waits for their yes (a voice assistant asks).
POLICY = Policy(tools={"set_heating": Approve("Switch the heating?")})


class Assistant:
    """The daemon's workflow: a reminder tool and a heating switch (both change the world, so
    neither may run twice; the switch also needs the user's approval)."""

    def __init__(self) -> None:
        self.reminders: list[tuple[str, int]] = []
        self.heating = True

    async def set_reminder(self, text: str, minutes: int) -> str:
        self.reminders.append((text, minutes))
        return f"reminder set: {text!r} in {minutes} min"

    async def set_heating(self, on: bool) -> str:
        self.heating = on
        return f"the heating is {'on' if on else 'off'}"

    def workflow(self) -> Workflow:
        return Workflow(
            name="assistant",
            tools=[
                ToolDef(
                    spec=ToolSpec(
                        name="set_reminder",
                        description="Set a reminder for the user.",
                        parameters=REMINDER,
                    ),
                    callable=self.set_reminder,
                    idempotent=False,
                    needs=["writes_state"],
                ),
                ToolDef(
                    spec=ToolSpec(
                        name="set_heating",
                        description="Turn the heating on or off.",
                        parameters=HEATING,
                    ),
                    callable=self.set_heating,
                    idempotent=False,
                    needs=["writes_state"],
                ),
            ],
            system_prompt_template=(
                "You are a home assistant. Set reminders when asked; otherwise answer briefly."
            ),
        )


class UserApprovals:
    """The approval callback: each call to approve is told as an ``approval`` event, and waits
    for the ``approve`` command that answers it. A call still waiting when the daemon is killed
    is asked again after the restart (its turn resumes at that call)."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[trio.Event, list[Allow | Deny]]] = {}

    async def ask(self, request: ApprovalRequest) -> Allow | Deny:
        answered, answer = self._waiting[request.call_id] = (trio.Event(), [])
        emit(
            "approval",
            session=request.actor,
            call_id=request.call_id,
            tool=request.tool,
            args=request.args,
            question=request.question,
        )
        try:
            await answered.wait()
        finally:
            del self._waiting[request.call_id]
        return answer[0]

    def answer(self, call_id: str, yes: bool, reason: str) -> None:
        if call_id not in self._waiting:
            emit("error", error="NotWaiting", message=f"no call {call_id!r} waits for approval")
            return
        if not yes and not reason:
            emit("error", error="NoReason", message="a no needs a reason: the model is told it")
            return
        answered, answer = self._waiting[call_id]
        answer.append(Allow() if yes else Deny(reason))
        answered.set()


class Daemon:
    def __init__(self, session: Session, workflow: Workflow) -> None:
        self._session = session
        self._workflow = workflow
        self._handles: dict[str, WorkflowHandle] = {}
        self._busy: dict[str, trio.Lock] = {}
        self._starting = trio.Lock()  # one start at a time: a session is never started twice

    async def handle(self, name: str) -> WorkflowHandle:
        async with self._starting:
            if name not in self._handles:
                self._handles[name] = await self._session.start(self._workflow, name=name)
                self._busy[name] = trio.Lock()
        return self._handles[name]

    async def take_over(self, nursery: trio.Nursery) -> None:
        """Finish the turns a killed daemon left open -- this one in an earlier life, or another
        whose lease expired -- each in its own task."""
        for info in await self._session.orphaned():
            if info.workflow != self._workflow.name or info.name in self._handles:
                continue
            try:
                handle = await self.handle(info.name)
            except SessionLeasedError:
                continue  # another daemon took it over first
            nursery.start_soon(self._turn, handle, None)

    async def keep_taking_over(self, nursery: trio.Nursery, every_s: float) -> None:
        while True:
            await trio.sleep(every_s)
            await self.take_over(nursery)

    async def say(self, name: str, text: str) -> None:
        try:
            handle = await self.handle(name)
        except SessionLeasedError as exc:
            emit("error", session=name, error=type(exc).__name__, message=str(exc))
            return
        await self._turn(handle, text)

    async def _turn(self, handle: WorkflowHandle, text: str | None) -> None:
        name = handle.name

        async def committed(message: Message) -> None:
            if message.role is Role.USER:
                emit("accepted", session=name, text=message.content)
            else:
                emit("message", session=name, **_shown(message))

        async with self._busy[name]:
            try:
                if text is None:
                    emit("resumed", session=name)
                    result = await handle.resume(on_message=committed)
                else:
                    result = await handle.send(text, on_message=committed)
            except ForgeError as exc:
                emit("error", session=name, error=type(exc).__name__, message=str(exc))
                return
        emit("reply", session=name, text=result.output)

    async def history(self, name: str) -> None:
        handle = await self.handle(name)
        emit("history", session=name, messages=[_shown(m) for m in await handle.history()])


async def serve(backend: str, store: str, traces: str | None, lease: SessionLease) -> None:
    client = make_client("openai", backend)
    approvals = UserApprovals()
    async with (
        client,
        Session.open(
            client,
            store=store,
            lease=lease,
            trace=traces,
            policy=POLICY,
            on_approval=approvals.ask,
        ) as session,
    ):
        daemon = Daemon(session, Assistant().workflow())
        emit(
            "ready",
            sessions=[{"name": s.name, "status": s.status} for s in await session.sessions()],
        )
        async with trio.open_nursery() as nursery:
            await daemon.take_over(nursery)
            nursery.start_soon(daemon.keep_taking_over, nursery, lease.ttl_s / 2)
            async for line in trio.wrap_file(sys.stdin):
                if not line.strip():
                    continue
                command = json.loads(line)
                if command["op"] == "quit":
                    break
                if command["op"] == "say":
                    nursery.start_soon(daemon.say, command["session"], command["text"])
                elif command["op"] == "approve":
                    approvals.answer(command["call_id"], command["yes"], command.get("reason", ""))
                elif command["op"] == "history":
                    await daemon.history(command["session"])
                else:
                    emit("error", error="UnknownCommand", message=f"unknown op {command['op']!r}")
            nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", required=True, help="an OpenAI-compatible server's base URL")
    parser.add_argument("--store", default="chat.db", help="SQLite file or postgresql:// URL")
    parser.add_argument("--traces", default=None, help="a folder for one JSONL trace per session")
    parser.add_argument("--owner", default=None, help="this daemon's name in a shared store")
    parser.add_argument("--lease", type=float, default=30.0, help="seconds a claim lasts unrenewed")
    args = parser.parse_args()
    lease = SessionLease(ttl_s=args.lease, **({"owner": args.owner} if args.owner else {}))
    # An application configures logging: warnings only, to stderr (stdout carries the events).
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )
    trio.run(serve, args.backend, args.store, args.traces, lease)


if __name__ == "__main__":
    main()
