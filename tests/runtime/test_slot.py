"""SlotWorker: scheduling order, preemption, deadlines, queue limit, cancellation, stats."""

from collections.abc import AsyncIterator

import msgspec
import pytest
import trio
import trio.testing

from actors import ActorSystem
from forge_rt.core import (
    FinalChunk,
    InferenceRequest,
    Message,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
)
from forge_rt.errors import InferenceDeadlineError, SlotQueueFullError
from forge_rt.runtime import SlotWorker
from forge_rt.testing import ScriptedClient

REPLIES = {
    "low": "one two three four five six seven eight nine ten",
    "high": "urgent answer",
    "a": "alpha",
    "b": "bravo",
    "c": "charlie",
    "d": "delta",
}


def _reply(request: InferenceRequest) -> str:
    return REPLIES[request.messages[-1].content]


def _request(text: str, history: tuple[Message, ...] = ()) -> InferenceRequest:
    return InferenceRequest(messages=(*history, Message.user(text)))


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    async with ActorSystem.open() as system:
        yield system


async def _run(slot: SlotWorker, text: str, order: list[str], **kw: object) -> str:
    response = await slot.infer(_request(text), **kw)  # type: ignore[arg-type]
    order.append(text)
    assert isinstance(response.result, TextResponse)
    return response.result.content


async def test_single_call_streams_then_returns(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A call streams its text deltas to on_chunk and returns the assembled response."""
    slot = await SlotWorker.start(system, ScriptedClient(_reply, token_s=0.1))
    seen: list[StreamChunk] = []

    async def sink(chunk: StreamChunk) -> None:
        seen.append(chunk)

    response = await slot.infer(_request("a"), on_chunk=sink)
    assert response.result == TextResponse(content="alpha")
    assert [type(c) for c in seen] == [TextDeltaChunk, FinalChunk]


async def test_a_whole_call_is_one_reply_and_a_preempted_one_is_sent_again(
    system: ActorSystem, autojump_clock: object
) -> None:
    """``whole=True`` hands the caller only the final reply; preempted, it is simply re-sent."""
    client = ScriptedClient(_reply, prefill_s=1.0, token_s=0.1)
    slot = await SlotWorker.start(system, client)
    seen: list[StreamChunk] = []

    async def sink(chunk: StreamChunk) -> None:
        seen.append(chunk)

    results: dict[str, str] = {}

    async def run(text: str, priority: int, whole: bool) -> None:
        on_chunk = sink if whole else None
        response = await slot.infer(
            _request(text), priority=priority, whole=whole, on_chunk=on_chunk
        )
        assert isinstance(response.result, TextResponse)
        results[text] = response.result.content

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "low", 10, True)
        await trio.sleep(1.5)  # the whole call is generating
        nursery.start_soon(run, "high", 0, False)
    assert results == {"low": REPLIES["low"], "high": REPLIES["high"]}
    assert [type(c) for c in seen] == [FinalChunk]  # no deltas, and no reset to take back
    assert [c.outcome for c in client.calls] == ["cancelled", "completed", "completed"]
    assert (await slot.stats()).preemptions == 1


async def test_priority_then_fifo_order(system: ActorSystem, autojump_clock: object) -> None:
    """Queued calls run by priority (lower first), FIFO within a priority."""
    client = ScriptedClient(_reply, prefill_s=1.0)
    slot = await SlotWorker.start(system, client, max_wait_s=None)
    order: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run, slot, "low", order)  # occupies the slot first
        await trio.testing.wait_all_tasks_blocked()
        for text, priority in (("a", 5), ("b", 1), ("c", 5), ("d", 1)):
            nursery.start_soon(lambda t=text, p=priority: _run(slot, t, order, priority=p))
            await trio.testing.wait_all_tasks_blocked()
    assert order == ["low", "b", "d", "a", "c"]


async def test_cache_affinity_breaks_priority_ties(
    system: ActorSystem, autojump_clock: object
) -> None:
    """Of two equal-priority calls, the one continuing the slot's cached prompt goes first."""
    client = ScriptedClient(_reply, prefill_s=1.0)
    slot = await SlotWorker.start(system, client, max_wait_s=None)
    first = _request("a")
    await slot.infer(first)
    order: list[str] = []

    async def run(request: InferenceRequest, label: str) -> None:
        await slot.infer(request)
        order.append(label)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run, slot, "c", order)  # busy while the two below queue
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(run, _request("b"), "stranger")
        await trio.testing.wait_all_tasks_blocked()
        continuing = _request("d", history=first.messages)
        nursery.start_soon(run, continuing, "continues-a")
    # "c" evicted "a"'s prompt, so neither is warm: plain age decides.
    assert order == ["c", "stranger", "continues-a"]
    order.clear()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, _request("b"), "warmup-b")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(run, _request("c"), "stranger")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(run, _request("d", history=_request("b").messages), "continues-b")
    assert order == ["warmup-b", "continues-b", "stranger"]
    assert (await slot.stats()).cache_hits >= 1


async def test_an_overdue_call_overtakes_fresher_urgent_ones(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A low-priority call that waited past max_wait_s goes ahead of fresher high-priority calls."""
    client = ScriptedClient(_reply, prefill_s=10.0)
    slot = await SlotWorker.start(system, client, max_wait_s=5.0, policy="never")
    order: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run, slot, "a", order)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: _run(slot, "low", order, priority=3))
        await trio.sleep(9)  # "low" is overdue (t=5) by the time "a" ends at t=10
        nursery.start_soon(lambda: _run(slot, "b", order, priority=2))
    assert order == ["a", "low", "b"]


async def test_preemption_continues_with_prefill(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A higher-priority arrival preempts mid-generation; the low call resumes from its partial text."""
    client = ScriptedClient(_reply, token_s=1.0)
    slot = await SlotWorker.start(system, client)
    results: dict[str, str] = {}
    low_chunks: list[StreamChunk] = []

    async def low() -> None:
        async def sink(chunk: StreamChunk) -> None:
            low_chunks.append(chunk)

        response = await slot.infer(_request("low"), priority=10, on_chunk=sink)
        assert isinstance(response.result, TextResponse)
        results["low"] = response.result.content

    async def high() -> None:
        await trio.sleep(3.5)
        started = trio.current_time()
        response = await slot.infer(_request("high"), priority=0)
        assert isinstance(response.result, TextResponse)
        results["high"] = response.result.content
        results["high_wait"] = f"{client.calls[1].started_at - started:.3f}"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(low)
        nursery.start_soon(high)
    assert results["low"] == REPLIES["low"]
    assert results["high"] == REPLIES["high"]
    assert results["high_wait"] == "0.000"
    assert [c.outcome for c in client.calls] == ["cancelled", "completed", "completed"]
    assert client.calls[2].request.assistant_prefill == "one two three "
    assert not any(isinstance(c, ResetChunk) for c in low_chunks)
    streamed = "".join(c.text for c in low_chunks if isinstance(c, TextDeltaChunk))
    assert streamed == REPLIES["low"]
    assert (await slot.stats()).preemptions == 1


CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"const": "get_weather"},
        "arguments": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        },
    },
    "required": ["name", "arguments"],
}


async def test_a_constrained_call_continues_under_the_rest_of_its_constraint(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A preempted call under a JSON schema resumes from its partial text, held to a grammar for
    what may follow it: the caller sees one unbroken call, nothing taken back or redone."""
    from forge_rt.core import GrammarConstraint, JsonSchemaConstraint
    from forge_rt.guardrails import Gbnf

    client = ScriptedClient(
        lambda r: CALL if r.messages[-1].content == "low" else "ok", token_s=1.0
    )
    slot = await SlotWorker.start(system, client)
    constrained = msgspec.structs.replace(
        _request("low"), constraint=JsonSchemaConstraint(schema=WEATHER_SCHEMA)
    )
    low_chunks: list[StreamChunk] = []

    async def sink(chunk: StreamChunk) -> None:
        low_chunks.append(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(constrained, priority=10, on_chunk=sink))
        await trio.sleep(3.5)
        nursery.start_soon(lambda: slot.infer(_request("high"), priority=0))
    resumed = client.calls[2].request
    assert resumed.assistant_prefill == '{"name": "get_weather", "arguments": '
    assert isinstance(resumed.constraint, GrammarConstraint)
    rest = Gbnf(resumed.constraint.gbnf)
    assert rest.accepts(CALL[len(resumed.assistant_prefill) :])
    assert not rest.accepts(CALL)  # a whole call again would not fit after the prefix
    assert not any(isinstance(c, ResetChunk) for c in low_chunks)
    final = low_chunks[-1]
    assert isinstance(final, FinalChunk)
    assert final.response.raw_text == CALL
    stats = await slot.stats()
    assert (stats.continued, stats.restarted, stats.tokens_redecoded) == (1, 0, 0)


async def test_a_constrained_call_its_constraint_cannot_continue_restarts(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A partial reply that no continuation of the constraint can begin with (here: prose under
    a JSON schema) is re-run whole, and the caller is told to discard what it saw."""
    from forge_rt.core import JsonSchemaConstraint

    client = ScriptedClient(_reply, token_s=1.0)
    slot = await SlotWorker.start(system, client)
    constrained = msgspec.structs.replace(
        _request("low"), constraint=JsonSchemaConstraint(schema={"type": "object"})
    )
    low_chunks: list[StreamChunk] = []

    async def sink(chunk: StreamChunk) -> None:
        low_chunks.append(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(constrained, priority=10, on_chunk=sink))
        await trio.sleep(3.5)
        nursery.start_soon(lambda: slot.infer(_request("high"), priority=0))
    assert [c.request.assistant_prefill for c in client.calls] == [None, None, None]
    resets = [c for c in low_chunks if isinstance(c, ResetChunk)]
    assert len(resets) == 1
    assert "not a beginning" in resets[0].reason
    stats = await slot.stats()
    assert (stats.continued, stats.restarted, stats.tokens_redecoded) == (0, 1, 3)


async def test_preemption_restarts_without_prefill(
    system: ActorSystem, autojump_clock: object
) -> None:
    """Without prefill support the preempted call restarts and its caller gets a ResetChunk."""
    client = ScriptedClient(_reply, token_s=1.0, prefill_support=False)
    slot = await SlotWorker.start(system, client)
    low_chunks: list[StreamChunk] = []

    async def sink(chunk: StreamChunk) -> None:
        low_chunks.append(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("low"), priority=10, on_chunk=sink))
        await trio.sleep(2.5)
        nursery.start_soon(lambda: slot.infer(_request("high"), priority=0))
    resets = [i for i, c in enumerate(low_chunks) if isinstance(c, ResetChunk)]
    assert len(resets) == 1
    after = "".join(c.text for c in low_chunks[resets[0] :] if isinstance(c, TextDeltaChunk))
    assert after == REPLIES["low"]
    assert client.calls[2].request.assistant_prefill is None


@pytest.mark.parametrize(
    ("policy", "arrival", "preempted"),
    [
        ("never", 0.5, False),
        ("before_first_token", 0.5, True),  # still in prefill
        ("before_first_token", 3.5, False),  # already generating
        ("always", 3.5, True),
    ],
)
async def test_preemption_policies(
    system: ActorSystem, autojump_clock: object, policy: str, arrival: float, preempted: bool
) -> None:
    """Each policy preempts exactly when it says it does."""
    client = ScriptedClient(_reply, prefill_s=1.0, token_s=1.0)
    slot = await SlotWorker.start(system, client, policy=policy)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("low"), priority=10))
        await trio.sleep(arrival)
        nursery.start_soon(lambda: slot.infer(_request("high"), priority=0))
    assert ((await slot.stats()).preemptions == 1) is preempted


@pytest.mark.parametrize(
    ("prefill", "priority", "preemptions", "restarted"),
    [
        (False, 5, 1, 1),  # a restart wastes work: after one, the call is left to finish
        (False, 0, 2, 2),  # an urgent call never waits for it, cap or not
        (True, 5, 2, 0),  # continued preemptions lose nothing and are not counted
    ],
)
async def test_preemption_cap_counts_restarts_and_never_holds_an_urgent_call(
    system: ActorSystem,
    autojump_clock: object,
    prefill: bool,
    priority: int,
    preemptions: int,
    restarted: int,
) -> None:
    """max_preemptions bounds the restarts of one call, for arrivals less urgent than
    urgent_priority (0 by default)."""
    client = ScriptedClient(_reply, token_s=1.0, prefill_support=prefill)
    slot = await SlotWorker.start(system, client, max_preemptions=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("low"), priority=10))
        for at in (1.5, 5.5):
            await trio.sleep_until(at)
            nursery.start_soon(lambda: slot.infer(_request("high"), priority=priority))
    stats = await slot.stats()
    assert (stats.preemptions, stats.restarted) == (preemptions, restarted)
    assert stats.continued == preemptions - restarted


async def test_queue_limit(system: ActorSystem, autojump_clock: object) -> None:
    """A full queue rejects with SlotQueueFullError naming the limit."""
    slot = await SlotWorker.start(system, ScriptedClient(_reply, prefill_s=5), max_queue=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("a")))  # running
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: slot.infer(_request("b")))  # queued
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(SlotQueueFullError) as info:
            await slot.infer(_request("c"))
        assert info.value.limit == 1
    assert (await slot.stats()).rejected == 1


async def test_deadline_while_queued_and_running(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A missed deadline raises InferenceDeadlineError; a running attempt is cancelled."""
    client = ScriptedClient(_reply, prefill_s=10)
    slot = await SlotWorker.start(system, client)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("a")))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(InferenceDeadlineError) as queued:
            await slot.infer(_request("b"), deadline=2)
    assert queued.value.started is False
    with pytest.raises(InferenceDeadlineError) as running:
        await slot.infer(_request("c"), deadline=2)
    assert running.value.started is True
    await trio.testing.wait_all_tasks_blocked()
    assert [c.outcome for c in client.calls] == ["completed", "cancelled"]


async def test_caller_cancellation_frees_the_slot(
    system: ActorSystem, autojump_clock: object
) -> None:
    """Cancelling the caller cancels its in-flight call, and the next call runs at once."""
    client = ScriptedClient(_reply, prefill_s=10)
    slot = await SlotWorker.start(system, client)
    with trio.move_on_after(3):
        await slot.infer(_request("a"))
    before = trio.current_time()
    await slot.infer(_request("b"))
    assert client.calls[0].outcome == "cancelled"
    assert client.calls[1].started_at == before
    stats = await slot.stats()
    assert (stats.completed, stats.abandoned) == (1, 1)


async def test_stats_waits_and_busy_fraction(system: ActorSystem, autojump_clock: object) -> None:
    """Stats report waits per priority and the busy fraction of the slot's lifetime."""
    slot = await SlotWorker.start(system, ScriptedClient(_reply, prefill_s=2), max_wait_s=None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(_request("a"), priority=1))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: slot.infer(_request("b"), priority=4))
    await trio.sleep(4)
    stats = await slot.stats()
    assert stats.waits[1].max_s == 0
    assert stats.waits[4].max_s == 2
    assert stats.busy_fraction == pytest.approx(0.5)


async def test_slot_pool_pins_workflows_to_slots(
    system: ActorSystem, autojump_clock: object
) -> None:
    """A pool spreads new keys over slots, keeps a key on its slot, and sends the slot id."""
    from forge_rt.runtime import SlotPool

    client = ScriptedClient(_reply, prefill_s=1)
    pool = await SlotPool.start(system, client, 2)
    async with trio.open_nursery() as nursery:
        for key, text in (("w1", "a"), ("w2", "b"), ("w1", "c")):
            nursery.start_soon(lambda k=key, t=text: pool.infer(_request(t), key=k))
            await trio.testing.wait_all_tasks_blocked()
    by_text = {c.request.messages[-1].content: c.request.slot_id for c in client.calls}
    assert by_text == {"a": 0, "b": 1, "c": 0}
    assert pool.slot_for("w3") is pool.slots[0]


def test_an_outcome_for_a_caller_that_left_is_dropped() -> None:
    """Completing or failing a job whose caller closed its channel marks it abandoned, no error."""
    from forge_rt.runtime import InferenceJob

    async def main() -> None:
        for deliver in ("fail", "complete"):
            job = InferenceJob(_request("a"), priority=0)
            await job.receive.aclose()  # the caller is gone
            if deliver == "fail":
                job.fail(RuntimeError("backend exploded"))
            else:
                from forge_rt.core import LLMResponse

                job.complete(LLMResponse(result=TextResponse(content="late")))
            assert (job.finished, job.abandoned) == (True, True)

    trio.run(main)


async def test_a_session_on_a_slot_runs_a_whole_workflow_turn_on_it(
    system: ActorSystem, autojump_clock: object
) -> None:
    """``Session.on_slot(slot).run`` runs a workflow turn through that slot and returns its
    result."""
    from forge_rt.core import ToolCall, Workflow
    from forge_rt.runtime import Session

    respond = ToolCall(tool="respond", args={"message": "hello"}, call_id="r1")
    client = ScriptedClient([[respond]])
    slot = await SlotWorker.start(system, client)
    workflow = Workflow(
        name="greet", description="Greet.", tools={}, system_prompt_template="Greet."
    )
    result = await Session.on_slot(slot).run(workflow, "hi", priority=3)
    assert result.output == "hello"
    assert (await slot.stats()).completed == 1
