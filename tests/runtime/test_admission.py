"""Priority-aware admission and the starvation bound of a SlotWorker.

A full queue sheds its least urgent, youngest call for a more urgent arrival; a call that has
waited ``max_wait_s`` runs next, whatever keeps arriving; an urgent arrival still preempts it.
All on trio's MockClock: the "load" is a feeder that keeps the queue full.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from actors import ActorSystem
from forge_rt.core import InferenceRequest, Message
from forge_rt.errors import SlotEvictedError, SlotQueueFullError
from forge_rt.runtime import SlotWorker
from forge_rt.testing import ScriptedClient

CALL_S = 2.0  # every call takes this long on the scripted backend


def _request(text: str) -> InferenceRequest:
    return InferenceRequest(messages=(Message.user(text),))


def _client() -> ScriptedClient:
    return ScriptedClient(lambda request: "ok", prefill_s=CALL_S)


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    async with ActorSystem.open() as system:
        yield system


async def _keep_busy(slot: SlotWorker, priority: int, depth: int, until: float) -> None:
    """Continuous load: ``depth`` callers at ``priority``, each resubmitting until ``until``."""

    async def caller() -> None:
        while trio.current_time() < until:
            await slot.infer(_request("load"), priority=priority)

    async with trio.open_nursery() as nursery:
        for _ in range(depth):
            nursery.start_soon(caller)


async def _done_after(slot: SlotWorker, priority: int, max_wait_s: float | None) -> float | None:
    """How long a ``priority`` call submitted under continuous priority-0 load took to finish,
    or None if it did not within 10 x the bound."""
    horizon = 10 * (max_wait_s or 30.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_keep_busy, slot, 0, 3, horizon)
        await trio.testing.wait_all_tasks_blocked()
        submitted = trio.current_time()
        done: float | None = None
        with trio.move_on_after(horizon):
            await slot.infer(_request("probe"), priority=priority)
            done = trio.current_time() - submitted
        nursery.cancel_scope.cancel()
    return done


@pytest.mark.parametrize("priority", [10, 20])
async def test_a_call_waits_at_most_the_bound_under_continuous_higher_load(
    system: ActorSystem, autojump_clock: object, priority: int
) -> None:
    """Priority 10 and 20 under a queue kept full of priority-0 (urgent) calls: each is done
    within max_wait_s plus three calls -- the one running when it fell due, the one urgent
    call that may cut it, its own."""
    slot = await SlotWorker.start(system, _client(), max_wait_s=20.0)
    took = await _done_after(slot, priority, 20.0)
    assert took is not None
    assert 20.0 < took <= 20.0 + 3 * CALL_S


async def test_without_a_bound_the_same_call_starves(
    system: ActorSystem, autojump_clock: object
) -> None:
    """The control: strict priority (``max_wait_s=None``) never runs it under that load."""
    slot = await SlotWorker.start(system, _client(), max_wait_s=None)
    assert await _done_after(slot, 10, None) is None


async def test_an_urgent_arrival_preempts_an_overdue_call_and_a_normal_one_does_not(
    system: ActorSystem, autojump_clock: object
) -> None:
    """The bound does not make voice wait: an urgent arrival cuts an overdue call; a merely
    more urgent one (priority 5 over an overdue 10) does not."""
    client = ScriptedClient(lambda request: "ok", prefill_s=10.0)
    slot = await SlotWorker.start(system, client, max_wait_s=5.0, urgent_priority=0)
    order: list[str] = []

    async def run(text: str, priority: int) -> None:
        await slot.infer(_request(text), priority=priority)
        order.append(text)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "first", 5)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(run, "overdue", 10)
        await trio.sleep(11)  # "first" done at t=10; "overdue" (waited 10 s) is running
        nursery.start_soon(run, "normal", 5)
        await trio.sleep(1)
        nursery.start_soon(run, "voice", 0)
    assert order == ["first", "voice", "overdue", "normal"]
    assert (await slot.stats()).preemptions == 1


async def test_a_full_queue_evicts_the_least_urgent_youngest_call(
    system: ActorSystem, autojump_clock: object
) -> None:
    """max_queue=3 full of priority-20 calls: a priority-0 arrival is admitted and the
    youngest priority-20 call gets a typed, retry-safe SlotEvictedError."""
    slot = await SlotWorker.start(system, _client(), max_queue=3)
    outcomes: dict[str, str] = {}

    async def run(text: str, priority: int) -> None:
        try:
            await slot.infer(_request(text), priority=priority)
        except SlotQueueFullError as exc:  # an eviction is caught as "try later" too
            kind = "evicted" if isinstance(exc, SlotEvictedError) else "refused"
            outcomes[text] = f"{kind} by {getattr(exc, 'by_priority', None)}"
        else:
            outcomes[text] = "done"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "running", 20)
        await trio.testing.wait_all_tasks_blocked()
        for name in ("old", "middle", "young"):
            nursery.start_soon(run, name, 20)
            await trio.sleep(0.1)
        nursery.start_soon(run, "urgent", 0)
    assert outcomes == {
        "running": "done",
        "old": "done",
        "middle": "done",
        "young": "evicted by 0",
        "urgent": "done",
    }
    stats = await slot.stats()
    assert (stats.evicted, stats.rejected) == (1, 0)


async def test_a_priority_0_call_is_never_refused_while_lower_work_is_queued(
    system: ActorSystem, autojump_clock: object
) -> None:
    """100 priority-0 calls against a queue kept full of priority-20 work: none is refused."""
    slot = await SlotWorker.start(system, _client(), max_queue=8)
    refused = evicted = 0

    async def background() -> None:
        nonlocal evicted
        while True:
            try:
                await slot.infer(_request("bg"), priority=20)
            except SlotEvictedError:
                evicted += 1
                await trio.sleep(0.5)
            except SlotQueueFullError:
                await trio.sleep(0.5)  # full of its own kind: try again later, as told

    async def foreground() -> None:
        nonlocal refused
        try:
            await slot.infer(_request("fg"), priority=0)
        except SlotQueueFullError:
            refused += 1

    async with trio.open_nursery() as outer:
        for _ in range(16):
            outer.start_soon(background)
        await trio.sleep(1)
        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(foreground)
                await trio.sleep(CALL_S * 1.5)  # slower than the slot serves them
        outer.cancel_scope.cancel()
    assert refused == 0
    assert evicted > 0  # the foreground really met a full queue


async def test_an_arrival_no_more_urgent_than_the_queue_is_the_one_refused(
    system: ActorSystem, autojump_clock: object
) -> None:
    """Nothing waiting is less urgent: the arrival gets SlotQueueFullError, nobody is evicted."""
    slot = await SlotWorker.start(system, _client(), max_queue=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("running"), priority=5))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: slot.infer(_request("a"), priority=5))
        nursery.start_soon(lambda: slot.infer(_request("b"), priority=0))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(SlotQueueFullError) as info:
            await slot.infer(_request("late"), priority=5)
        assert not isinstance(info.value, SlotEvictedError)
    stats = await slot.stats()
    assert (stats.evicted, stats.rejected) == (0, 1)


async def test_workflows_on_a_tiny_queue_wait_for_room_instead_of_failing_mid_turn(
    autojump_clock: object,
) -> None:
    """30 workflows at mixed priorities, max_queue=2: calls refused or evicted are submitted
    again after a backoff, so every turn completes -- none fails after its first tool ran."""
    from runtime_support import Tools

    from forge_rt.core import ToolCall
    from forge_rt.runtime import Session

    def reply(request: InferenceRequest) -> list[ToolCall]:
        last = request.messages[-1]
        if last.type.value == "user_input":
            return [ToolCall(tool="get_weather", args={"city": last.content})]
        return [ToolCall(tool="respond", args={"message": last.content})]

    tools = Tools()
    outputs: list[str] = []
    async with Session.open(ScriptedClient(reply, prefill_s=1.0), max_queue=2) as session:

        async def one(n: int) -> None:
            result = await session.run(tools.workflow(), f"City{n}", priority=(n % 3) * 10)
            outputs.append(result.output)

        with trio.fail_after(10_000):
            async with trio.open_nursery() as nursery:
                for n in range(30):
                    nursery.start_soon(one, n)
        stats = await session.slot.stats()
    assert sorted(outputs) == sorted(f"22C and sunny in City{n}" for n in range(30))
    assert stats.rejected + stats.evicted > 0  # the queue really was full
