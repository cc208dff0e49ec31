"""The tool policy in the runtime: a denied tool never reaches the model or runs, and a call to
approve waits -- for a callback or the API -- across a cancellation and a "restart"."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from forge_rt.backends.sim import RequestView, SimBackend, SimConfig, SimToolCall
from forge_rt.clients import LlamaServerClient
from forge_rt.core import Message, MessageType, ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.errors import ApprovalNotPendingError, PolicyError, WorkflowCancelledError
from forge_rt.guardrails import Allow, Approve, Deny, Policy
from forge_rt.runtime import ApprovalRequest, Session
from forge_rt.testing import ScriptedClient

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ROOM = {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}


class Home:
    """A weather lookup, a heating switch (to approve) and a purchase (to deny)."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def get_weather(self, city: str) -> str:
        self.ran.append(f"get_weather {city}")
        return f"5C in {city}"

    async def turn_off_heating(self, room: str) -> str:
        self.ran.append(f"turn_off_heating {room}")
        return f"heating off in {room}"

    async def buy_heater(self, room: str) -> str:
        self.ran.append(f"buy_heater {room}")
        return "bought"

    def workflow(self, **kw: Any) -> Workflow:
        fields: dict[str, Any] = {
            "name": "home",
            "tools": [
                ToolDef(
                    spec=ToolSpec(name="get_weather", parameters=CITY),
                    callable=self.get_weather,
                    needs=["network"],
                ),
                ToolDef(
                    spec=ToolSpec(name="turn_off_heating", parameters=ROOM),
                    callable=self.turn_off_heating,
                    needs=["writes_state"],
                    idempotent=False,
                ),
                ToolDef(
                    spec=ToolSpec(name="buy_heater", parameters=ROOM),
                    callable=self.buy_heater,
                    needs=["network", "costs_money"],
                ),
            ],
            "system_prompt_template": "You run the house.",
        }
        fields.update(kw)
        return Workflow(**fields)


POLICY = Policy(
    tools={"turn_off_heating": Approve("Turn off the heating?")},
    capabilities={"costs_money": Deny("this assistant has no budget")},
)


class Recorder:
    """An oracle that replays ``intents`` in order and keeps every request the sim received."""

    def __init__(self, *intents: SimToolCall) -> None:
        self.intents = list(intents)
        self.views: list[RequestView] = []

    def __call__(self, view: RequestView) -> SimToolCall:
        self.views.append(view)
        return self.intents.pop(0)


def _tool_names(view: RequestView) -> set[str]:
    return {t.name for t in view.tools}


async def test_a_denied_tool_is_in_neither_the_prompt_nor_the_constraint() -> None:
    """Every request the backend gets lacks the denied tool, in its tools and its schema."""
    home = Home()
    oracle = Recorder(
        SimToolCall(name="get_weather", arguments={"city": "Oslo"}),
        SimToolCall(name="respond", arguments={"message": "It is 5C."}),
    )
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=oracle)) as sim,
            LlamaServerClient(sim.url) as client,
            Session.open(client, policy=POLICY) as session,
        ):
            result = await session.run(home.workflow(constrain="always"), "Weather in Oslo?")
    assert result.output == "It is 5C."
    assert len(oracle.views) == 2
    for view in oracle.views:
        assert {"get_weather", "turn_off_heating", "respond"} == _tool_names(view)
        assert view.schema is not None
        schema = json.dumps(view.schema)
        assert "get_weather" in schema
        assert "buy_heater" not in schema
    assert home.ran == ["get_weather Oslo"]


async def test_an_invented_call_of_a_denied_tool_is_refused_and_never_runs() -> None:
    """The model calls the withheld tool anyway: it is told the policy's reason, it does not
    run, and the turn goes on."""
    home = Home()
    oracle = Recorder(
        SimToolCall(name="buy_heater", arguments={"room": "attic"}),
        SimToolCall(name="get_weather", arguments={"city": "Oslo"}),
        SimToolCall(name="respond", arguments={"message": "It is 5C in Oslo: wear a sweater."}),
    )
    with trio.fail_after(30):
        async with (
            SimBackend.serve(SimConfig(oracle=oracle)) as sim,
            LlamaServerClient(sim.url) as client,
            Session.open(client, policy=POLICY) as session,
        ):
            result = await session.run(home.workflow(constrain="never"), "Buy a heater.")
    assert result.output == "It is 5C in Oslo: wear a sweater."
    assert [r for r in home.ran if r.startswith("buy_heater")] == []
    refusal = oracle.views[1].messages[-1]
    assert refusal.role == "tool"
    assert refusal.content.startswith(
        "[ToolError] Tool `buy_heater` is not available: the policy denies it (this "
        "assistant has no budget). It was not run."
    )
    assert all("buy_heater" not in _tool_names(v) for v in oracle.views)


@pytest.mark.parametrize(
    ("workflow_fields", "message"),
    [
        pytest.param(
            {"required_steps": ["buy_heater"]},
            r"^workflow 'home': required step 'buy_heater' is denied by the policy",
            id="required-step",
        ),
        pytest.param(
            {"terminal_tool": "buy_heater", "respond_tool": False},
            r"^workflow 'home': every terminal tool \['buy_heater'\] is denied",
            id="only-terminal",
        ),
    ],
)
async def test_denying_what_a_workflow_needs_fails_at_start(
    workflow_fields: dict[str, Any], message: str
) -> None:
    """Session.start raises a PolicyError before any actor runs."""
    client = ScriptedClient([])
    async with Session.open(client, policy=POLICY) as session:
        with pytest.raises(PolicyError, match=message):
            await session.start(Home().workflow(**workflow_fields))
    assert client.calls == []


def _heating_then(answer: str) -> ScriptedClient:
    return ScriptedClient(
        [
            [ToolCall(tool="turn_off_heating", args={"room": "attic"}, call_id="heat-1")],
            [ToolCall(tool="respond", args={"message": answer})],
        ]
    )


def _result_of(messages: tuple[Message, ...], call_id: str) -> str:
    [content] = [m.content for m in messages if m.tool_call_id == call_id]
    return content


async def test_an_approval_callback_says_yes_and_the_call_runs() -> None:
    """The callback gets the request with the policy's question; Allow() runs the call."""
    home = Home()
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> Allow | Deny:
        asked.append(request)
        return Allow()

    async with Session.open(_heating_then("Done."), policy=POLICY, on_approval=approve) as s:
        result = await s.run(home.workflow(), "Turn off the heating in the attic.")
    assert result.output == "Done."
    assert home.ran == ["turn_off_heating attic"]
    [request] = asked
    assert (
        request.tool,
        request.call_id,
        request.args,
    ) == ("turn_off_heating", "heat-1", {"room": "attic"})
    assert (
        request.question,
        request.resumed,
        request.workflow,
    ) == ("Turn off the heating?", False, "home")


async def test_an_approval_callback_says_no_and_the_model_is_told() -> None:
    """Deny(reason) answers the call as declined with that reason; nothing runs, nothing is
    counted as a tool error, and the model carries on."""
    home = Home()

    async def refuse(request: ApprovalRequest) -> Allow | Deny:
        return Deny("someone is sleeping there")

    async with Session.open(
        _heating_then("Left on: you declined turning off the heating."),
        policy=POLICY,
        on_approval=refuse,
    ) as s:
        result = await s.run(home.workflow(), "Turn off the heating in the attic.")
    assert result.output == "Left on: you declined turning off the heating."
    assert home.ran == []
    assert _result_of(result.messages, "heat-1").startswith(
        "[Declined] The call of `turn_off_heating` was declined: the user said no (someone "
        "is sleeping there)."
    )
    assert "turn_off_heating" not in result.completed_steps


async def _approval_via_api(handle: Any, decide: Any) -> Any:
    """Send a turn, answer its approval through the handle once it waits, return the result."""
    outcome: dict[str, Any] = {}
    with trio.fail_after(60):  # on the autojump clock: a wait that is never answered fails
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_turn, handle, outcome)
            request = await handle.next_approval()
            assert (request,) == handle.pending_approvals()
            decide(handle, request)
    assert handle.pending_approvals() == ()
    return outcome["result"]


async def _turn(handle: Any, outcome: dict[str, Any]) -> None:
    outcome["result"] = await handle.send("Turn off the heating in the attic.")


async def test_the_api_approves_a_waiting_call(autojump_clock: object) -> None:
    """Without a callback the call waits; approve(call_id) from the handle lets it run."""
    home = Home()
    async with Session.open(_heating_then("Done."), policy=POLICY) as session:
        handle = await session.start(home.workflow())
        result = await _approval_via_api(handle, lambda h, r: h.approve(r.call_id))
    assert result.output == "Done."
    assert home.ran == ["turn_off_heating attic"]


async def test_the_api_denies_a_waiting_call(autojump_clock: object) -> None:
    """deny(call_id, reason) from the handle declines the call with that reason."""
    home = Home()
    async with Session.open(
        _heating_then("Left on: you declined turning off the heating."), policy=POLICY
    ) as session:
        handle = await session.start(home.workflow())
        result = await _approval_via_api(handle, lambda h, r: h.deny(r.call_id, "too cold"))
    assert home.ran == []
    assert "the user said no (too cold)" in _result_of(result.messages, "heat-1")


async def test_answering_a_call_that_does_not_wait_is_an_error() -> None:
    """approve() with an id nothing waits for raises ApprovalNotPendingError."""
    async with Session.open(ScriptedClient([]), policy=POLICY) as session:
        handle = await session.start(Home().workflow())
        with pytest.raises(ApprovalNotPendingError, match=r"no call 'nope' is waiting"):
            handle.approve("nope")


async def test_an_approval_survives_a_restart(autojump_clock: object) -> None:
    """A turn cancelled while it waits for approval, resumed in a new session from the old
    one's state, waits for the same call again; approved there, it runs once."""
    home = Home()
    workflow = home.workflow()
    error = await _cancelled_while_waiting(workflow)
    assert home.ran == []
    assert "heat-1" not in {m.tool_call_id for m in error.messages}

    # The "restart": a new session and client, seeded with what the old one left.
    client = ScriptedClient([[ToolCall(tool="respond", args={"message": "Done."})]])
    with trio.fail_after(60):
        async with Session.open(client, policy=POLICY) as session:
            handle = await session.start(workflow, resume_from=error)
            outcome: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:

                async def resume() -> None:
                    outcome["result"] = await handle.resume()

                nursery.start_soon(resume)
                request = await handle.next_approval()
                assert (request.call_id, request.resumed) == ("heat-1", True)
                handle.approve(request.call_id)
    assert outcome["result"].output == "Done."
    assert home.ran == ["turn_off_heating attic"]
    assert len(client.calls) == 1  # the wait cost no inference


async def _cancelled_while_waiting(workflow: Workflow) -> WorkflowCancelledError:
    """A turn of ``workflow`` under POLICY, cancelled while its heating call awaits approval."""
    with trio.fail_after(60):
        async with Session.open(_heating_then("unused"), policy=POLICY) as session:
            handle = await session.start(workflow)
            async with trio.open_nursery() as nursery:

                async def cancel_when_waiting() -> None:
                    await handle.next_approval()
                    handle.cancel()

                nursery.start_soon(cancel_when_waiting)
                with pytest.raises(WorkflowCancelledError) as info:
                    await handle.send("Turn off the heating in the attic.")
    return info.value


async def test_a_resumed_call_of_a_tool_now_denied_is_declined(autojump_clock: object) -> None:
    """A history left with an unanswered call of a tool the new policy denies: the call is
    answered declined with the policy's reason, never run."""
    home = Home()
    error = await _cancelled_while_waiting(home.workflow())
    client = ScriptedClient([[ToolCall(tool="respond", args={"message": "Cannot."})]])
    deny = Policy(tools={"turn_off_heating": Deny("heating is manual now")})
    with trio.fail_after(60):
        async with Session.open(client, policy=deny) as session:
            handle = await session.start(home.workflow(), resume_from=error)
            result = await handle.resume()
    assert home.ran == []
    assert result.output == "Cannot."
    assert "the policy denies it (heating is manual now)" in _result_of(result.messages, "heat-1")
    assert [m.type for m in result.messages if m.tool_call_id == "heat-1"] == [
        MessageType.TOOL_RESULT
    ]


async def test_a_call_answered_once_cannot_be_answered_again(autojump_clock: object) -> None:
    """After approve(), the call no longer waits: a second answer is ApprovalNotPendingError."""
    home = Home()
    async with Session.open(_heating_then("Done."), policy=POLICY) as session:
        handle = await session.start(home.workflow())

        def twice(h: Any, r: ApprovalRequest) -> None:
            h.approve(r.call_id)
            assert h.pending_approvals() == ()
            with pytest.raises(ApprovalNotPendingError, match=r"no call 'heat-1' is waiting"):
                h.deny(r.call_id, "changed my mind")

        result = await _approval_via_api(handle, twice)
    assert result.output == "Done."
    assert home.ran == ["turn_off_heating attic"]
