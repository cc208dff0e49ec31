"""The guarded step's bounds: the derived token budget, the stop on repetition, escalation."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pydantic
import pytest
import trio
from runtime_support import CITY, Tools

from actors import ActorSystem
from forge_rt.backends.sim import FailureRates, SimBackend, SimConfig, SimReply, SimToolCall
from forge_rt.clients import LlamaServerClient
from forge_rt.core import (
    ClientCapabilities,
    FinalChunk,
    InferenceRequest,
    JsonSchemaConstraint,
    Message,
    Sampling,
    StreamChunk,
    ToolCall,
    ToolDef,
    ToolSpec,
    Workflow,
)
from forge_rt.guardrails import (
    REPETITION_FINISH_REASON,
    GuardrailOptions,
    Guardrails,
    reply_token_budget,
)
from forge_rt.runtime import Accepted, GuardedStep, RunStats, SlotCall, SlotWorker, WorkflowRunner
from forge_rt.testing import ScriptedClient

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
LOOPING = "\n".join([CALL] * 30)  # the real 0.5B repeats one call 16-41 times
ANSWER = SimReply(text='{"name": "respond", "arguments": {"message": "Sunny in Paris."}}')
ROOMY = Sampling(max_tokens=4096)  # the caller's cap wins: only the stop can end the loop early


def weather_only(tools: Tools, **overrides: Any) -> Workflow:
    """The shared weather workflow with get_weather as its one tool (free decoding)."""
    spec = ToolSpec(name="get_weather", parameters=CITY)
    return tools.workflow(tools=[ToolDef(spec=spec, callable=tools.get_weather)], **overrides)


@asynccontextmanager
async def on_sim(config: SimConfig) -> AsyncIterator[tuple[SimBackend, LlamaServerClient]]:
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        yield sim, client


@asynccontextmanager
async def slot_on(client: Any) -> AsyncIterator[SlotWorker]:
    async with ActorSystem.open() as system:
        yield await SlotWorker.start(system, client)


def request_for(workflow: Workflow, sampling: Sampling = ROOMY) -> InferenceRequest:
    guard = Guardrails.from_workflow(workflow)
    return InferenceRequest(
        messages=(Message.user("Weather in Paris?"),), tools=guard.tools, sampling=sampling
    )


# --- the stop on repetition -------------------------------------------------------------------


async def test_a_looping_reply_is_stopped_early_and_the_run_completes(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """Thirty copies of one call: generation stops after the third, the call runs once, and
    the run goes on to its answer."""
    config = SimConfig(script={"*": [SimReply(text=LOOPING), ANSWER]}, decode_tps=20)
    async with on_sim(config) as (sim, client):
        result = await WorkflowRunner(client, sampling=ROOMY).run(weather_only(tools), "Paris?")
        looping = sim.stats.replies[0]
        generated = sim.stats.generated_tokens  # the stopped loop and the answer
        # The same loop again, read to its end by the client itself: what it would have cost.
        sim.set_script({"*": [SimReply(text=LOOPING)]})
        async with client.stream(request_for(weather_only(tools))) as chunks:
            async for _ in chunks:
                pass
        full = sim.stats.generated_tokens - generated
    assert result.output == "Sunny in Paris."
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    assert (result.stats.repetition_stops, result.stats.collapsed) == (1, 2)
    assert not looping.completed  # the client closed the stream: the sim stopped decoding
    assert generated < full / 4


async def test_the_stopped_reply_goes_to_the_guardrails_as_it_stands(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """The partial reply, finish reason 'repetition', is the verdict's; the stream listener sees
    what was streamed and then a final chunk carrying it."""
    seen: list[StreamChunk] = []

    async def listen(chunk: StreamChunk) -> None:
        seen.append(chunk)

    workflow = weather_only(tools)
    config = SimConfig(script={"*": [SimReply(text=LOOPING)]})
    async with on_sim(config) as (_, client), slot_on(client) as slot:
        stats = RunStats()
        step = GuardedStep(slot, Guardrails.from_workflow(workflow), stats)
        verdict = await step.attempt(request_for(workflow), SlotCall(on_chunk=listen))
    assert isinstance(verdict, Accepted)
    response = verdict.response
    assert response.finish_reason == REPETITION_FINISH_REASON
    assert response.raw_text.count(CALL) == 3
    assert response.raw_text.startswith("\n".join([CALL] * 3))
    assert [(c.tool, c.args) for c in verdict.action.calls] == [("get_weather", {"city": "Paris"})]
    assert isinstance(seen[-1], FinalChunk)
    assert seen[-1].response == response
    assert "".join(getattr(c, "text", "") for c in seen[:-1]) == response.raw_text
    assert stats.repetition_stops == 1


async def test_a_reply_fetched_whole_is_not_stopped(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """A whole reply was generated before it arrived: it is checked as the backend sent it."""
    workflow = weather_only(tools)
    async with on_sim(SimConfig(script={"*": [SimReply(text=LOOPING)]})) as (sim, client):
        async with slot_on(client) as slot:
            stats = RunStats()
            step = GuardedStep(slot, Guardrails.from_workflow(workflow), stats)
            verdict = await step.attempt(request_for(workflow), SlotCall(whole=True))
        assert sim.stats.replies[0].completed
    assert verdict.response.finish_reason != REPETITION_FINISH_REASON
    assert verdict.response.raw_text == LOOPING
    assert stats.repetition_stops == 0


async def test_native_calls_repeated_are_stopped_too(autojump_clock: trio.abc.Clock) -> None:
    """The same native tool call over and over is stopped; the complete ones are kept."""
    tools = Tools()
    workflow = weather_only(tools)
    call = SimToolCall(name="get_weather", arguments={"city": "Oslo"})
    looping = SimReply(tool_calls=(call,) * 12)
    async with on_sim(SimConfig(script={"*": [looping]}, decode_tps=20)) as (sim, client):
        async with slot_on(client) as slot:
            step = GuardedStep(slot, Guardrails.from_workflow(workflow), RunStats())
            verdict = await step.attempt(request_for(workflow), SlotCall())
        assert not sim.stats.replies[0].completed
    assert verdict.response.finish_reason == REPETITION_FINISH_REASON
    assert [c.args for c in verdict.response.tool_calls] == [{"city": "Oslo"}] * 3


# --- the token budget -------------------------------------------------------------------------


async def test_a_request_without_max_tokens_gets_the_derived_budget(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """The step sets max_tokens from what the reply may contain when the caller set none."""
    client = ScriptedClient([[ToolCall(tool="get_weather", args={"city": "Paris"})]])
    workflow = weather_only(tools)
    async with slot_on(client) as slot:
        step = GuardedStep(slot, Guardrails.from_workflow(workflow), RunStats())
        await step.attempt(request_for(workflow, Sampling(temperature=0.2)), SlotCall())
    sent = client.calls[0].request
    unbudgeted = msgspec.structs.replace(sent, sampling=Sampling(temperature=0.2))
    assert sent.sampling == Sampling(temperature=0.2, max_tokens=reply_token_budget(unbudgeted))


async def test_the_caller_max_tokens_always_wins(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """An explicit max_tokens goes to the backend unchanged, however it compares to the budget."""
    client = ScriptedClient([[ToolCall(tool="get_weather", args={"city": "Paris"})]])
    workflow = weather_only(tools)
    async with slot_on(client) as slot:
        step = GuardedStep(slot, Guardrails.from_workflow(workflow), RunStats())
        await step.attempt(request_for(workflow, Sampling(max_tokens=7)), SlotCall())
    assert client.calls[0].request.sampling.max_tokens == 7


# --- escalation -------------------------------------------------------------------------------


async def test_a_free_run_retries_constrained_and_then_decodes_freely_again(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """A model that writes only prose when free: each retry is constrained and succeeds, and
    the next step starts free again."""
    config = SimConfig(rates=FailureRates(bare_text=1.0))
    async with on_sim(config) as (sim, client):
        result = await WorkflowRunner(client).run(weather_only(tools), "Paris?")
    constrained = [r.constraint for r in sim.stats.replies]
    assert constrained == [None, "response_format", None, "response_format"]
    assert sim.stats.constraints == {"response_format": 2}
    assert (result.stats.escalations, result.stats.retries) == (2, {"no_call": 2})
    assert tools.calls == [("get_weather", {"city": "example city"})]


async def test_without_escalate_the_retry_decodes_freely(autojump_clock: trio.abc.Clock) -> None:
    """A step built without escalate=True leaves every request as the caller built it."""
    workflow = weather_only(Tools())
    client = ScriptedClient(["prose", [ToolCall(tool="get_weather", args={"city": "Paris"})]])
    guard = Guardrails.from_workflow(workflow)

    async def prepare() -> InferenceRequest:
        return request_for(workflow)

    async def on_rejected(rejected: object) -> None:
        return None

    async with slot_on(client) as slot:
        stats = RunStats()
        await GuardedStep(slot, guard, stats).run(prepare, SlotCall(), on_rejected)
    assert [c.request.constraint for c in client.calls] == [None, None]
    assert stats.escalations == 0


async def test_a_constrained_run_is_not_escalated(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """Requests that are constrained already are left alone; nothing counts as escalated."""
    client = ScriptedClient(
        ["prose", [ToolCall(tool="get_weather", args={"city": "Paris"})], respond_call()]
    )
    result = await WorkflowRunner(client).run(weather_only(tools, constrain="always"), "Paris?")
    assert result.stats.escalations == 0
    assert all(c.request.constraint is not None for c in client.calls)


async def test_without_rescue_the_retry_is_not_escalated(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """A constrained reply is text only rescue can read: with rescue off, retries stay free."""
    client = ScriptedClient(
        ["prose", [ToolCall(tool="get_weather", args={"city": "Paris"})], respond_call()]
    )
    runner = WorkflowRunner(client, guardrails=GuardrailOptions(rescue=False))
    result = await runner.run(weather_only(tools), "Paris?")
    assert [c.request.constraint for c in client.calls] == [None, None, None]
    assert result.stats.escalations == 0


class Node(pydantic.BaseModel):
    value: int
    children: list[Node] = []


async def test_tools_that_cannot_be_constrained_are_not_escalated(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A recursive parameter model has no flat constraint (why such a run decodes freely):
    its retry stays free instead of failing."""

    async def plant(value: int, children: list[Node]) -> str:
        return "planted"

    spec = ToolSpec(name="plant", parameters=Node)
    workflow = Tools().workflow(
        tools=[ToolDef(spec=spec, callable=plant)], required_steps=["plant"]
    )
    client = ScriptedClient(
        [
            "prose",
            [ToolCall(tool="plant", args={"value": 1, "children": []})],
            respond_call("Planted."),
        ]
    )
    result = await WorkflowRunner(client).run(workflow, "Plant a tree.")
    assert [c.request.constraint for c in client.calls] == [None, None, None]
    assert result.stats.escalations == 0


class Unconstrainable(ScriptedClient):
    """A backend that takes neither a JSON schema nor a grammar."""

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(native_tools=True)


async def test_a_backend_that_cannot_constrain_is_not_escalated(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """Where the backend constrains nothing, the retry is free as before and nothing counts."""
    client = Unconstrainable(
        ["prose", [ToolCall(tool="get_weather", args={"city": "Paris"})], respond_call()]
    )
    result = await WorkflowRunner(client).run(weather_only(tools), "Paris?")
    assert [c.request.constraint for c in client.calls] == [None, None, None]
    assert result.stats.escalations == 0


async def test_an_escalated_retry_leaves_out_the_tool_the_model_looped_on(
    tools: Tools, autojump_clock: trio.abc.Clock
) -> None:
    """After a loop nudge the constrained retry cannot be the looping tool again; the looping
    call had succeeded and no step is pending, so only the answer is left."""
    weather = [ToolCall(tool="get_weather", args={"city": "Paris"})]
    client = ScriptedClient([weather, weather, weather, respond_call()])
    result = await WorkflowRunner(client).run(tools.workflow(), "Weather?")
    assert result.stats.retries == {"loop": 1}
    assert result.stats.escalations == 1
    constraint = client.calls[3].request.constraint
    assert isinstance(constraint, JsonSchemaConstraint)
    offered = {
        o["properties"]["name"]["const"]
        for o in constraint.schema["anyOf"]
        if o["type"] == "object"
    }
    assert offered == {"respond"}


def respond_call(message: str = "Sunny.") -> list[ToolCall]:
    return [ToolCall(tool="respond", args={"message": message})]


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "single"])
async def test_the_escalated_constraint_follows_the_parallel_option(
    parallel: bool, autojump_clock: trio.abc.Clock
) -> None:
    """parallel=False (a client that forbids parallel calls) escalates to the one-call schema."""
    workflow = weather_only(Tools())
    client = ScriptedClient(["prose", [ToolCall(tool="get_weather", args={"city": "Paris"})]])

    async def prepare() -> InferenceRequest:
        return request_for(workflow)

    async def on_rejected(rejected: object) -> None:
        return None

    async with slot_on(client) as slot:
        step = GuardedStep(
            slot, Guardrails.from_workflow(workflow), RunStats(), escalate=True, parallel=parallel
        )
        await step.run(prepare, SlotCall(), on_rejected)
    constraint = client.calls[1].request.constraint
    assert isinstance(constraint, JsonSchemaConstraint)
    kinds = [o["type"] for o in constraint.schema["anyOf"]]
    assert ("array" in kinds) is parallel
    assert json.dumps(constraint.schema).count('"const": "get_weather"') == (2 if parallel else 1)
