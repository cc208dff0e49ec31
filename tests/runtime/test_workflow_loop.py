"""The WorkflowActor loop through WorkflowRunner and Session, on a scripted in-process client."""

from typing import Any

import pytest
import trio
import trio.testing
from leak_support import LiveTasks, installed
from runtime_support import CITY, Tools

from forge_rt.context import ContextManager, TieredCompact
from forge_rt.core import Message, MessageType, ResetChunk, StreamChunk, TextDeltaChunk, ToolCall
from forge_rt.errors import (
    MaxIterationsError,
    ToolCallError,
    ToolExecutionError,
    WorkflowCancelledError,
)
from forge_rt.guardrails import GuardrailOptions
from forge_rt.runtime import Session, WorkflowRunner
from forge_rt.testing import ScriptedClient


def weather(city: str = "Paris") -> list[ToolCall]:
    return [ToolCall(tool="get_weather", args={"city": city})]


def respond(message: str = "It is sunny.") -> list[ToolCall]:
    return [ToolCall(tool="respond", args={"message": message})]


async def test_two_step_run_returns_the_answer(tools: Tools, autojump_clock: Any) -> None:
    """A tool call then respond: the runner returns the respond message and the steps done."""
    client = ScriptedClient([weather(), respond("Sunny, 22C.")])
    result = await WorkflowRunner(client).run(tools.workflow(), "Weather in Paris?")
    assert result.output == "Sunny, 22C."
    assert result.completed_steps == ("get_weather", "respond")
    assert tools.calls == [("get_weather", {"city": "Paris"})]
    assert [m.type for m in result.messages] == [
        MessageType.SYSTEM_PROMPT,
        MessageType.USER_INPUT,
        MessageType.TOOL_CALL,
        MessageType.TOOL_RESULT,
        MessageType.TOOL_CALL,
        MessageType.TOOL_RESULT,
    ]


async def test_sync_tool_runs_in_a_thread() -> None:
    """A plain (sync) tool works: it runs in a worker thread and its result is fed back."""
    from runtime_support import CITY

    from forge_rt.core import ToolDef, ToolSpec

    seen: list[str] = []

    def lookup(city: str) -> str:
        seen.append(city)
        return "cloudy"

    workflow = Tools().workflow(
        tools=[ToolDef(spec=ToolSpec(name="get_weather", parameters=CITY), callable=lookup)]
    )
    client = ScriptedClient([weather("Lima"), respond("cloudy")])
    result = await WorkflowRunner(client).run(workflow, "Lima?")
    assert (seen, result.output) == (["Lima"], "cloudy")
    assert result.messages[3].content == "cloudy"


async def test_text_call_is_rescued(tools: Tools, autojump_clock: Any) -> None:
    """A call written as fenced JSON in text is rescued and executed; the dialect is counted."""
    fenced = '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'
    client = ScriptedClient([fenced, respond()])
    result = await WorkflowRunner(client).run(tools.workflow(), "Oslo?")
    assert tools.calls == [("get_weather", {"city": "Oslo"})]
    assert sum(result.stats.rescued.values()) == 1


async def test_bare_text_gets_a_nudge_then_succeeds(tools: Tools, autojump_clock: Any) -> None:
    """Bare text → retry nudge → the model calls tools; nudges leave the persisted history."""
    client = ScriptedClient(["I think it is sunny.", weather(), respond()])
    workflow = tools.workflow()
    async with Session.open(client) as session:
        handle = await session.start(workflow)
        result = await handle.send("Weather?")
        assert result.stats.retries == {"no_call": 1}
        persisted = await handle.history()
    nudged = client.calls[1].request.messages
    assert [m.type for m in nudged][-2:] == [MessageType.TEXT_RESPONSE, MessageType.RETRY_NUDGE]
    assert not any(m.transient for m in persisted)
    assert MessageType.RETRY_NUDGE not in [m.type for m in persisted]


async def test_premature_terminal_is_blocked(tools: Tools, autojump_clock: Any) -> None:
    """respond before the required step is blocked as a tool error; the run then completes."""
    client = ScriptedClient([respond("too early"), weather(), respond("done: sunny")])
    result = await WorkflowRunner(client).run(tools.workflow(), "Weather?")
    assert result.output == "done: sunny"
    assert result.stats.retries == {"premature_terminal": 1}
    blocked = client.calls[1].request.messages[-1]
    assert blocked.type is MessageType.STEP_NUDGE


async def test_tool_errors_count_but_resolution_errors_do_not(
    tools: Tools, autojump_clock: Any
) -> None:
    """A ToolResolutionError is fed back free; two real failures in a row end the run typed."""
    client = ScriptedClient([weather("Atlantis"), *[weather(f"Error{i}") for i in range(3)]])
    with pytest.raises(ToolExecutionError) as info:
        await WorkflowRunner(client, guardrails=GuardrailOptions(max_tool_errors=2)).run(
            tools.workflow(), "Weather?"
        )
    assert info.value.tool == "get_weather"
    assert info.value.attempts == 3
    assert "no such city" in client.calls[1].request.messages[-1].content


async def test_retry_budget_exhaustion_is_typed(tools: Tools, autojump_clock: Any) -> None:
    """Bare text until the retry budget runs out raises ToolCallError with the last raw reply."""
    client = ScriptedClient(["nope 1", "nope 2", "nope 3", "nope 4"])
    with pytest.raises(ToolCallError) as info:
        await WorkflowRunner(client).run(tools.workflow(), "Weather?")
    assert info.value.last_raw == "nope 4"
    assert info.value.attempts == 4


async def test_max_iterations(tools: Tools, autojump_clock: Any) -> None:
    """A model that never calls the terminal tool hits max_iterations with pending steps."""
    replies = [weather(c) for c in ("A", "B", "C", "D")]
    client = ScriptedClient(replies)
    with pytest.raises(MaxIterationsError) as info:
        await WorkflowRunner(client, max_iterations=4).run(
            tools.workflow(required_steps=[]), "Weather?"
        )
    assert info.value.iterations == 4


async def test_cancel_mid_inference_then_resume(tools: Tools, autojump_clock: Any) -> None:
    """Cancelling during inference raises a resumable error; resume() finishes the run."""
    client = ScriptedClient(
        [weather(), respond("late: sunny"), respond("resumed: sunny")], prefill_s=10
    )
    workflow = tools.workflow()
    async with Session.open(client) as session:
        handle = await session.start(workflow)
        async with trio.open_nursery() as nursery:

            async def cancel_soon() -> None:
                await trio.sleep(15)  # first call done at t=10, second one is in prefill
                handle.cancel()

            nursery.start_soon(cancel_soon)
            with pytest.raises(WorkflowCancelledError) as info:
                await handle.send("Weather?")
        error = info.value
        assert error.completed_steps == ("get_weather",)
        assert error.iteration == 2
        assert client.calls[1].outcome == "cancelled"
        result = await handle.resume()
    assert result.output == "resumed: sunny"
    assert result.iteration == 3


async def test_deadline_mid_tool_leaves_no_task_running(tools: Tools, autojump_clock: Any) -> None:
    """A turn deadline cancels a running async tool; every task spawned during the run exits."""

    tasks = LiveTasks()
    client = ScriptedClient([[ToolCall(tool="slow_lookup", args={"city": "Rome"})]])
    with installed(tasks):
        async with Session.open(client) as session:
            handle = await session.start(tools.workflow(required_steps=[]))
            with pytest.raises(WorkflowCancelledError) as info:
                await handle.send("Weather?", deadline=5)
    assert tools.tool_started.is_set()
    assert info.value.iteration == 1
    assert tasks.alive == set()


async def test_every_turn_gets_the_whole_iteration_budget(
    tools: Tools, autojump_clock: Any
) -> None:
    """max_iterations bounds a turn, not the session: a turn that used all of it is followed
    by turns that get all of it again (a chat daemon's turns must not start exhausted)."""
    replies: list[Any] = []
    for city in ("Paris", "Rome", "Oslo"):
        replies += [weather(city), weather(city + "x"), respond(f"{city}: sunny")]
    client = ScriptedClient(replies)
    async with Session.open(client, max_iterations=3) as session:
        handle = await session.start(tools.workflow())
        outputs = [(await handle.send(f"{c}?")).output for c in ("Paris", "Rome", "Oslo")]
    assert outputs == ["Paris: sunny", "Rome: sunny", "Oslo: sunny"]
    assert len(client.calls) == 9


async def test_multi_turn_continues_history(tools: Tools, autojump_clock: Any) -> None:
    """A second turn sees the first turn's history; tool-call ids stay unique across turns."""
    client = ScriptedClient(
        [weather("Paris"), respond("Paris: sunny"), weather("Rome"), respond("Rome: sunny")]
    )
    async with Session.open(client) as session:
        handle = await session.start(tools.workflow())
        await handle.send("Paris?")
        second = await handle.send("And Rome?")
    assert second.output == "Rome: sunny"
    users = [m.content for m in second.messages if m.type is MessageType.USER_INPUT]
    assert users == ["Paris?", "And Rome?"]
    ids = [c.call_id for m in second.messages for c in (m.tool_calls or ())]
    assert len(ids) == len(set(ids)) == 4


async def test_streaming_and_observation(tools: Tools, autojump_clock: Any) -> None:
    """on_chunk gets deltas and a reset after a rejected attempt; on_message sees every message."""
    client = ScriptedClient(["just chatting", weather(), respond()], token_s=0.1)
    chunks: list[StreamChunk] = []
    seen: list[Message] = []

    async def on_chunk(chunk: StreamChunk) -> None:
        chunks.append(chunk)

    result = await WorkflowRunner(client).run(
        tools.workflow(), "Weather?", on_chunk=on_chunk, on_message=seen.append
    )
    kinds = [type(c).__name__ for c in chunks]
    assert kinds.index("ResetChunk") > kinds.index("TextDeltaChunk")
    assert "".join(c.text for c in chunks if isinstance(c, TextDeltaChunk)) == "just chatting"
    assert sum(isinstance(c, ResetChunk) for c in chunks) == 1
    assert len(seen) >= len(result.messages)


async def test_compaction_keeps_the_loop_going(tools: Tools, autojump_clock: Any) -> None:
    """With a tiny budget the history is compacted between iterations and the run completes."""
    replies: list[Any] = [weather(f"City{i}") for i in range(6)] + [respond("ok, sunny")]
    client = ScriptedClient(replies)
    context = ContextManager(budget_tokens=200, strategy=TieredCompact(keep_recent=1))
    result = await WorkflowRunner(client, context=context).run(tools.workflow(), "Many cities")
    assert result.output == "ok, sunny"
    assert result.stats.compactions >= 1
    last_prompt = client.calls[-1].request.messages
    assert context.estimator.count_messages(last_prompt) < 400


async def test_a_budget_larger_than_the_backend_context_is_clamped_to_it(
    tools: Tools, autojump_clock: Any
) -> None:
    """A context budget over what the backend takes in one prompt compacts at the backend's size.

    Without the clamp the history grows past the server's n_ctx and the backend refuses the call.
    """
    replies: list[Any] = [weather(f"City{i}") for i in range(6)] + [respond("ok, sunny")]
    client = ScriptedClient(replies, context=200)
    context = ContextManager(budget_tokens=100_000, strategy=TieredCompact(keep_recent=1))
    result = await WorkflowRunner(client, context=context).run(tools.workflow(), "Many cities")
    assert result.output == "ok, sunny"
    assert context.budget_tokens == 200
    assert result.stats.compactions >= 1


async def test_a_backend_that_does_not_say_its_context_leaves_the_budget_alone(
    tools: Tools, autojump_clock: Any
) -> None:
    """No reported context length: the configured budget stands and nothing is compacted early."""
    replies: list[Any] = [weather(f"City{i}") for i in range(6)] + [respond("ok, sunny")]
    client = ScriptedClient(replies, context=None)
    context = ContextManager(budget_tokens=100_000, strategy=TieredCompact(keep_recent=1))
    result = await WorkflowRunner(client, context=context).run(tools.workflow(), "Many cities")
    assert result.output == "ok, sunny"
    assert context.budget_tokens == 100_000
    assert result.stats.compactions == 0


async def test_two_workflows_share_the_slot_per_call(tools: Tools, autojump_clock: Any) -> None:
    """While one workflow runs a slow tool, the other's calls use the slot."""
    order: list[str] = []

    def reply(request: Any) -> list[ToolCall]:
        user = request.messages[1].content
        done = sum(1 for m in request.messages if m.type is MessageType.TOOL_RESULT)
        order.append(f"{user}{done}")
        return weather(user) if done == 0 else respond(f"{user}: sunny")

    slow = Tools()
    client = ScriptedClient(reply, prefill_s=1.0)

    async def slow_weather(city: str) -> str:
        await trio.sleep(5)
        return "sunny, light rain"

    from forge_rt.core import ToolDef, ToolSpec

    slow_wf = slow.workflow(
        tools=[ToolDef(spec=ToolSpec(name="get_weather", parameters=CITY), callable=slow_weather)]
    )
    async with Session.open(client) as session, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: session.run(slow_wf, "A"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: session.run(tools.workflow(), "B"))
    # A's tool (5 s) runs while B's two calls use the slot.
    assert order == ["A0", "B0", "B1", "A1"]


async def test_constraint_narrows_to_calls_that_may_run(tools: Tools, autojump_clock: Any) -> None:
    """Constrained decoding leaves out the terminal tool until the required steps are done."""
    from forge_rt.core import JsonSchemaConstraint

    def names(constraint: object) -> set[str]:
        assert isinstance(constraint, JsonSchemaConstraint)
        calls = [o for o in constraint.schema["anyOf"] if o["type"] == "object"]  # not the array
        return {option["properties"]["name"]["const"] for option in calls}

    client = ScriptedClient([weather(), respond("done: sunny")])
    workflow = tools.workflow(constrain="always")
    result = await WorkflowRunner(client).run(workflow, "Weather?")
    assert result.output == "done: sunny"
    first, second = (c.request.constraint for c in client.calls)
    assert names(first) == {"get_weather", "slow_lookup"}
    assert names(second) == {"get_weather", "slow_lookup", "respond"}
    assert result.stats.constraint is not None


async def test_failed_turn_keeps_its_stats(tools: Tools, autojump_clock: Any) -> None:
    """A turn that ends in a typed error still reports what it cost on the handle."""
    client = ScriptedClient(["prose 1", "prose 2", "prose 3", "prose 4"])
    async with Session.open(client) as session:
        handle = await session.start(tools.workflow())
        with pytest.raises(ToolCallError):
            await handle.send("Weather?")
    assert handle.last_stats is not None
    assert handle.last_stats.inferences == 4
    assert handle.last_stats.retries == {"no_call": 3}


async def test_constraint_leaves_out_a_tool_the_model_looped_on(
    tools: Tools, autojump_clock: Any
) -> None:
    """After a loop nudge, the next constrained call cannot be the looping tool again; the
    looping call had succeeded and no step is pending, so only the answer is left."""
    from forge_rt.core import JsonSchemaConstraint

    def names(constraint: object) -> set[str]:
        assert isinstance(constraint, JsonSchemaConstraint)
        calls = [o for o in constraint.schema["anyOf"] if o["type"] == "object"]  # not the array
        return {option["properties"]["name"]["const"] for option in calls}

    client = ScriptedClient([weather(), weather(), weather(), respond("done: sunny")])
    result = await WorkflowRunner(client).run(tools.workflow(constrain="always"), "Weather?")
    assert result.output == "done: sunny"
    assert result.stats.retries == {"loop": 1}
    assert names(client.calls[3].request.constraint) == {"respond"}


async def test_the_last_iteration_may_only_finish_once_the_steps_are_done(
    tools: Tools, autojump_clock: Any
) -> None:
    """With every required step done, the last allowed iteration's constraint admits only the
    terminal tool, so the run ends with an answer instead of MaxIterationsError."""
    from forge_rt.core import JsonSchemaConstraint

    client = ScriptedClient([weather(), weather("Rome"), respond("22C in both")])
    result = await WorkflowRunner(client, max_iterations=3).run(
        tools.workflow(constrain="always"), "Weather?"
    )
    assert result.output == "22C in both"
    constraints = [c.request.constraint for c in client.calls]
    assert all(isinstance(c, JsonSchemaConstraint) for c in constraints)
    last = constraints[-1]
    assert isinstance(last, JsonSchemaConstraint)
    assert {
        o["properties"]["name"]["const"] for o in last.schema["anyOf"] if "properties" in o
    } == {"respond"}


async def test_the_last_iteration_offers_the_answer_even_after_a_coverage_refusal(
    tools: Tools, autojump_clock: Any
) -> None:
    """A coverage refusal leaves the terminal tool out of the next batch; on the last
    iteration it is offered all the same, or the run could only end in MaxIterationsError."""
    from forge_rt.core import JsonSchemaConstraint

    client = ScriptedClient([weather("Oslo"), respond("3C in Oslo"), respond("3C in Oslo")])
    result = await WorkflowRunner(client, max_iterations=3).run(
        tools.workflow(constrain="always"), "Which is warmer right now, Oslo or Cairo?"
    )
    assert result.output == "3C in Oslo"
    assert result.stats.retries == {"invalid_call": 1}  # the coverage refusal
    last = client.calls[-1].request.constraint
    assert isinstance(last, JsonSchemaConstraint)
    assert {
        o["properties"]["name"]["const"] for o in last.schema["anyOf"] if "properties" in o
    } == {"respond"}
