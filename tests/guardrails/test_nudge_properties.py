"""Property: no correction text is ever empty or ends in a bare colon, whatever the tool or call."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_rt.core import ArgumentError, Prerequisite, ToolCall, ToolSpec
from forge_rt.errors import ToolResolutionError
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    RetryCause,
    ToolResult,
    bad_args_nudge,
    held_back_nudge,
    loop_nudge,
    premature_terminal_nudge,
    prerequisite_nudge,
    retry_nudge,
    unknown_tool_nudge,
)
from forge_rt.guardrails._nudges import (
    ignored_args_note,
    markup_answer_nudge,
    next_step_text,
    repeat_note,
    resolution_text,
    superseded_answer_nudge,
    tool_error_text,
)

NAME = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
# Error messages as tools raise them, the awkward ones included: empty, a bare colon, a hint.
MESSAGE = st.sampled_from(["", ":", "no such order:", "no such order; use KVX-0017", " \n "]) | TEXT
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(), TEXT)
VALUE = st.recursive(
    SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAME, inner, max_size=3)
)


@st.composite
def property_schemas(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "array", "enum"]))
    schema: dict[str, Any]
    if kind == "enum":
        schema = {"enum": draw(st.lists(NAME, min_size=1, max_size=3, unique=True))}
    elif kind == "array":
        schema = {"type": "array", "items": {"type": "string"}}
    else:
        schema = {"type": kind}
    if kind == "integer" and draw(st.booleans()):
        schema.update(minimum=1, maximum=4)
    if kind == "string" and draw(st.booleans()):
        schema["pattern"] = r"^\d{4}$"
    if draw(st.booleans()):
        schema["description"] = draw(TEXT)
    return schema


@st.composite
def tools(draw: st.DrawFn) -> ToolSpec:
    props = draw(st.dictionaries(NAME, property_schemas(), max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return ToolSpec(
        name=draw(NAME),
        description=draw(TEXT),
        parameters={"type": "object", "properties": props, "required": required},
    )


def _says_something(text: str) -> None:
    """The property itself: text is there, it does not end in ':', and neither does its first
    line (what a log line or an exception shows of it); no line of it is blank."""
    lines = text.strip().splitlines()
    assert lines, "empty correction text"
    assert not text.rstrip().endswith(":"), f"ends in a bare colon: {text!r}"
    assert not lines[0].rstrip().endswith(":"), f"first line ends in a bare colon: {text!r}"
    assert all(line.strip() for line in lines), f"blank line inside: {text!r}"


@settings(max_examples=150, deadline=None)
@given(spec=tools(), args=st.dictionaries(NAME, VALUE, max_size=5))
def test_every_correction_of_a_random_call_says_something(
    spec: ToolSpec, args: dict[str, Any]
) -> None:
    """Whatever a random call of a random tool gets back -- an argument error, a hold-back note,
    a refusal, a loop nudge, an ignored-argument note -- says something."""
    other = ToolSpec(name=f"{spec.name}_other", parameters={"type": "object", "properties": {}})
    guard = Guardrails(
        [spec, other],
        required_steps=[other.name],
        respond_tool=True,
        options=GuardrailOptions(rescue=False, max_retries=10, max_premature=10, loop_repeats=2),
    )
    calls = [
        ToolCall(tool=spec.name, args=args, call_id="a"),
        ToolCall(tool=other.name, args={}, call_id="b"),
        ToolCall(tool="respond", args={"message": "done"}, call_id="c"),
    ]
    for _ in range(3):
        action = guard.check(calls)
        for message in action.messages():
            if message.transient and message.content:
                _says_something(message.content)
        if isinstance(action, Execute):
            results = [ToolResult(call=c, output="ok") for c in action.calls]
            for message in guard.record(results).messages:
                _says_something(message.content)


@settings(max_examples=100, deadline=None)
@given(
    spec=tools(),
    tier=st.integers(1, 6),
    names=st.lists(NAME, min_size=1, max_size=3, unique=True),
    running=st.lists(NAME, max_size=2),
    message=MESSAGE,
    cause=st.none() | st.sampled_from(list(RetryCause)),
    args=st.dictionaries(NAME, VALUE, max_size=3),
)
def test_every_nudge_builder_says_something(
    spec: ToolSpec,
    tier: int,
    names: list[str],
    running: list[str],
    message: str,
    cause: RetryCause | None,
    args: dict[str, Any],
) -> None:
    """Each builder, fed random tools, names, tiers, arguments and (empty) error messages."""
    prereqs = [Prerequisite(tool=n) for n in names]
    texts = [
        retry_nudge(tier, [spec], cause=cause, fragment=message or None),
        unknown_tool_nudge(message or "x", [spec]),
        bad_args_nudge(spec, [ArgumentError("$", message)], args=args, ignored=args),
        bad_args_nudge(spec, [ArgumentError(f"$.{names[0]}", "Expected `int`")], args=args),
        premature_terminal_nudge(tier, spec.name, names, running=running),
        prerequisite_nudge(tier, spec.name, prereqs, args=args, running=running),
        loop_nudge(spec.name, args, tier, next_step_text(spec, finish=True)),
        held_back_nudge(spec.name, names),
        tool_error_text(spec.name, ValueError(message)),
        resolution_text(spec.name, ToolResolutionError(message)),
        repeat_note(spec.name, next_step_text(spec, finish=False)),
        repeat_note(spec.name, ""),
        next_step_text(spec, finish=tier % 2 == 0),
        ignored_args_note(spec, names),
        superseded_answer_nudge(names, [message], spec, args, names[0]),
        markup_answer_nudge(message),
    ]
    for text in texts:
        _says_something(text)
