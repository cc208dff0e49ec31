"""A call that changes records, made with a name found nowhere, is refused (``invented_writes``)."""

from __future__ import annotations

from typing import Any

from forge_rt.core import LLMResponse, ToolCall, ToolSpec
from forge_rt.errors import ToolCallError
from forge_rt.guardrails import Execute, Fatal, GuardrailOptions, Guardrails, ToolErrors, ToolResult

RESERVE = ToolSpec(
    name="reserve_kayak",
    description="Reserve a kayak for someone.",
    parameters={
        "type": "object",
        "properties": {
            "renter": {"type": "string"},
            "hull": {"type": "string", "enum": ["single", "tandem"]},
            "hours": {"type": "integer"},
            "remark": {"type": "string"},
        },
        "required": ["renter", "hull", "hours"],
    },
)
FIND = ToolSpec(
    name="find_member",
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
)


def _guard(request: str, **options: Any) -> Guardrails:
    guard = Guardrails(
        [RESERVE, FIND],
        respond_tool=True,
        writes=["reserve_kayak"],
        options=GuardrailOptions(invented_writes=True, **options),
    )
    guard.new_turn(request)
    return guard


def _reply(guard: Guardrails, tool: str, **args: Any) -> object:
    return guard.check(LLMResponse(result=[ToolCall(tool=tool, args=args)]))


def test_a_write_for_someone_no_one_named_is_refused_every_time() -> None:
    guard = _guard("What is the weather on the lake?", max_retries=2)
    for _ in range(2):
        refused = _reply(guard, "reserve_kayak", renter="Jane Roe", hull="single", hours=2)
        assert isinstance(refused, ToolErrors)
        assert refused.rule == "invented_writes"
        (nudge,) = refused.errors
        assert 'renter="Jane Roe"' in nudge.content
        assert "reserve_kayak changes records" in nudge.content
    ended = _reply(guard, "reserve_kayak", renter="Jane Roe", hull="single", hours=2)
    assert isinstance(ended, Fatal)
    assert isinstance(ended.error, ToolCallError)
    assert ended.error.cause == "invented_write"


def test_a_write_with_the_requests_own_name_runs() -> None:
    guard = _guard("Reserve a tandem kayak for Odile Marchetti, 3 hours.")
    action = _reply(guard, "reserve_kayak", renter="Odile Marchetti", hull="tandem", hours=3)
    assert isinstance(action, Execute)


def test_a_write_with_a_name_a_result_gave_runs() -> None:
    guard = _guard("Reserve a single kayak for member M-31 for an hour.")
    found = _reply(guard, "find_member", name="M-31")
    assert isinstance(found, Execute)
    guard.record([ToolResult(call=found.calls[0], output="M-31: Tavi Okonkwo")])
    action = _reply(guard, "reserve_kayak", renter="Tavi Okonkwo", hull="single", hours=1)
    assert isinstance(action, Execute)


def test_numbers_enum_choices_and_composed_text_are_not_names() -> None:
    """Hours may be worked out, the hull is the schema's own choice, a remark is composed."""
    guard = _guard("Reserve a kayak for Odile Marchetti.")
    action = _reply(
        guard,
        "reserve_kayak",
        renter="Odile Marchetti",
        hull="tandem",
        hours=7,
        remark="bring a spare paddle please",
    )
    assert isinstance(action, Execute)


def test_a_tool_that_changes_nothing_is_not_judged_here() -> None:
    guard = _guard("What is the weather on the lake?")
    assert isinstance(_reply(guard, "find_member", name="Jane Roe"), Execute)


def test_off_by_default_until_judged_on_dev() -> None:
    assert not GuardrailOptions().invented_writes
    guard = Guardrails([RESERVE], respond_tool=True, writes=["reserve_kayak"])
    guard.new_turn("What is the weather on the lake?")
    action = _reply(guard, "reserve_kayak", renter="Jane Roe", hull="single", hours=2)
    assert isinstance(action, Execute)
