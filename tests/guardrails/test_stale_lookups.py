"""Lookups that only repeat what already succeeded leave the answer as the one thing to call."""

from __future__ import annotations

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import Execute, GuardrailOptions, Guardrails, ToolResult
from forge_rt.guardrails._facade import STALE_PATIENCE


def _tool(name: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        parameters={
            "type": "object",
            "properties": {"parcel_id": {"type": "string"}},
            "required": ["parcel_id"],
        },
    )


def _guard(**kw: object) -> Guardrails:
    return Guardrails(
        [_tool("parcel_status"), _tool("parcel_eta")],
        respond_tool=True,
        options=GuardrailOptions(**kw),  # type: ignore[arg-type]
    )


def _run(guard: Guardrails, tool: str, parcel: str = "KVX-3318") -> None:
    action = guard.check([ToolCall(tool=tool, args={"parcel_id": parcel})])
    assert isinstance(action, Execute), action
    guard.record([ToolResult(call=action.calls[0], output=f"{tool} of {parcel}: ok")])


def _callable(guard: Guardrails) -> set[str]:
    return {t.name for t in guard.callable_now()}


def test_alternating_repeats_of_done_lookups_leave_only_the_answer() -> None:
    """The real 0.5B alternated parcel_status and parcel_eta for KVX-3318 for 12 iterations;
    two batches in a row that only repeat succeeded calls leave only respond callable."""
    guard = _guard()
    _run(guard, "parcel_status")
    _run(guard, "parcel_eta")
    everything = {"parcel_status", "parcel_eta", "respond"}
    assert _callable(guard) == everything
    _run(guard, "parcel_status")  # a repeat: 1
    assert _callable(guard) == everything
    _run(guard, "parcel_eta")  # a repeat: 2
    assert STALE_PATIENCE == 2
    assert _callable(guard) == {"respond"}


def test_a_new_call_between_repeats_starts_the_count_over() -> None:
    guard = _guard()
    _run(guard, "parcel_status")
    _run(guard, "parcel_status")
    _run(guard, "parcel_eta")  # new: what it returns is news
    _run(guard, "parcel_status")
    assert "parcel_status" in _callable(guard)


def test_a_new_turn_starts_the_count_over() -> None:
    guard = _guard()
    for tool in ("parcel_status", "parcel_eta", "parcel_status", "parcel_eta"):
        _run(guard, tool)
    assert _callable(guard) == {"respond"}
    guard.new_turn("When will it arrive?")
    assert "parcel_eta" in _callable(guard)
