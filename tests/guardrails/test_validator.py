"""ResponseValidator: a reply becomes runnable calls, per-call corrections, or a retry."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, Field

from forge_rt.core import (
    LLMResponse,
    MessageType,
    Role,
    TextResponse,
    ToolArgumentError,
    ToolCall,
    ToolSpec,
)
from forge_rt.guardrails import ResponseValidator, RetryCause, collapse_calls
from forge_rt.guardrails._placeholders import EchoCorpus
from forge_rt.guardrails._validator import argument_errors


class SalesArgs(BaseModel):
    year: int = Field(ge=2000)
    quarter: int = Field(ge=1, le=4)


SALES = ToolSpec(name="fetch_rainfall_data", description="Rainfall figures", parameters=SalesArgs)
REPORT = ToolSpec(
    name="report",
    parameters={
        "type": "object",
        "properties": {"findings": {"type": "string"}},
        "required": ["findings"],
    },
)
HTML = ToolSpec(
    name="render",
    parameters={"type": "object", "properties": {"html": {"type": "string"}}},
)
TOOLS = [SALES, REPORT, HTML]


@pytest.fixture
def validator() -> ResponseValidator:
    return ResponseValidator(TOOLS, rescue=False)


def _call(tool: str, call_id: str = "call_1", **args: object) -> ToolCall:
    return ToolCall(tool=tool, args=dict(args), call_id=call_id)


def test_valid_native_calls_pass_with_coerced_arguments(validator: ResponseValidator) -> None:
    """Valid calls come back runnable, arguments coerced by the schema ("2031" -> 2031)."""
    result = validator.validate([_call("fetch_rainfall_data", year="2031", quarter=4)])
    assert result.ok
    assert [c.args for c in result.calls] == [{"year": 2031, "quarter": 4}]
    assert result.calls[0].call_id == "call_1"


def test_unknown_tool_gets_tool_channel_error_listing_real_tools(
    validator: ResponseValidator,
) -> None:
    """A call of a tool that does not exist gets a tool-channel error paired with the call."""
    result = validator.validate([_call("weather", city="Turku")])
    assert not result.needs_retry
    [error] = result.errors
    assert (error.role, error.kind, error.call_id, error.tool) == (
        Role.TOOL,
        MessageType.RETRY_NUDGE,
        "call_1",
        "weather",
    )
    assert "Available tools: `fetch_rainfall_data`, `report`, `render`" in error.content


def test_wrong_type_is_reported_msgspec_style_with_example(validator: ResponseValidator) -> None:
    """A wrong argument type is reported as expected/got/where; the call shown keeps the model's
    valid values and describes the field it must fill, never with a made-up value."""
    result = validator.validate([_call("fetch_rainfall_data", year="last year", quarter=4)])
    [error] = result.errors
    assert "- Expected `int`, got `str` - at `$.year`" in error.content
    assert "- `year` needs a real value: an integer >= 2000." in error.content
    assert error.content.endswith(
        'the rest as shown: {"name": "fetch_rainfall_data", "arguments": {"quarter": 4}}'
    )


def test_missing_field_is_reported_at_its_object(validator: ResponseValidator) -> None:
    """A missing required argument names the field, located at its parent object."""
    [error] = validator.validate([_call("fetch_rainfall_data", year=2031)]).errors
    assert "- Object missing required field `quarter` - at `$`" in error.content


def test_bound_violation_is_reported(validator: ResponseValidator) -> None:
    """A value outside the schema's bounds says which bound."""
    [error] = validator.validate([_call("fetch_rainfall_data", year=2031, quarter=7)]).errors
    assert "- Expected `int` <= 4 - at `$.quarter`" in error.content


def test_schema_pasted_into_arguments_is_rejected_with_expected_shape(
    validator: ResponseValidator,
) -> None:
    """Arguments that are the tool's own schema (seen from Qwen 0.5B) are ignored and named; the
    call is rejected for the real arguments it lacks, each described."""
    polluted = {
        "properties": {"quarter": {"title": "Quarter", "type": "integer"}},
        "required": ["quarter", "year"],
        "title": "SalesArgs",
        "type": "object",
    }
    call = ToolCall(tool="fetch_rainfall_data", args=polluted, call_id="call_1")
    [error] = validator.validate([call]).errors
    for key in ("properties", "required", "title", "type"):
        assert (
            f"`{key}` is a JSON-schema keyword copied from the tool definition, not an argument"
            f" - at `$.{key}`"
        ) in error.content
    assert "Object missing required field `year`" in error.content
    assert "- `quarter` needs a real value: an integer from 1 to 4." in error.content
    # No example call: it would hold no arguments, a call the tool refuses.
    assert error.content.endswith("Send the call again with a real value for `year`, `quarter`.")


def test_schema_keywords_beside_real_arguments_are_dropped_and_the_call_runs(
    validator: ResponseValidator,
) -> None:
    """Schema keywords pasted beside valid arguments are dropped, not a reason to refuse."""
    call = _call("fetch_rainfall_data", year=2031, quarter=4, title="SalesArgs", type="object")
    result = validator.validate([call])
    assert (result.ok, result.calls[0].args) == (True, {"year": 2031, "quarter": 4})
    assert result.ignored == {"call_1": ("title", "type")}


def test_unknown_argument_is_dropped_and_named(validator: ResponseValidator) -> None:
    """An argument the schema lacks (Qwen 0.5B's `patient_id`) is dropped; the call runs."""
    result = validator.validate([_call("report", findings="ok", patient_id="p-7")])
    assert (result.ok, result.calls[0].args, result.ignored) == (
        True,
        {"findings": "ok"},
        {"call_1": ("patient_id",)},
    )


def test_a_misnamed_required_argument_is_renamed_in_the_call_shown(
    validator: ResponseValidator,
) -> None:
    """A required field sent under another name is still missing, and the shown call renames it."""
    [error] = validator.validate([_call("report", summary="Q4 was up 8%")]).errors
    assert "- `summary` is not an argument of `report` - at `$.summary` (read as `findings`)" in (
        error.content
    )
    assert error.content.endswith(
        'Send this corrected call: {"name": "report", "arguments": {"findings": "Q4 was up 8%"}}'
    )


def test_schema_keyword_that_is_a_real_parameter_is_accepted() -> None:
    """A tool whose parameter is called ``title`` may be called with it."""
    spec = ToolSpec(
        name="create_page",
        parameters={"type": "object", "properties": {"title": {"type": "string"}}},
    )
    result = ResponseValidator([spec], rescue=False).validate([_call("create_page", title="Home")])
    assert result.ok


@pytest.mark.parametrize(
    "value",
    ["<tool_response></tool_response>", 'x" + "<tool_response>data</tool_response>'],
    ids=["empty-echo", "concatenated-echo"],
)
def test_echoed_tool_response_markup_is_rejected(validator: ResponseValidator, value: str) -> None:
    """Argument values that echo <tool_response> markup are not real content."""
    [error] = validator.validate([_call("report", findings=value)]).errors
    assert "- Expected real content, got echoed <tool_response> markup - at `$.findings`" in (
        error.content
    )


def test_bracketed_instruction_is_rejected(validator: ResponseValidator) -> None:
    """A bracketed instruction accepted as a report was measured on Qwen 0.5B; it is refused."""
    value = "[Your complete profile report, in plain text]."
    [error] = validator.validate([_call("report", findings=value)]).errors
    assert (
        f'- Expected a real value, got a placeholder in square brackets ("{value}"); write the '
        "content itself - at `$.findings`"
    ) in error.content
    assert error.content.startswith("[ArgumentError] `report` was not run: fix `findings`.")


def test_copied_example_placeholder_is_rejected(validator: ResponseValidator) -> None:
    """The `<findings>` placeholder our own example shows is not accepted as a value."""
    [error] = validator.validate([_call("report", findings="<findings>")]).errors
    assert "got the placeholder '<findings>' - at `$.findings`" in error.content


def test_angle_bracket_value_for_another_name_is_accepted(validator: ResponseValidator) -> None:
    """Markup that is not a placeholder for its own field (an HTML tag) passes."""
    assert validator.validate([_call("render", html="<div>")]).ok


def test_each_failing_call_gets_its_own_error(validator: ResponseValidator) -> None:
    """In a batch, one error per failing call, paired by call_id; valid calls get none."""
    result = validator.validate(
        [
            _call("weather", "call_a"),
            _call("report", "call_b", findings="ok"),
            _call("fetch_rainfall_data", "call_c", year="x", quarter=1),
        ]
    )
    assert [e.call_id for e in result.errors] == ["call_a", "call_c"]
    assert [c.call_id for c in result.calls] == ["call_a", "call_b", "call_c"]
    assert result.failed_ids == frozenset({"call_a", "call_c"})


def test_identical_calls_in_one_reply_are_collapsed(validator: ResponseValidator) -> None:
    """A call repeated 41 times in one reply runs once; the drop count is reported."""
    calls = [_call("report", f"call_{i}", findings="same") for i in range(41)]
    result = validator.validate(calls)
    assert [c.call_id for c in result.calls] == ["call_0"]
    assert result.collapsed == 40


def test_collapse_ignores_argument_order_but_not_values() -> None:
    """Same arguments in another key order collapse; different values do not."""
    calls = [
        ToolCall(tool="t", args={"a": 1, "b": 2}, call_id="c1"),
        ToolCall(tool="t", args={"b": 2, "a": 1}, call_id="c2"),
        ToolCall(tool="t", args={"a": 1, "b": 3}, call_id="c3"),
    ]
    kept, dropped = collapse_calls(calls)
    assert ([c.call_id for c in kept], dropped) == (["c1", "c3"], 1)


def test_repeated_bad_call_gets_one_error(validator: ResponseValidator) -> None:
    """Collapsing happens before validation: 16 copies of a bad call give one error."""
    result = validator.validate([_call("weather", f"c{i}") for i in range(16)])
    assert (len(result.errors), result.collapsed) == (1, 15)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("", RetryCause.EMPTY),
        ("   \n", RetryCause.EMPTY),
        ("The sales were good this year.", RetryCause.PROSE),
        ("<tool_response>42</tool_response>", RetryCause.ECHO),
        ("Please try again with a valid tool call.", RetryCause.PROSE),
        ('{"name": "report", "arguments": {"findings": "x"', RetryCause.BROKEN_CALL),
    ],
    ids=["empty", "blank", "prose", "echo-markup", "nudge-like-but-never-shown", "broken-json"],
)
def test_text_without_rescue_needs_retry_with_cause(
    validator: ResponseValidator, text: str, cause: RetryCause
) -> None:
    """With rescue off, a text reply needs a retry, and the cause says what kind of text."""
    result = validator.validate(TextResponse(content=text))
    assert (result.needs_retry, result.cause, result.raw, result.calls) == (True, cause, text, [])


def test_text_that_copies_a_shown_correction_is_an_echo(validator: ResponseValidator) -> None:
    """An echo is told from prose by the corrections the model was shown, not by phrases."""
    echoes = EchoCorpus()
    echoes.add("Your reply held no call. Answer with exactly one tool call of the tools listed.")
    copied = TextResponse(content="Answer with exactly one tool call of the tools listed.")
    assert validator.validate(copied, echoes=echoes).cause is RetryCause.ECHO
    assert validator.validate(copied).cause is RetryCause.PROSE


def test_text_holding_the_callers_guardrail_marker_is_an_echo() -> None:
    """A caller that marks its guardrails' text (the proxy) has text holding a marker read as
    an echo, though this validator never showed it."""
    spec = ToolSpec(name="t", parameters={"type": "object", "properties": {}})
    marked = ResponseValidator([spec], rescue=False, markers=re.compile(re.escape("[Hint#7]")))
    text = TextResponse(content="[Hint#7] call a tool")
    assert marked.validate(text).cause is RetryCause.ECHO
    plain = ResponseValidator([spec], rescue=False)
    assert plain.validate(text).cause is RetryCause.PROSE


def test_llm_response_with_native_calls_keeps_prose(validator: ResponseValidator) -> None:
    """An LLMResponse's native calls are validated; its text is kept as the calls' prose."""
    response = LLMResponse(
        result=[_call("report", findings="done")], raw_text="Here is the report."
    )
    result = validator.validate(response)
    assert (result.ok, result.text, result.rescued) == (True, "Here is the report.", False)


def test_llm_response_text_uses_raw_text(validator: ResponseValidator) -> None:
    """A text LLMResponse is judged on its raw text as received."""
    response = LLMResponse(result=TextResponse(content="hello"), raw_text="hello")
    result = validator.validate(response)
    assert (result.needs_retry, result.raw, result.cause) == (True, "hello", RetryCause.PROSE)


def test_reply_cut_off_at_token_limit_is_reported_as_truncated(
    validator: ResponseValidator,
) -> None:
    """A callless reply that hit max_tokens is retried as truncated, not as broken JSON."""
    text = '{"name": "report", "arguments": {"findings": "Q4 was'
    response = LLMResponse(result=TextResponse(content=text), raw_text=text, finish_reason="length")
    result = validator.validate(response)
    assert (result.needs_retry, result.cause) == (True, RetryCause.TRUNCATED)


def test_empty_native_call_list_needs_retry(validator: ResponseValidator) -> None:
    """A reply with an empty call list is a reply without a call."""
    assert validator.validate([]).needs_retry


def test_reasoning_is_taken_from_native_calls(validator: ResponseValidator) -> None:
    """Reasoning attached to a native call is surfaced on the result."""
    call = ToolCall(tool="report", args={"findings": "x"}, call_id="c", reasoning="think")
    assert validator.validate([call]).reasoning == "think"


def test_duplicate_tool_names_are_rejected() -> None:
    """Two tools with one name are a definition bug."""
    with pytest.raises(ValueError, match=r"^tool 'report' is given twice"):
        ResponseValidator([REPORT, REPORT])


def test_no_tools_is_rejected() -> None:
    """A validator needs something to validate against."""
    with pytest.raises(ValueError, match=r"^ResponseValidator needs at least one tool$"):
        ResponseValidator([])


def test_argument_errors_reword_pydantic_errors() -> None:
    """Pydantic's errors are re-worded msgspec-style; an unknown key is not one of them."""
    with pytest.raises(ToolArgumentError) as info:
        SALES.validate_args({"year": "x", "quarter": 1, "colour": "red"})
    rendered = [e.render() for e in argument_errors(info.value)]
    assert rendered == ["Expected `int`, got `str` - at `$.year`"]


def test_calls_that_differ_only_in_ignored_arguments_run_once(validator: ResponseValidator) -> None:
    """Two calls that are the same once their unknown arguments are dropped are collapsed."""
    result = validator.validate(
        [
            _call("report", "call_a", findings="same", patient_id="p1"),
            _call("report", "call_b", findings="same", patient_id="p2"),
        ]
    )
    assert ([c.call_id for c in result.calls], result.collapsed) == (["call_a"], 1)


def test_an_answer_opened_with_tool_response_markup_keeps_the_answer(
    validator: ResponseValidator,
) -> None:
    """Seen on the real 0.5B: "<tool_response>The weather ..." is the answer with a stray tag;
    the tag at the ends is dropped and the call runs with the rest."""
    result = validator.validate(
        [_call("report", findings="<tool_response>Bergen is 19C and sunny.</tool_response>")]
    )
    assert result.errors == []
    assert [c.args for c in result.calls] == [{"findings": "Bergen is 19C and sunny."}]


@pytest.mark.parametrize("finish", ["repetition", "length"])
@pytest.mark.parametrize("newline", ["\\n", "\n", " "])
def test_a_reply_cut_while_copying_a_note_keeps_the_result_it_copied(
    finish: str, newline: str
) -> None:
    """The real 0.5B relayed "Hobart: 253,000 people" and went on into the [Note] appended to
    that result until the repetition stop: the value is what it copied before the note."""
    note = "[Note] You already called `get_resident_count` with these arguments; the result is the same"
    text = '{"name": "report", "arguments": {"findings": "Hobart: 253,000 people' + (
        (newline + note) * 4
    )
    response = LLMResponse(result=TextResponse(content=text), raw_text=text, finish_reason=finish)
    result = ResponseValidator(TOOLS, rescue=True).validate(response)
    assert not result.needs_retry
    assert [(c.tool, c.args) for c in result.calls] == [
        ("report", {"findings": "Hobart: 253,000 people"})
    ]


def test_a_reply_cut_without_a_note_is_still_retried_as_cut() -> None:
    text = '{"name": "report", "arguments": {"findings": "Q4 was'
    response = LLMResponse(
        result=TextResponse(content=text), raw_text=text, finish_reason="repetition"
    )
    result = ResponseValidator(TOOLS, rescue=True).validate(response)
    assert (result.needs_retry, result.cause) == (True, RetryCause.REPEATED)
