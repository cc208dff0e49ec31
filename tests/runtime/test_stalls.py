"""A hung or trickling backend: the SlotWorker gives up on the call in time and moves on.

On the sim over HTTP in virtual time (its faults wait on trio's clock): ``HANG`` answers
nothing, ``SLOW_DRIP`` writes the reply one byte at a time, ``STALL_IN_PREFILL`` starts on the
prompt and stops. ``prefill_tps`` with ``return_progress`` streams llama-server's reports on the
prompt, batch by batch.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from actors import ActorSystem
from forge_rt.backends.sim import Fault, SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient, OpenAICompatClient
from forge_rt.core import InferenceRequest, Message, PromptProgressChunk, Sampling, TextResponse
from forge_rt.errors import (
    BackendFailureError,
    ConfigurationError,
    InferenceDeadlineError,
    InferenceStalledError,
)
from forge_rt.runtime import SlotWorker, StallLimits

LIMITS = StallLimits(first_token_s=5.0, prefill_floor_tps=1e9, between_chunks_s=5.0)


def _request(text: str) -> InferenceRequest:
    return InferenceRequest(messages=(Message.user(text),))


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    async with ActorSystem.open() as system:
        yield system


async def test_a_hung_call_fails_typed_and_the_call_behind_it_runs(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(script={"*": ["the answer"]})  # a hung request consumes no reply
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        sim.inject(Fault.HANG)
        slot = await SlotWorker.start(system, client, stall=LIMITS)
        outcome: dict[str, object] = {}

        async def hung() -> None:
            with pytest.raises(InferenceStalledError) as info:
                await slot.infer(_request("first"))
            outcome["error"] = info.value
            outcome["failed_at"] = trio.current_time()

        async def behind() -> None:
            await trio.sleep(0.1)
            response = await slot.infer(_request("second"))
            assert isinstance(response.result, TextResponse)
            outcome["answer"] = response.result.content
            outcome["answered_at"] = trio.current_time()

        start = trio.current_time()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hung)
                nursery.start_soon(behind)
    error = outcome["error"]
    assert isinstance(error, InferenceStalledError)
    assert isinstance(error, BackendFailureError)
    assert (error.phase, error.tokens, error.retry_safe) == ("first_token", 0, True)
    assert outcome["answer"] == "the answer"
    # The call behind the hung one waited the stall limit, not the client's read timeout.
    assert float(outcome["answered_at"]) - start < LIMITS.first_token_s + 2.0  # type: ignore[arg-type]


async def test_a_trickling_reply_is_a_stall_between_chunks(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """One byte a second keeps the connection alive but brings no chunk in five seconds."""
    words = " ".join(f"w{i}" for i in range(40))
    config = SimConfig(script={"*": [words]}, slow_drip_interval_s=1.0)
    limits = StallLimits(first_token_s=None, between_chunks_s=5.0)
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        sim.inject(Fault.SLOW_DRIP)
        slot = await SlotWorker.start(system, client, stall=limits)
        # Virtual time: the reports on the prompt drip too, a few hundred bytes before the reply.
        with trio.fail_after(3600), pytest.raises(InferenceStalledError) as info:
            await slot.infer(_request("first"))
    assert info.value.phase == "between_chunks"


@pytest.mark.parametrize("fault", [Fault.HANG, Fault.SLOW_DRIP])
async def test_a_call_fetched_whole_is_watched_too(
    system: ActorSystem, autojump_clock: trio.testing.MockClock, fault: Fault
) -> None:
    """A whole call (the proxy's non-streaming requests) streams nothing to watch between: it
    fails typed at its whole-call limit -- first token plus max_tokens at the decode floor --
    and the call behind it runs."""
    words = " ".join(f"w{i}" for i in range(40))
    config = SimConfig(script={"*": [words, "behind"]}, slow_drip_interval_s=1.0)
    limits = StallLimits(first_token_s=5.0, prefill_floor_tps=1e9, decode_floor_tps=1.0)
    request = InferenceRequest(messages=(Message.user("first"),), sampling=Sampling(max_tokens=20))
    assert limits.whole_call_limit(request) == pytest.approx(25.0)
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        sim.inject(fault)
        slot = await SlotWorker.start(system, client, stall=limits)
        start = trio.current_time()
        with trio.fail_after(600):
            with pytest.raises(InferenceStalledError) as info:
                await slot.infer(request, whole=True)
            failed_after = trio.current_time() - start
            behind = await slot.infer(_request("second"), whole=True)
    assert (info.value.phase, info.value.retry_safe) == ("whole_call", True)
    assert 25.0 <= failed_after < 26.0
    assert isinstance(behind.result, TextResponse)


async def test_the_first_token_limit_grows_with_the_prompt() -> None:
    limits = StallLimits(first_token_s=10.0, prefill_floor_tps=100.0)
    short = limits.first_token_limit(_request("hi"))
    long = limits.first_token_limit(_request("x" * 40_000))
    assert short < 11.0
    assert long > 10.0 + 40_000 / 4 / 100.0 - 1


async def test_limits_off_leave_the_call_to_its_deadline(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    config = SimConfig(script={"*": ["never sent"]})
    off = StallLimits(first_token_s=None, between_chunks_s=None)
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        sim.inject(Fault.HANG)
        slot = await SlotWorker.start(system, client, stall=off)
        with trio.fail_after(600), pytest.raises(InferenceDeadlineError):
            await slot.infer(_request("first"), deadline=100.0)


async def test_a_backend_restart_is_ridden_out_and_the_queued_calls_complete(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """Three calls queued while the backend is down for 2 s: all answered once it is back."""
    config = SimConfig(script={"*": ["zero", "one", "two", "three"]})
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        slot = await SlotWorker.start(system, client)
        await slot.infer(
            _request("before")
        )  # the backend has been reached: it is worth waiting for
        back = trio.Event()
        answers: list[str] = []

        async def call(text: str) -> None:
            response = await slot.infer(_request(text))
            assert isinstance(response.result, TextResponse)
            answers.append(response.result.content)

        async def outage() -> None:
            await sim.restart(downtime=2.0)
            back.set()

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outage)
                await trio.testing.wait_all_tasks_blocked()
                for text in ("a", "b", "c"):
                    nursery.start_soon(call, text)
    assert back.is_set()
    assert sim.stats.restarts == 1
    assert sorted(answers) == ["one", "three", "two"]


async def test_three_short_outages_lose_none_of_a_hundred_workflows(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """100 workflows on one slot while the backend restarts three times (0.3 s down each):
    every one completes with its answer, with the Session's default settings."""
    from runtime_support import Tools

    from forge_rt.runtime import Session

    config = SimConfig(decode_tps=50.0)
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        tools = Tools()
        done: list[str] = []
        async with Session.open(client) as session:
            await session.slot.infer(_request("warm"))  # reached once: worth riding out

            async def workflow(n: int) -> None:
                result = await session.run(tools.workflow(), f"Weather in City{n}?")
                done.append(result.output)

            async def outages() -> None:
                for _ in range(3):
                    await trio.sleep(1.0)
                    await sim.restart(downtime=0.3)

            with trio.fail_after(3600):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(outages)
                    for n in range(100):
                        nursery.start_soon(workflow, n)
    assert sim.stats.restarts == 3
    assert len(done) == 100


@pytest.mark.parametrize("retry", ["off", "never reached"])
async def test_a_refused_connection_is_the_callers_at_once_without_retry_or_before_any_answer(
    system: ActorSystem, autojump_clock: trio.testing.MockClock, retry: str
) -> None:
    """retry=None fails at once; so does a backend never reached (a wrong URL is no restart)."""
    from forge_rt.errors import BackendError, FaultKind

    config = SimConfig(script={"*": ["one", "two"]})
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        slot = await SlotWorker.start(system, client, **({"retry": None} if retry == "off" else {}))
        if retry == "off":
            await slot.infer(_request("before"))
        down = trio.Event()

        async def outage() -> None:
            await sim.restart(downtime=5.0, until=down)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(outage)
            await trio.testing.wait_all_tasks_blocked()
            started = trio.current_time()
            with pytest.raises(BackendError) as info:
                await slot.infer(_request("a"))
            assert trio.current_time() - started < 1.0
            down.set()
    assert info.value.kind is FaultKind.CONNECT_REFUSED


async def test_a_500_is_not_retried(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    from forge_rt.errors import BackendError

    config = SimConfig(script={"*": ["one"]})
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        sim.inject(Fault.HTTP_500)
        slot = await SlotWorker.start(system, client)
        with pytest.raises(BackendError) as info:
            await slot.infer(_request("a"))
    assert info.value.status == 500


async def test_a_stream_the_backend_cuts_mid_reply_goes_on_from_where_it_was_cut(
    system: ActorSystem,
) -> None:
    """A backend that closes the stream after part of the reply (it restarted, it crashed) does
    not fail the call: the slot puts it back and continues it from the text it had, so the
    caller gets the same reply as an uncut call, with nothing decoded twice."""
    async with SimBackend.serve(SimConfig()) as sim, LlamaServerClient(sim.url) as client:
        slot = await SlotWorker.start(system, client)
        whole = await slot.infer(_request("hello"))
        sim.inject(Fault.RESET_MID_STREAM)
        cut = await slot.infer(_request("hello"))
        stats = await slot.stats()
    assert isinstance(whole.result, TextResponse)
    assert isinstance(cut.result, TextResponse)
    assert cut.result.content == whole.result.content
    assert (stats.backend_cuts, stats.continued, stats.restarted) == (1, 1, 0)
    assert (stats.preemptions, stats.failed, stats.tokens_redecoded) == (0, 0, 0)


async def test_a_backend_that_keeps_cutting_fails_the_call_once_the_window_is_spent(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """Cut after cut, each attempt is continued until the retry window (counted from the first
    cut) is spent; then the call fails with the backend's own error."""
    from forge_rt.errors import BackendError, FaultKind
    from forge_rt.runtime import BackendRetry

    async with (
        SimBackend.serve(SimConfig(decode_tps=10.0)) as sim,
        LlamaServerClient(sim.url) as client,
    ):
        slot = await SlotWorker.start(system, client, retry=BackendRetry(window_s=5.0))
        sim.inject(Fault.RESET_MID_STREAM, count=1000)
        with pytest.raises(BackendError) as info:
            await slot.infer(_request("hello"))
        stats = await slot.stats()
    assert info.value.kind is FaultKind.RESET_MID_STREAM
    assert stats.backend_cuts >= 2
    assert stats.failed == 1


# A prompt of 2,000 one-character tokens: the first-token limit, which estimates four characters
# a token, allows 5 + 2,000 / 4 / 20 = 30 s; the sim, at the prefill floor of 20 tokens/s,
# needs 100 s. Only the backend's own reports on the prompt tell that it is still moving.
PREFILL_FLOOR = StallLimits(first_token_s=5.0, prefill_floor_tps=20.0, between_chunks_s=5.0)
LONG_PROMPT = "x" * 2000


def _slow_prefill(**overrides: object) -> SimConfig:
    return SimConfig(
        script={"*": ["read it all"]}, prefill_tps=20.0, tokens_per_char=1.0, **overrides
    )


async def test_a_long_prefill_that_reports_its_progress_is_not_a_stall(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """llama-server reports the prompt batch by batch (``return_progress``): each report
    restarts the wait for the tokens it says are left, so a prefill far longer than the
    first-token limit finishes -- and the caller sees only the reply."""
    request = _request(LONG_PROMPT)
    assert PREFILL_FLOOR.first_token_limit(request) < 31.0
    seen: list[object] = []

    async def sink(chunk: object) -> None:
        seen.append(chunk)

    async with SimBackend.serve(_slow_prefill()) as sim, LlamaServerClient(sim.url) as client:
        slot = await SlotWorker.start(system, client, stall=PREFILL_FLOOR)
        start = trio.current_time()
        with trio.fail_after(600):
            response = await slot.infer(request, on_chunk=sink)
        took = trio.current_time() - start
    assert isinstance(response.result, TextResponse)
    assert response.result.content == "read it all"
    assert took >= 100.0  # the whole prefill was waited for
    assert seen
    assert not any(isinstance(c, PromptProgressChunk) for c in seen)


async def test_without_progress_reports_the_same_prefill_is_cut_at_the_first_token_limit(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """The contrast: a client that asks for no reports (the plain OpenAI adapter) waits on
    the estimate alone, and the same prefill is taken for a hung backend."""
    async with SimBackend.serve(_slow_prefill()) as sim, OpenAICompatClient(sim.url) as client:
        slot = await SlotWorker.start(system, client, stall=PREFILL_FLOOR)
        with trio.fail_after(600), pytest.raises(InferenceStalledError) as info:
            await slot.infer(_request(LONG_PROMPT))
    assert info.value.phase == "first_token"


async def test_a_prefill_that_stops_moving_is_a_stall_and_the_call_behind_it_runs(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """A server that started on the prompt and then stopped is caught by the prefill limit for
    what its last report left -- and says how far it got."""
    config = SimConfig(script={"*": ["behind"]}, tokens_per_char=1.0)
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        sim.inject(Fault.STALL_IN_PREFILL)
        slot = await SlotWorker.start(system, client, stall=PREFILL_FLOOR)
        start = trio.current_time()
        with trio.fail_after(600):
            with pytest.raises(InferenceStalledError) as info:
                await slot.infer(_request(LONG_PROMPT))
            failed_after = trio.current_time() - start
            behind = await slot.infer(_request("second"))
    error = info.value
    assert (error.phase, error.tokens, error.retry_safe) == ("prefill", 0, True)
    assert "no progress on the prompt" in str(error)
    assert re.search(r"0 of 20\d\d prompt tokens read", str(error))
    # The limit for what was left at the last report: 5 s + ~2,000 tokens at 20/s.
    assert 100.0 <= failed_after < 110.0
    assert isinstance(behind.result, TextResponse)
    assert behind.result.content == "behind"


# The embedded 0.5B's pace on the 2-core CPU, roughly: 100 prompt tokens/s, batches of 128.
PACED = SimConfig(
    script={"*": ["read"] * 4}, prefill_tps=100.0, prefill_batch=128, tokens_per_char=1.0
)
PROMPT_600 = "x" * 600  # five batches: reports about 1.28 s apart


async def _stall_after_a_paced_call(system: ActorSystem, limits: StallLimits) -> float:
    """One call at the backend's usual pace, then one that stops after its first report: how
    long the second waited before it failed as stalled in prefill."""
    async with SimBackend.serve(PACED) as sim, LlamaServerClient(sim.url) as client:
        slot = await SlotWorker.start(system, client, stall=limits)
        with trio.fail_after(600):
            first = await slot.infer(_request(PROMPT_600))
            assert isinstance(first.result, TextResponse)
            sim.inject(Fault.STALL_IN_PREFILL)
            start = trio.current_time()
            with pytest.raises(InferenceStalledError) as info:
                await slot.infer(_request(PROMPT_600 + "y"))
            waited = trio.current_time() - start
            behind = await slot.infer(_request("after"))
    assert info.value.phase == "prefill"
    assert isinstance(behind.result, TextResponse)
    return waited


async def test_a_hung_server_is_caught_at_a_few_times_its_usual_report_pace(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    """Once the slot has seen the backend's reports come about 1.3 s apart, a call whose
    reports stop is caught after four times that (the default ``report_gap_factor``), not at
    the prefill limit's 30 s and more."""
    waited = await _stall_after_a_paced_call(system, StallLimits())
    assert waited <= 5.5


async def test_without_the_learned_pace_the_same_stall_waits_the_prefill_limit(
    system: ActorSystem, autojump_clock: trio.testing.MockClock
) -> None:
    waited = await _stall_after_a_paced_call(system, StallLimits(report_gap_factor=None))
    assert waited >= 30.0


def test_report_gap_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="report_gap_factor must be >= 1 or None"):
        StallLimits(report_gap_factor=0.5)
    with pytest.raises(ConfigurationError, match="report_gap_floor_s must be > 0"):
        StallLimits(report_gap_floor_s=0)
