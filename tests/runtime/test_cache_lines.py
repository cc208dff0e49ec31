"""Cache lines: which backend KV slot each call runs on, and what that saves on preemption."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from actors import ActorSystem
from forge_rt.backends.sim import SimBackend, SimConfig, SimReply
from forge_rt.clients import LlamaServerClient
from forge_rt.core import InferenceRequest, Message
from forge_rt.runtime import SlotWorker
from forge_rt.runtime._cache_lines import CacheLine, pick_line
from forge_rt.runtime._scheduling import InferenceJob
from forge_rt.testing import ScriptedClient

SYSTEM = Message.system("You are a careful assistant. " * 20)


def _job(*texts: str, key: str | None = None, priority: int = 10) -> InferenceJob:
    messages = (SYSTEM, *(Message.user(t) for t in texts))
    return InferenceJob(InferenceRequest(messages=messages), priority=priority, affinity_key=key)


def _lines(n: int) -> list[CacheLine]:
    return [CacheLine(i) for i in range(n)]


async def test_a_preempted_job_returns_to_the_line_holding_its_work() -> None:
    lines = _lines(3)
    job = _job("a")
    lines[2].held_for = job.id
    assert pick_line(job, lines, urgent=False) is lines[2]


async def test_a_line_held_for_another_job_is_left_alone_while_any_other_is_free() -> None:
    lines = _lines(2)
    held = _job("a")
    lines[0].held_for, lines[0].holds = held.id, held.fp
    newcomer = _job("a")  # even one whose prompt the held line would serve best
    assert pick_line(newcomer, lines, urgent=False) is lines[1]
    lines[1].held_for = _job("b").id
    assert pick_line(newcomer, lines, urgent=False) in lines  # all held: one is taken


async def test_the_line_sharing_most_of_the_prompt_wins_then_the_workflows_then_lru() -> None:
    lines = _lines(3)
    lines[0].holds = _job("x").fp  # shares the system prompt only
    lines[1].holds = _job("q", "r").fp  # shares system + "q"
    later = _job("q", "r", "s")
    assert pick_line(later, lines, urgent=False) is lines[1]
    for line in lines:
        line.holds = ()
    lines[2].key = "voice"
    assert pick_line(_job("new", key="voice"), lines, urgent=True) is lines[2]
    lines[0].last_used, lines[1].last_used, lines[2].last_used = 5.0, 1.0, 3.0
    assert pick_line(_job("other"), lines, urgent=False) is lines[1]


async def test_background_work_takes_an_urgent_workflows_line_only_when_nothing_else_is_left() -> (
    None
):
    lines = _lines(2)
    lines[0].urgent, lines[0].last_used = True, 0.0
    lines[1].last_used = 9.0
    assert pick_line(_job("bg"), lines, urgent=False) is lines[1]
    lines[1].urgent = True
    assert pick_line(_job("bg"), lines, urgent=False) is lines[0]


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    async with ActorSystem.open() as system:
        yield system


def _reply(request: InferenceRequest) -> str:
    text = request.messages[-1].content
    return "one two three four five six seven eight" if text == "low" else "hi"


async def test_the_preempting_call_runs_on_another_line_and_the_preempted_one_comes_back(
    system: ActorSystem, autojump_clock: object
) -> None:
    client = ScriptedClient(_reply, token_s=1.0)
    slot = await SlotWorker.start(system, client, cache_lines=2)
    # The same system prompt: the line with the most shared prefix is the preempted call's,
    # which the arrival must leave alone (it is dispatched before the preempted attempt ends).
    low = InferenceRequest(messages=(SYSTEM, Message.user("low")))
    high = InferenceRequest(messages=(SYSTEM, Message.user("high")))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: slot.infer(low, priority=10, affinity_key="bg"))
        await trio.sleep(2.5)
        nursery.start_soon(lambda: slot.infer(high, priority=0, affinity_key="voice"))
    lines = [(c.request.messages[-1].content, c.request.slot_id) for c in client.calls]
    assert lines == [("low", 0), ("high", 1), ("low", 0)]


def test_cache_lines_are_checked_when_the_slot_starts() -> None:
    async def start(**options: object) -> None:
        async with ActorSystem.open() as system:
            await SlotWorker.start(system, ScriptedClient(["x"]), **options)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="at least 1"):
        trio.run(lambda: start(cache_lines=0))
    with pytest.raises(ValueError, match="exclude each other"):
        trio.run(lambda: start(cache_lines=2, slot_id=1))


async def _reprocessed(lines: int | None, n_slots: int) -> int:
    """Prompt tokens the sim re-processed for a background call preempted by a voice call."""
    words = " ".join(f"w{i}" for i in range(400))
    config = SimConfig(
        script={
            "low": [SimReply(text=" ".join(["token"] * 60))] * 2,
            "high": [SimReply(text="hi")],
        },
        n_slots=n_slots,
    )
    async with (
        SimBackend.serve(config) as sim,
        LlamaServerClient(sim.url) as client,
        ActorSystem.open() as system,
    ):
        slot = await SlotWorker.start(system, client, cache_lines=lines)
        low = InferenceRequest(messages=(Message.system(words), Message.user("low")))
        high = InferenceRequest(
            messages=(Message.system("Voice " + words[::-1]), Message.user("high"))
        )
        started = trio.Event()

        async def on_chunk(chunk: object) -> None:
            started.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: slot.infer(low, priority=10, affinity_key="bg", on_chunk=on_chunk)
            )
            await started.wait()
            await slot.infer(high, priority=0, affinity_key="voice")
        stats = await slot.stats()
        assert stats.preemptions == 1
        assert stats.continued == 1
        return stats.prompt_tokens_reprocessed


async def test_with_lines_a_resumed_call_reprocesses_almost_none_of_its_prompt() -> None:
    """On the sim over HTTP: one line, the voice call evicts the background prompt and the resume
    prefills all of it again; two lines, the resume finds it cached."""
    with trio.fail_after(60):
        one_line = await _reprocessed(None, n_slots=1)
        two_lines = await _reprocessed(2, n_slots=2)
    assert one_line > 400
    assert two_lines <= 0.05 * one_line


async def _voice_prefill(lines: int | None) -> int:
    """Prompt tokens the sim processed for a second voice request after two background calls."""
    prefix = " ".join(f"v{i}" for i in range(300))
    config = SimConfig(script={"*": [SimReply(text="done")] * 4}, n_slots=2)
    async with (
        SimBackend.serve(config) as sim,
        LlamaServerClient(sim.url) as client,
        ActorSystem.open() as system,
    ):
        slot = await SlotWorker.start(system, client, cache_lines=lines)

        def request(system_text: str, user: str) -> InferenceRequest:
            return InferenceRequest(messages=(Message.system(system_text), Message.user(user)))

        await slot.infer(request(prefix, "first"), priority=0, affinity_key="voice")
        await slot.infer(request("Background A " * 80, "a"), priority=10, affinity_key="a")
        await slot.infer(request("Background B " * 80, "b"), priority=10, affinity_key="b")
        reply = await slot.infer(request(prefix, "second"), priority=0, affinity_key="voice")
    assert reply.usage.prompt_tokens is not None
    return reply.usage.prompt_tokens - (reply.usage.cached_tokens or 0)


async def test_an_urgent_workflow_keeps_its_line_warm_through_background_work() -> None:
    """Left to the server's own choice (least recently used), the second background call evicts
    the voice prefix; with lines, background work stays off the voice workflow's line."""
    with trio.fail_after(60):
        server_choice = await _voice_prefill(None)
        with_lines = await _voice_prefill(2)
    assert server_choice > 300
    assert with_lines < 20


async def test_a_prewarmed_urgent_workflow_finds_its_prefix_cached_after_background_work() -> None:
    """prewarm() processes the system prompt and tools on the workflow's own line; background
    work runs on the other line, and the first voice turn's prompt is cached up to its user turn."""
    from runtime_support import Tools

    from forge_rt.eval.scenarios._kit import call, plan_oracle
    from forge_rt.runtime import Session

    oracle = plan_oracle([call("get_weather", city="Paris"), call("respond", message="Sunny.")])
    config = SimConfig(oracle=oracle, n_slots=2)
    voice_tools, background_tools = Tools(), Tools()
    with trio.fail_after(30):
        async with (
            SimBackend.serve(config) as sim,
            LlamaServerClient(sim.url) as client,
            Session.open(client, cache_lines=2) as session,
        ):
            voice = await session.start(voice_tools.workflow(name="voice"), priority=0)
            prefix = await voice.prewarm()
            assert prefix is not None
            await session.run(
                background_tools.workflow(system_prompt_template="Background work. " * 40),
                "Weather in Paris?",
                priority=10,
            )
            cached_before = [s.cached_tokens for s in sim.stats.slots]
            await voice.send("Weather in Paris?")
            gained = [
                s.cached_tokens - b for s, b in zip(sim.stats.slots, cached_before, strict=True)
            ]
            with pytest.raises(RuntimeError, match="prewarm before its first turn"):
                await voice.prewarm()
    # The voice's first call reused the whole prewarmed prefix (all but the last token, which a
    # prompt re-evaluates); its second call reused the first.
    assert max(gained) >= 2 * (prefix - 1)


async def test_prewarm_with_a_missing_prompt_variable_is_the_template_error() -> None:
    from runtime_support import Tools

    from forge_rt.errors import PromptTemplateError
    from forge_rt.runtime import Session

    workflow = Tools().workflow(system_prompt_template="You serve {user_name}.")
    async with Session.open(ScriptedClient(["x"])) as session:
        handle = await session.start(workflow, priority=0)
        with pytest.raises(PromptTemplateError):
            await handle.prewarm()
        assert await handle.prewarm(prompt_variables={"user_name": "Ana"}) is not None
