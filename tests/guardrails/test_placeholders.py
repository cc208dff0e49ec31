"""Placeholder and echo detection: refuse values that stand in for content, keep real content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import (
    Execute,
    GuardrailOptions,
    Guardrails,
    ResponseValidator,
    ToolErrors,
    ToolResult,
    rescue,
)
from forge_rt.guardrails._placeholders import EchoCorpus, normalise, placeholder_errors, prose

DATA = Path("/work/shared/data/qwen25coder_raw_outputs.jsonl")

REPORT = ToolSpec(
    name="report",
    description="File the final report.",
    parameters={
        "type": "object",
        "properties": {
            "report": {
                "type": "string",
                "description": "Your complete profile report, in plain text.",
            }
        },
        "required": ["report"],
    },
)
FORECAST = ToolSpec(
    name="get_forecast",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city, e.g. San Francisco"}},
        "required": ["city"],
    },
)
NAMES = frozenset({"report", "city"})


def _problem(value: str, echoes: EchoCorpus | None = None) -> str | None:
    descriptions = [normalise("Your complete profile report, in plain text.")]
    errors = placeholder_errors(
        {"report": value}, descriptions=descriptions, names=NAMES, echoes=echoes
    )
    return errors[0].message if errors else None


@pytest.mark.parametrize(
    ("value", "phrase"),
    [
        ("[Your complete profile report, in plain text].", "placeholder in square brackets"),
        ("[Summary of the findings]", "placeholder in square brackets"),
        ("[TODO]", "placeholder in square brackets"),
        ("[city]", "placeholder in square brackets"),
        ("<city>", "got the placeholder '<city>'"),
        ("<fetched_content>", "got the placeholder '<fetched_content>'"),
        ("<your name>", "got the placeholder '<your name>'"),
        ("Your message here", "placeholder text"),
        ("Insert your answer here.", "placeholder text"),
        ("Your answer goes here", "placeholder text"),
        ("Insert the summary here", "placeholder text"),
        ("TODO", "filler"),
        ("TBD.", "filler"),
        ("...", "filler"),
        ("Lorem ipsum dolor sit amet", "filler"),
        ("Dear [Insert name], your order shipped.", "'[Insert name]' inside the text"),
        ("The weather in <city> is sunny.", "'<city>' inside the text"),
        ("Hello <customer_name>, thanks!", "'<customer_name>' inside the text"),
        ("Your complete profile report, in plain text.", "schema's description"),
        ("your complete profile report in plain text", "schema's description"),
        ("<tool_response></tool_response>", "echoed <tool_response> markup"),
        ("AnswerError", "the name of a correction"),  # the real 0.5B, after an [AnswerError]
        ("[LoopError].", "the name of a correction"),
        ("/path/to/your/file", "placeholder path"),  # the real 0.5B, for "See /memos/agenda.txt"
        ("/path/to/file.txt", "placeholder path"),
        ("C:\\path\\to\\report.docx", "placeholder path"),
        ("~/your_project/notes.txt", "placeholder path"),
        ("/Users/YourName/Desktop/todo.md", "placeholder path"),
        (
            "[StepEnforcementError] You cannot call respond yet. You must first complete these "
            "required steps: lookup_user. Call one of them now.",
            "text of a correction",
        ),
        (
            "STOP. You MUST call one of: get_alert, check_metrics. Do NOT call diagnose. Your next "
            "response MUST be a tool call to one of: get_alert, check_metrics.",
            "text of a correction",
        ),
    ],
)
def test_a_stand_in_value_is_refused_with_its_rule(value: str, phrase: str) -> None:
    """Each kind of stand-in value is refused, and the error names what kind it is."""
    problem = _problem(value)
    assert problem is not None
    assert phrase in problem


@pytest.mark.parametrize(
    "value",
    [
        "[1, 2]",
        "[120, 340, 90]",
        '["a", "b"]',
        "[Quito, London]",
        "[New York]",
        "[x] done",
        "[x]",
        "See [the docs](https://example.com) for more.",
        "As shown in [1], sales rose.",
        "<div>",
        "<b>bold</b> text",
        "<item>a</item>",
        "List<String> of names",
        "Map<String, Integer>",
        "#include <iostream>",
        "std::vector<my_type> v;",
        "a < b > c",
        "What is your name?",
        "Your order is here.",
        "Please sign your name here: ____",
        "TODO: call Bob about the invoice",
        "N/A",
        "Quito",
        "The city, e.g. San Francisco",
        "/memos/agenda.txt",
        "/srv/paths/to-do.txt",
        "src/yours.py",
        "/home/youri/projects",
        "/data/to/path",
        "Write the path to your file here: /notes/a.txt",
        "and/or",
        "The report covers Q4 2031. Your complete profile is attached as a PDF in plain text "
        "form, together with the findings of the audit and the open questions.",
        "",
    ],
)
def test_real_content_is_accepted(value: str) -> None:
    """Content that looks a little like a stand-in (brackets, markup, "your") passes."""
    assert _problem(value) is None


def test_a_sentence_of_a_correction_sent_back_is_an_echo() -> None:
    """A value made mostly of a nudge the model was shown is refused as an echo."""
    echoes = EchoCorpus()
    echoes.add(
        "[StepEnforcementError] `respond` cannot run yet: these steps are not done: "
        "`fetch_rainfall_data`. Please call `fetch_rainfall_data` first."
    )
    assert "words copied from a correction" in (
        _problem("Please call `fetch_rainfall_data` first.", echoes) or ""
    )
    assert _problem("Q4 sales were $1.2M, up 8% on Q3.", echoes) is None


def test_the_example_call_inside_a_correction_is_not_an_echo() -> None:
    """A correction's example call carries the model's own values: sending them is the fix."""
    echoes = EchoCorpus()
    echoes.add(
        'Send this corrected call: {"name": "report", "arguments": {"report": "Maren Holt joined '
        'Engineering in 2019 and reports to D. Park."}}'
    )
    assert _problem("Maren Holt joined Engineering in 2019 and reports to D. Park.", echoes) is None


def test_prose_leaves_out_json_objects() -> None:
    """prose() keeps a nudge's words and drops its example calls, nested braces included."""
    text = 'Call it, e.g. {"name": "a", "arguments": {"b": {"c": 1}}} now.'
    assert prose(text) == "Call it, e.g.  now."


def test_a_tool_result_relayed_in_the_answer_is_not_an_echo() -> None:
    """Facts copied from a tool's result are what an answer is for: they pass."""
    guard = Guardrails([FORECAST], respond_tool=True, options=GuardrailOptions(rescue=False))
    first = guard.check([ToolCall(tool="get_forecast", args={"city": "Turku"}, call_id="a")])
    assert isinstance(first, Execute)
    guard.record([ToolResult(call=first.calls[0], output="Turku: 4.0 C, light rain all afternoon")])
    answer = guard.check(
        [
            ToolCall(
                tool="respond",
                args={"message": "Turku: 4.0 C, light rain all afternoon"},
                call_id="b",
            )
        ]
    )
    assert isinstance(answer, Execute)


def test_a_nudge_the_facade_sent_is_caught_when_copied_into_respond() -> None:
    """End to end: after a premature-terminal nudge, respond(message=<its words>) is refused."""
    guard = Guardrails(
        [FORECAST], required_steps=["get_forecast"], respond_tool=True, options=GuardrailOptions()
    )
    guard.check([ToolCall(tool="respond", args={"message": "It is sunny."}, call_id="a")])
    action = guard.check(
        [
            ToolCall(
                tool="respond",
                args={"message": "Please call `get_forecast` first."},
                call_id="b",
            )
        ]
    )
    assert isinstance(action, ToolErrors)
    assert "words copied from a correction you were sent" in action.errors[0].content


def test_the_schema_description_of_a_field_copied_in_is_refused() -> None:
    """Through the validator, a value equal to its field's description is refused."""
    validator = ResponseValidator([REPORT], rescue=False)
    call = ToolCall(
        tool="report", args={"report": "Your complete profile report, in plain text."}, call_id="c"
    )
    [error] = validator.validate([call]).errors
    assert "schema's description of the field copied in" in error.content


def _real_tools() -> list[ToolSpec]:
    def spec(name: str, *props: str) -> ToolSpec:
        schema = {
            "type": "object",
            "properties": {p: {"type": "string"} for p in props},
            "required": list(props),
        }
        return ToolSpec(name=name, parameters=schema)

    return [
        spec("check_interactions", "patient_id", "medication"),
        spec("convert_currency", "amount", "from_currency", "to_currency"),
        spec("get_forecast", "city"),
        spec("report", "findings"),
        spec("summarize", "content"),
        spec("get_country_info", "country"),
        spec("respond", "message"),
    ]


# Labelled by hand: every string argument value of the 288 real Qwen2.5-Coder replies that is
# not real content, by reply line and argument path. Every other value (935 of 950) is content.
REAL_STAND_INS = {
    (1, "$.content"): "markup",  # "<tool_response>" + "<ContentParams>" + ...
    (5, "$.content"): "markup",  # "<tool_response></tool_response>"
    (78, "$.diagnosis"): "correction",  # "STOP. You MUST call one of: ..."
    (80, "$.report"): "markup",
    (86, "$.report"): "markup",  # "<tool_response>...</tool_response>"
    (99, "$.content"): "markup",
    (100, "$.content"): "markup",
    (102, "$.content"): "markup",
    (103, "$.content"): "markup",
    (149, "$.diagnosis"): "correction",
    (153, "$.diagnosis"): "correction",
    (237, "$.content"): "markup",
    (117, "$.path"): "path",  # "/path/to/directory"
    (118, "$.path"): "path",
    (120, "$.path"): "path",
    (245, "$.content"): "placeholder",  # "<fetched_content>"
    (267, "$.answer"): "correction",  # "[StepEnforcementError] You cannot call respond yet..."
    (283, "$.content"): "markup",
}
_RULE_PHRASE = {
    "markup": "echoed <tool_response> markup",
    "correction": "text of a correction",
    "placeholder": "got the placeholder",
    "path": "placeholder path",
}


@pytest.mark.skipif(not DATA.exists(), reason=f"real model output not present at {DATA}")
def test_on_real_replies_exactly_the_labelled_stand_ins_are_refused() -> None:
    """Across the real replies' 950 string values, the refused ones are exactly those labelled
    as stand-ins, each for the labelled reason; real answers (long findings, diagnoses,
    "What is your name?") all pass."""
    tools = _real_tools()
    names = frozenset(n for t in tools for n in t.property_names())
    refused: dict[tuple[int, str], str] = {}
    for index, line in enumerate(DATA.read_text().splitlines()):
        found = rescue(json.loads(line)["content"], tools)
        for call in [*found.calls, *found.unknown_calls]:
            for error in placeholder_errors(call.args, descriptions=(), names=names):
                refused[(index, error.path)] = error.message
    assert set(refused) == set(REAL_STAND_INS)
    for key, rule in REAL_STAND_INS.items():
        assert _RULE_PHRASE[rule] in refused[key]


def test_a_reply_spliced_from_two_corrections_is_an_echo() -> None:
    """Half of one correction and half of another, joined, copy no single one of them enough;
    together they are all the value, and it is refused as an echo."""
    echoes = EchoCorpus()
    echoes.add(
        "Not run: `plan_voyage` needs a harbour that the request names; ask for it rather "
        "than choosing one of your own."
    )
    echoes.add(
        "Expected your own content, got words copied from a correction you were sent; "
        "do what the correction says instead of repeating it."
    )
    spliced = (
        "Not run: `plan_voyage` needs a harbour that the request names; do what the "
        "correction says instead of repeating it."
    )
    assert "words copied from a correction" in (_problem(spliced, echoes) or "")


def test_words_the_corrections_share_by_chance_are_no_echo() -> None:
    """An answer whose few common stretches each appear in some correction is the model's own:
    a text counts only where it gives a run of the answer, not scattered words."""
    echoes = EchoCorpus()
    echoes.add("The call to `list_berths` returned nothing for this quay; try another one.")
    echoes.add("The value of `tide_level` is out of range for this harbour, pick another.")
    own = "The harbour master says the tide at this quay is high until noon."
    assert _problem(own, echoes) is None
