"""A write the model asks for twice in a turn runs once: the second call is answered with the
first one's result (the rule ``answered_calls``), so a booking is not made twice."""

from __future__ import annotations

import trio

from forge_rt.core import ToolCall, ToolDef, ToolSpec, Workflow
from forge_rt.runtime import Session
from forge_rt.testing import Reply, ScriptedClient

SEATS = {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}


def _workflow(booked: list[int]) -> Workflow:
    def book_ferry(seats: int) -> str:
        booked.append(seats)
        return f"ferry booking FB-{len(booked)}: {seats} seats"

    return Workflow(
        name="ferry",
        tools=[
            ToolDef(
                spec=ToolSpec(name="book_ferry", parameters=SEATS),
                callable=book_ferry,
                idempotent=False,
            )
        ],
        required_steps=["book_ferry"],
        system_prompt_template="You book ferries.",
        constrain="never",
    )


def _call(tool: str, **args: object) -> list[ToolCall]:
    return [ToolCall(tool=tool, args=args)]


async def test_the_same_booking_asked_twice_is_made_once() -> None:
    booked: list[int] = []
    replies: list[Reply] = [
        _call("book_ferry", seats=3),
        _call("book_ferry", seats=3),
        _call("respond", message="Booked FB-1 for 3 seats."),
    ]
    with trio.fail_after(10):
        async with Session.open(ScriptedClient(replies)) as session:
            result = await session.run(_workflow(booked), "Book the ferry for 3 seats.")
    assert booked == [3]
    assert result.output == "Booked FB-1 for 3 seats."
