"""Resuming after a cancellation that cut a tool batch short, per-turn guardrail state, and
tools that raise BaseExceptions: the run is never left in a state a resume cannot finish."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import trio

from forge_rt.core import Message, MessageType, ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ToolLoopError, WorkflowCancelledError
from forge_rt.runtime import Session, WorkflowRunner
from forge_rt.testing import ScriptedClient

ITEM = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}


class Shop:
    """A lookup (idempotent) and an order (not): the second one blocks until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.entered = trio.Event()
        self.release = trio.Event()
        self.block = True

    async def lookup(self, item: str) -> str:
        self.calls.append(("lookup", item))
        if self.block and item == "slow":
            self.entered.set()
            await self.release.wait()
        return f"{item}: in stock"

    async def order(self, item: str) -> str:
        self.calls.append(("order", item))
        if self.block:
            self.entered.set()
            await self.release.wait()
        return f"ordered {item}"

    def workflow(
        self, *, order_idempotent: bool = True, steps: tuple[str, ...] = ("lookup", "order")
    ) -> Workflow:
        return Workflow(
            name="shop",
            tools=[
                ToolDef(spec=ToolSpec(name="lookup", parameters=ITEM), callable=self.lookup),
                ToolDef(
                    spec=ToolSpec(name="order", parameters=ITEM),
                    callable=self.order,
                    idempotent=order_idempotent,
                ),
            ],
            required_steps=list(steps),
            system_prompt_template="You order things.",
            constrain="never",
        )


def calls(*pairs: tuple[str, str]) -> list[ToolCall]:
    return [ToolCall(tool=tool, args={"item": item}) for tool, item in pairs]


def respond(text: str) -> list[ToolCall]:
    return [ToolCall(tool="respond", args={"message": text})]


async def cancel_in_tool(session: Session, workflow: Workflow, shop: Shop) -> Any:
    """Start a turn, cancel it once a tool is blocked inside, return the handle and error."""
    handle = await session.start(workflow)
    async with trio.open_nursery() as nursery:

        async def cancel_when_inside() -> None:
            await shop.entered.wait()
            handle.cancel()

        nursery.start_soon(cancel_when_inside)
        with pytest.raises(WorkflowCancelledError) as info:
            await handle.send("Buy a lamp.")
    shop.block = False
    return handle, info.value


def unanswered_ids(messages: tuple[Message, ...]) -> set[str]:
    asked = {c.call_id for m in messages if not m.transient for c in m.tool_calls or ()}
    answered = {m.tool_call_id for m in messages if m.tool_call_id}
    return asked - answered


async def test_cancelled_mid_tool_resume_reruns_the_interrupted_call() -> None:
    """The cut call (idempotent) runs again on resume; the run then finishes normally."""
    shop = Shop()
    client = ScriptedClient(
        [calls(("lookup", "lamp")), calls(("order", "lamp")), respond("ordered the lamp")]
    )
    async with Session.open(client) as session:
        handle, error = await cancel_in_tool(session, shop.workflow(), shop)
        assert error.completed_steps == ("lookup",)
        assert len(unanswered_ids(error.messages)) == 1
        result = await handle.resume()
    assert result.output == "ordered the lamp"
    assert result.completed_steps == ("lookup", "order", "respond")
    assert shop.calls == [("lookup", "lamp"), ("order", "lamp"), ("order", "lamp")]
    assert unanswered_ids(result.messages) == set()
    assert len(client.calls) == 3  # no inference was spent on the interruption


async def test_a_batch_cut_short_keeps_what_finished_and_reruns_only_the_rest() -> None:
    """Two calls in one reply, cancelled in the second: the first's result is kept, not redone."""
    shop = Shop()
    client = ScriptedClient(
        [
            calls(("lookup", "lamp"), ("lookup", "slow")),
            calls(("order", "lamp")),
            respond("ok, lamp ordered"),
        ]
    )
    workflow = shop.workflow()
    async with Session.open(client) as session:
        handle, error = await cancel_in_tool(session, workflow, shop)
        results = [m for m in error.messages if m.type is MessageType.TOOL_RESULT]
        assert [m.content for m in results] == ["lamp: in stock"]
        result = await handle.resume()
    assert shop.calls == [
        ("lookup", "lamp"),
        ("lookup", "slow"),
        ("lookup", "slow"),
        ("order", "lamp"),
    ]
    assert result.output == "ok, lamp ordered"


async def test_a_non_idempotent_call_is_not_repeated_and_the_model_is_told() -> None:
    """``idempotent=False``: on resume the cut call is answered as interrupted, not run; the
    model sees that, and what it does next decides."""
    shop = Shop()
    seen: list[str] = []

    def reply(request: Any) -> list[ToolCall]:
        last = request.messages[-1]
        seen.append(last.content)
        if len(seen) == 1:
            return calls(("lookup", "lamp"))
        if len(seen) == 2:
            return calls(("order", "lamp"))
        return respond("I could not confirm the order; please check.")

    client = ScriptedClient(reply)
    async with Session.open(client) as session:
        workflow = shop.workflow(order_idempotent=False, steps=("lookup",))
        handle, _ = await cancel_in_tool(session, workflow, shop)
        result = await handle.resume()
    assert shop.calls == [("lookup", "lamp"), ("order", "lamp")]  # the order ran once
    assert seen[-1].startswith("[Interrupted] `order`")
    assert result.output.startswith("I could not confirm")
    assert result.stats.tool_errors == 1  # counted as a failed call, not as a spent budget


async def test_resume_in_a_new_runner_from_the_error_alone() -> None:
    """The error is all a resume needs: a fresh runner (a restarted process) finishes it."""
    shop = Shop()
    client = ScriptedClient(
        [calls(("lookup", "lamp")), calls(("order", "lamp")), respond("ok, lamp ordered")]
    )
    async with Session.open(client) as session:
        _, error = await cancel_in_tool(session, shop.workflow(), shop)
    restored = pickle.loads(pickle.dumps(error))
    assert isinstance(restored, WorkflowCancelledError)
    assert restored.messages == error.messages
    assert restored.iteration == error.iteration
    resumed = ScriptedClient([respond("lamp ordered after restart")])
    result = await WorkflowRunner(resumed).resume(restored, shop.workflow())
    assert result.output == "lamp ordered after restart"
    assert shop.calls[-1] == ("order", "lamp")


async def test_cancelled_fifty_times_mid_tool_every_resume_finishes() -> None:
    """Cancelled in a tool on each of 50 runs: every resume completes with all steps done."""
    finished = 0
    for _ in range(50):
        shop = Shop()
        client = ScriptedClient(
            [calls(("lookup", "lamp")), calls(("order", "lamp")), respond("ordered the lamp")]
        )
        async with Session.open(client) as session:
            handle, _ = await cancel_in_tool(session, shop.workflow(), shop)
            result = await handle.resume()
        finished += result.completed_steps == ("lookup", "order", "respond")
    assert finished == 50


async def test_the_same_answer_on_every_turn_is_not_a_loop() -> None:
    """A chat whose model answers several turns with the same call: each turn stands alone."""
    client = ScriptedClient([respond("Hello!")] * 5)
    workflow = Workflow(name="chat", tools=[], system_prompt_template="Chat.", constrain="never")
    async with Session.open(client) as session:
        handle = await session.start(workflow)
        outputs = [(await handle.send(f"hi {n}")).output for n in range(5)]
    assert outputs == ["Hello!"] * 5


async def test_the_loop_guard_still_counts_within_a_turn() -> None:
    """Per-turn state does not weaken the guard: the same call over and over in one turn
    still ends in ToolLoopError."""
    shop = Shop()
    shop.block = False
    client = ScriptedClient([calls(("lookup", "lamp"))] * 6)
    async with Session.open(client) as session:
        handle = await session.start(shop.workflow())
        with pytest.raises(ToolLoopError):
            await handle.send("Buy a lamp.")


async def test_a_tool_raising_system_exit_is_that_calls_error() -> None:
    """argparse inside a tool raises SystemExit: the model is told, the session lives on."""

    async def cli(item: str) -> str:
        raise SystemExit(2)

    workflow = Workflow(
        name="cli",
        tools=[ToolDef(spec=ToolSpec(name="cli", parameters=ITEM), callable=cli)],
        system_prompt_template="Run it.",
        constrain="never",
    )
    seen: list[str] = []

    def reply(request: Any) -> list[ToolCall]:
        seen.append(request.messages[-1].content)
        return calls(("cli", "x")) if len(seen) == 1 else respond("it failed")

    async with Session.open(ScriptedClient(reply)) as session:
        result = await session.run(workflow, "Go.")
        again = await session.run(workflow, "Again.")  # the session still serves
    assert result.output == "it failed"
    assert "SystemExit" in seen[1]
    assert again.output == "it failed"
