"""A Fleet: several backends as one slot, each call placed on one of them (virtual time)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

from actors import ActorSystem
from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import VLLMClient
from forge_rt.core import (
    ClientCapabilities,
    InferenceRequest,
    Message,
    ResetChunk,
    Sampling,
    TextDeltaChunk,
    ToolCall,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.errors import BackendError, ConfigurationError, FaultKind, ModelNotServedError
from forge_rt.runtime import Fleet, Session
from forge_rt.testing import ScriptedClient

CALL_S = 4.0  # every call takes this long on a scripted backend


def _request(text: str) -> InferenceRequest:
    return InferenceRequest(messages=(Message.user(text),))


def _backends(n: int) -> list[ScriptedClient]:
    return [ScriptedClient(lambda request: "ok", prefill_s=CALL_S) for _ in range(n)]


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    async with ActorSystem.open() as system:
        yield system


async def test_new_workflows_spread_over_the_lanes(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = _backends(2)
    fleet = await Fleet.start(system, backends)
    async with trio.open_nursery() as nursery:
        for key in ("w1", "w2", "w3", "w4"):
            nursery.start_soon(lambda k=key: fleet.infer(_request(k), affinity_key=k))
            await trio.testing.wait_all_tasks_blocked()
        assert fleet.in_flight() == (2, 2)
    assert [fleet.lane_of(k) for k in ("w1", "w2", "w3", "w4")] == [0, 1, 0, 1]
    assert [len(b.calls) for b in backends] == [2, 2]


async def test_a_workflow_stays_on_the_lane_holding_its_prompt(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = _backends(2)
    fleet = await Fleet.start(system, backends)
    for key in ("kept", "elsewhere", "busy"):  # an idle fleet spreads them: lanes 0, 1, 0
        await fleet.infer(_request(key), affinity_key=key, priority=5)
    assert [fleet.lane_of(k) for k in ("kept", "elsewhere", "busy")] == [0, 1, 0]
    async with trio.open_nursery() as nursery:
        for _ in range(3):  # lane 0 gets busy while lane 1 is idle
            nursery.start_soon(
                lambda: fleet.infer(_request("load"), affinity_key="busy", priority=5)
            )
        await trio.testing.wait_all_tasks_blocked()
        assert fleet.in_flight() == (3, 0)
        await fleet.infer(_request("second"), affinity_key="kept", priority=5)
    assert fleet.lane_of("kept") == 0
    assert "second" in [c.request.messages[0].content for c in backends[0].calls]


async def test_an_urgent_call_goes_to_an_idle_lane_whatever_its_pin(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = _backends(2)
    fleet = await Fleet.start(system, backends)
    await fleet.infer(_request("earlier"), affinity_key="voice", priority=0)
    await fleet.infer(_request("earlier"), affinity_key="chat", priority=5)
    assert (fleet.lane_of("voice"), fleet.lane_of("chat")) == (0, 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: fleet.infer(_request("background"), affinity_key="bg", priority=10)
        )
        await trio.testing.wait_all_tasks_blocked()
        assert fleet.lane_of("bg") == 0  # voice's lane is busy now, the other idle
        started = trio.current_time()
        await fleet.infer(_request("spoken"), affinity_key="voice", priority=0)
        assert trio.current_time() - started == pytest.approx(CALL_S)  # no wait at all
        assert fleet.lane_of("voice") == 1  # it stays where its prompt is now
    assert [c.request.messages[0].content for c in backends[1].calls] == ["earlier", "spoken"]


async def test_with_no_idle_lane_an_urgent_call_preempts_the_least_urgent_work(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = _backends(2)
    fleet = await Fleet.start(system, backends)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: fleet.infer(_request("urgent"), affinity_key="u", priority=0))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: fleet.infer(_request("batch"), affinity_key="b", priority=10))
        await trio.testing.wait_all_tasks_blocked()
        assert (fleet.lane_of("u"), fleet.lane_of("b")) == (0, 1)
        started = trio.current_time()
        await fleet.infer(_request("spoken"), affinity_key="v", priority=0)
        assert trio.current_time() - started == pytest.approx(CALL_S)
    assert fleet.lane_of("v") == 1
    stats = await fleet.lane_stats()
    assert (stats[0].preemptions, stats[1].preemptions) == (0, 1)
    total = await fleet.stats()
    assert total.completed == 3
    assert total.preemptions == 1


def _steps_workflow(name: str, steps: int) -> Workflow:
    async def step(n: int) -> str:
        return f"step {n} done"

    spec = ToolSpec(
        name="step",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    return Workflow(
        name=name,
        tools=[ToolDef(spec=spec, callable=step)],
        system_prompt_template="Run the steps, then respond.",
        constrain="never",
    )


def _stepper(steps: int) -> Any:
    """Replies that call ``step`` ``steps`` times, then answer."""

    def reply(request: InferenceRequest) -> str | list[ToolCall]:
        done = sum(1 for m in request.messages if m.tool_call_id)
        if done < steps:
            return [ToolCall(tool="step", args={"n": done + 1})]
        return [ToolCall(tool="respond", args={"message": "all steps done"})]

    return reply


async def _makespan(backends: int, workflows: int = 32, steps: int = 4) -> float:
    clients = [ScriptedClient(_stepper(steps), prefill_s=1.0) for _ in range(backends)]
    start = trio.current_time()
    async with Session.open(clients=clients) as session, trio.open_nursery() as nursery:
        for i in range(workflows):
            flow = _steps_workflow(f"flow{i}", steps)
            nursery.start_soon(lambda f=flow: session.run(f, "go"))
    return trio.current_time() - start


async def test_workflows_over_two_and_four_backends_finish_in_a_half_and_a_quarter(
    autojump_clock: object,
) -> None:
    one, two, four = [await _makespan(n) for n in (1, 2, 4)]
    assert one / two >= 1.9
    assert one / four >= 3.6


async def test_a_session_takes_one_client_or_several() -> None:
    with pytest.raises(ConfigurationError):
        async with Session.open():
            pass
    with pytest.raises(ConfigurationError):
        async with Session.open(_backends(1)[0], clients=_backends(2)):
            pass


class _Dying:
    """A scripted backend that can go down: refused before a reply, or cut after
    ``cut_after`` streamed tokens."""

    def __init__(
        self,
        text: str = "the answer is forty two",
        *,
        cut_after: int | None = None,
        prefill_support: bool = True,
    ):
        self.inner = ScriptedClient(
            lambda request: text, prefill_s=1.0, token_s=0.5, prefill_support=prefill_support
        )
        self.down = False
        self.cut_after = cut_after
        self.model = self.inner.model
        self.capabilities = self.inner.capabilities

    def send(self, request: InferenceRequest) -> Any:
        return self.inner.send(request)

    @asynccontextmanager
    async def stream(self, request: InferenceRequest) -> AsyncIterator[AsyncIterator[Any]]:
        if self.down and self.cut_after is None:
            raise BackendError(
                "connection refused", kind=FaultKind.CONNECT_REFUSED, retry_safe=True
            )
        async with self.inner.stream(request) as chunks:
            yield self._cut(chunks) if self.down else chunks

    async def _cut(self, chunks: AsyncIterator[Any]) -> AsyncIterator[Any]:
        sent = 0
        async for chunk in chunks:
            if sent == self.cut_after:
                raise BackendError(
                    "reset mid-stream", kind=FaultKind.RESET_MID_STREAM, retry_safe=False
                )
            sent += 1
            yield chunk

    async def context_length(self) -> int | None:
        return 4096

    async def aclose(self) -> None:
        return None


async def test_a_refusing_backend_leaves_the_rotation_and_its_call_runs_elsewhere(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = [_Dying(), _Dying()]
    backends[0].down = True
    fleet = await Fleet.start(system, backends, rejoin_after_s=5.0)
    response = await fleet.infer(_request("hello"), affinity_key="w")
    assert response.raw_text == "the answer is forty two"
    assert fleet.lane_of("w") == 1
    assert (fleet.restarted, fleet.failovers) == (1, [1, 0])
    assert fleet.in_rotation() == (False, True)
    await trio.sleep(5.0)
    assert fleet.in_rotation() == (True, True)  # tried again; a failure sends it out again


async def test_a_call_cut_mid_reply_goes_on_elsewhere_from_its_partial_text(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = [_Dying(cut_after=2), _Dying()]
    backends[0].down = True
    fleet = await Fleet.start(system, backends)
    seen: list[object] = []

    async def sink(chunk: object) -> None:
        seen.append(chunk)

    request = msgspec.structs.replace(_request("hello"), sampling=Sampling(max_tokens=50))
    response = await fleet.infer(request, on_chunk=sink)
    assert response.raw_text == "the answer is forty two"
    assert not any(isinstance(c, ResetChunk) for c in seen)  # nothing taken back
    streamed = "".join(c.text for c in seen if isinstance(c, TextDeltaChunk))
    assert streamed == "the answer is forty two"  # each word once: two there, the rest here
    (continuation,) = backends[1].inner.calls
    assert continuation.request.assistant_prefill == "the answer "
    assert continuation.request.sampling.max_tokens == 48  # two tokens already written
    assert (fleet.continued, fleet.restarted) == (1, 0)


async def test_a_cut_call_restarts_elsewhere_where_the_backend_cannot_go_on(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = [_Dying(cut_after=2), _Dying(prefill_support=False)]
    backends[0].down = True
    fleet = await Fleet.start(system, backends)
    seen: list[object] = []

    async def sink(chunk: object) -> None:
        seen.append(chunk)

    response = await fleet.infer(_request("hello"), on_chunk=sink)
    assert response.raw_text == "the answer is forty two"
    resets = [i for i, c in enumerate(seen) if isinstance(c, ResetChunk)]
    assert resets == [2]  # two tokens from the dying backend, then the word to drop them
    assert "cannot continue a partial reply" in seen[2].reason  # type: ignore[attr-defined]
    after = "".join(c.text for c in seen[3:] if isinstance(c, TextDeltaChunk))
    assert after == "the answer is forty two"
    assert (fleet.continued, fleet.restarted) == (0, 1)


async def test_a_session_fleet_moves_a_call_off_a_dead_backend_at_once(
    autojump_clock: object,
) -> None:
    """The session's backend retry rides out a lone backend's outage; in a fleet of several,
    the other backends serve meanwhile, so the call moves at once instead of waiting out the
    retry window (30 s) behind every call queued on the dead one."""
    backends = [_Dying(), _Dying()]
    async with Session.open(clients=backends) as session:
        fleet = session.slot
        assert isinstance(fleet, Fleet)
        await fleet.infer(_request("hello"), affinity_key="w")  # answered: the backend is known
        lane = fleet.lane_of("w")
        assert lane is not None
        backends[lane].down = True
        start = trio.current_time()
        response = await fleet.infer(_request("hello"), affinity_key="w")
        assert response.raw_text == "the answer is forty two"
        assert trio.current_time() - start < 10.0  # one call's time on the other backend
        assert fleet.failovers[lane] == 1


async def test_the_last_backends_failure_goes_to_the_caller(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = [_Dying(), _Dying()]
    for backend in backends:
        backend.down = True
    fleet = await Fleet.start(system, backends)
    with pytest.raises(BackendError):
        await fleet.infer(_request("hello"))
    assert fleet.failovers == [1, 1]


async def test_a_dead_backends_queued_calls_finish_on_the_others(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = [_Dying(), _Dying(), _Dying()]
    fleet = await Fleet.start(system, backends)
    done: list[str] = []

    async def workflow(key: str) -> None:
        for _ in range(3):
            response = await fleet.infer(_request(key), affinity_key=key)
            done.append(response.raw_text)

    async with trio.open_nursery() as nursery:
        for i in range(30):
            nursery.start_soon(workflow, f"w{i}")
        await trio.sleep(20.0)
        backends[1].down = True  # killed with ten workflows pinned to it
    assert len(done) == 90  # nothing lost
    assert fleet.failovers[1] >= 1
    assert fleet.restarted >= 1


async def _urgent_on_a_full_server(*, background: int, reserved: int) -> tuple[float, int]:
    """The time to first token of an urgent call on a server that runs four sequences at once
    (the sim's four slots: vLLM's ``max_num_seqs``), behind ``background`` long calls, through a
    fleet of four lanes over it; and how many running calls were preempted for it."""
    essay = " ".join(["word"] * 400)  # ten seconds of decoding at 40 tokens a second
    script: dict[str, list[Any]] = {f"essay {i}": [essay] for i in range(background)}
    script["lights on"] = ["The lights are on."]
    config = SimConfig(n_slots=4, prefill_tps=2000, decode_tps=40, script=script)
    first: list[float] = []

    async def on_chunk(chunk: object) -> None:
        if not first and isinstance(chunk, TextDeltaChunk):
            first.append(trio.current_time())

    long = Sampling(max_tokens=400)
    async with (
        SimBackend.serve(config) as sim,
        VLLMClient(sim.url, model="sim-model") as client,
        ActorSystem.open(shutdown="cancel") as system,
    ):
        fleet = await Fleet.start(system, [client] * 4, reserved=reserved)
        async with trio.open_nursery() as nursery:
            for i in range(background):
                request = InferenceRequest(messages=(Message.user(f"essay {i}"),), sampling=long)
                nursery.start_soon(
                    lambda r=request, k=f"bg{i}": fleet.infer(r, priority=10, affinity_key=k)
                )
            await trio.sleep(2.0)
            asked = trio.current_time()
            await fleet.infer(
                InferenceRequest(
                    messages=(Message.user("lights on"),), sampling=Sampling(max_tokens=8)
                ),
                priority=0,
                on_chunk=on_chunk,
            )
            nursery.cancel_scope.cancel()
        stats = await fleet.stats()
    return first[0] - asked, stats.preemptions


async def test_a_lane_kept_for_urgent_calls_serves_one_as_fast_as_an_idle_server(
    autojump_clock: object,
) -> None:
    with trio.fail_after(600):
        idle, _ = await _urgent_on_a_full_server(background=0, reserved=1)
        kept, cut_for_it = await _urgent_on_a_full_server(background=6, reserved=1)
        full, cut_without = await _urgent_on_a_full_server(background=6, reserved=0)
    assert kept <= 1.1 * idle
    assert cut_for_it == 0  # the headroom was free: no background work was cut
    # Without it the urgent call starts as soon (the lane's SlotWorker cuts a running call), but
    # a background call had to make room: the headroom is what saves that work.
    assert full <= 1.1 * idle
    assert cut_without >= 1


async def test_a_server_that_schedules_by_priority_hears_the_calls_own(
    system: ActorSystem, autojump_clock: object
) -> None:
    class PriorityServer(ScriptedClient):
        @property
        def capabilities(self) -> ClientCapabilities:
            return ClientCapabilities(native_tools=True, json_schema=True, priority_field=True)

    backend = PriorityServer(lambda request: "ok")
    fleet = await Fleet.start(system, [backend, backend], reserved=1)
    await fleet.infer(_request("batch"), priority=7)
    await fleet.infer(_request("spoken"), priority=0)
    assert [c.request.priority for c in backend.calls] == [7, 0]


def test_reserved_lanes_leave_at_least_one_for_the_rest() -> None:
    with pytest.raises(ValueError, match="fewer than"):
        Fleet([object()] * 2, reserved=2)  # type: ignore[list-item]


async def test_a_session_runs_several_lanes_on_one_batching_server(autojump_clock: object) -> None:
    backend = ScriptedClient(_stepper(2), prefill_s=1.0)
    async with Session.open(backend, lanes=3, urgent_lanes=1) as session:
        assert isinstance(session.slot, Fleet)
        assert len(session.slot.lanes) == 3
        async with trio.open_nursery() as nursery:
            for i in range(4):  # background work: less urgent than priority 0
                flow = _steps_workflow(f"flow{i}", 2)
                nursery.start_soon(lambda f=flow: session.run(f, "go", priority=10))
    starts = sorted(c.started_at for c in backend.calls)
    assert starts[:2] == [starts[0], starts[0]]  # two at once: the third lane is kept urgent
    assert starts[2] > starts[0]


async def test_urgent_lanes_must_leave_one_for_the_rest() -> None:
    with pytest.raises(ConfigurationError, match="urgent_lanes"):
        async with Session.open(_backends(1)[0], lanes=2, urgent_lanes=2):
            pass


def _serving(model: str, reply: str) -> ScriptedClient:
    return ScriptedClient(lambda request: reply, model=model, prefill_s=CALL_S)


def _asking(model: str) -> InferenceRequest:
    return msgspec.structs.replace(_request("hi"), model=model)


async def test_backends_of_different_models_each_take_the_calls_of_their_own(
    system: ActorSystem, autojump_clock: object
) -> None:
    small, large, large_too = (
        _serving("small-model", "from small"),
        _serving("large-model", "from large"),
        _serving("large-model", "from large too"),
    )
    fleet = await Fleet.start(system, [small, large, large_too])
    assert fleet.models == ("small-model", "large-model")
    asking = _asking("large-model")
    async with trio.open_nursery() as nursery:
        for key in ("a", "b", "c", "d"):  # the small backend idles: none of these is its model
            nursery.start_soon(lambda k=key: fleet.infer(asking, affinity_key=k))
    assert [len(b.calls) for b in (small, large, large_too)] == [0, 2, 2]
    unnamed = await fleet.infer(_request("hi"))  # no model named: the first backend's
    assert unnamed.raw_text == "from small"
    assert fleet.client_for("large-model") is large
    assert fleet.client_for(None) is small


async def test_a_model_no_backend_serves_is_refused_before_anything_is_queued(
    system: ActorSystem, autojump_clock: object
) -> None:
    backends = [_serving("small-model", "s"), _serving("large-model", "l")]
    fleet = await Fleet.start(system, backends)
    with pytest.raises(ModelNotServedError) as caught:
        await fleet.infer(_asking("medium-model"))
    assert (caught.value.model, caught.value.served) == (
        "medium-model",
        ("small-model", "large-model"),
    )
    assert [len(b.calls) for b in backends] == [0, 0]


async def test_a_fleet_of_one_model_serves_whatever_name_a_call_gives(
    system: ActorSystem, autojump_clock: object
) -> None:
    fleet = await Fleet.start(system, [_serving("only-model", "one"), _serving("only-model", "2")])
    assert (await fleet.infer(_asking("a-label-of-the-client"))).raw_text == "one"
    assert fleet.models == ("only-model",)


async def test_a_failing_backend_hands_its_call_to_one_of_the_same_model(
    system: ActorSystem, autojump_clock: object
) -> None:
    other = _serving("other-model", "never asked")
    dying, spare = _Dying(cut_after=2), _Dying()
    dying.model = spare.model = "kept-model"
    dying.down = True
    fleet = await Fleet.start(system, [dying, other, spare])
    request = _request("hello")
    request = msgspec.structs.replace(request, model="kept-model", sampling=Sampling(max_tokens=50))
    response = await fleet.infer(request)
    assert response.raw_text == "the answer is forty two"
    assert (len(other.calls), len(spare.inner.calls), fleet.continued) == (0, 1, 1)


async def test_backends_of_several_models_must_each_name_theirs(system: ActorSystem) -> None:
    unnamed = _Dying()
    unnamed.model = None
    with pytest.raises(ValueError, match="lane2 names none"):
        await Fleet.start(system, [_serving("one", "x"), _serving("two", "y"), unnamed])


async def test_a_session_starts_each_workflow_on_the_model_it_asks_for(
    autojump_clock: object,
) -> None:
    answer = '{"name": "respond", "arguments": {"message": "hello back"}}'
    small, large = _serving("small-model", answer), _serving("large-model", answer)
    workflow = Workflow(
        name="chat", tools=[], system_prompt_template="Be brief.", constrain="never"
    )
    async with Session.open(clients=[small, large]) as session:
        handle = await session.start(workflow, model="large-model")
        result = await handle.send("hello")
        with pytest.raises(ModelNotServedError):
            await session.start(workflow, model="medium-model")
    assert result.output == "hello back"
    assert [call.request.model for call in large.calls] == ["large-model"]
    assert not small.calls
