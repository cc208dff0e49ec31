"""Rescue parsing, dialect by dialect: a table of real-shaped model replies and what they hold."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

import forge_rt.guardrails as guardrails
from forge_rt.core import ToolSpec
from forge_rt.guardrails import Dialect, rescue, rescue_tool_calls, respond_spec, split_reasoning

WEATHER = ToolSpec(
    name="get_air_quality",
    description="Current air quality for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
SEARCH = ToolSpec(
    name="search",
    description="Search the web.",
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "exact": {"type": "boolean"},
        },
        "required": ["query"],
    },
)
TOOLS = [WEATHER, SEARCH, respond_spec()]

QUITO = ("get_air_quality", {"city": "Quito"})
TRIO = ("search", {"query": "trio"})

# (id, text, expected calls, expected dialects)
CASES: list[tuple[str, str, list[tuple[str, dict[str, Any]]], list[Dialect]]] = [
    (
        "bare-name-arguments",
        '{"name": "get_air_quality", "arguments": {"city": "Quito"}}',
        [QUITO],
        [Dialect.BARE_JSON],
    ),
    (
        "bare-tool-args",
        '{"tool": "get_air_quality", "args": {"city": "Quito"}}',
        [QUITO],
        [Dialect.BARE_JSON],
    ),
    (
        "function-object",
        '{"type": "function", "function": {"name": "get_air_quality", "arguments": {"city": "Quito"}}}',
        [QUITO],
        [Dialect.BARE_JSON],
    ),
    (
        "function-arguments-as-json-string",
        '{"function": {"name": "get_air_quality", "arguments": "{\\"city\\": \\"Quito\\"}"}}',
        [QUITO],
        [Dialect.BARE_JSON],
    ),
    (
        "openai-tool-calls-wrapper",
        '{"tool_calls": [{"id": "call_1", "type": "function", "function": '
        '{"name": "search", "arguments": "{\\"query\\": \\"trio\\"}"}}]}',
        [TRIO],
        [Dialect.BARE_JSON],
    ),
    (
        "array-of-calls",
        '[{"name": "get_air_quality", "arguments": {"city": "Quito"}}, '
        '{"name": "search", "arguments": {"query": "trio"}}]',
        [QUITO, TRIO],
        [Dialect.BARE_JSON, Dialect.BARE_JSON],
    ),
    (
        "calls-on-separate-lines",
        '{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n'
        '{"name": "search", "arguments": {"query": "trio"}}\n',
        [QUITO, TRIO],
        [Dialect.BARE_JSON, Dialect.BARE_JSON],
    ),
    (
        "json-fence",
        '```json\n{\n  "name": "get_air_quality",\n  "arguments": {\n    "city": "Quito"\n  }\n}\n```',
        [QUITO],
        [Dialect.FENCED_JSON],
    ),
    (
        "plain-fence-with-prose",
        'I will look it up.\n\n```\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n```\n'
        "Done.",
        [QUITO],
        [Dialect.FENCED_JSON],
    ),
    (
        "two-fences",
        '```json\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n```\n\n'
        '```json\n{"name": "search", "arguments": {"query": "trio"}}\n```',
        [QUITO, TRIO],
        [Dialect.FENCED_JSON, Dialect.FENCED_JSON],
    ),
    (
        "json-in-prose",
        'Sure! Calling {"name": "get_air_quality", "arguments": {"city": "Quito"}} now.',
        [QUITO],
        [Dialect.JSON_IN_PROSE],
    ),
    (
        "hermes",
        '<tool_call>\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n</tool_call>',
        [QUITO],
        [Dialect.HERMES_XML],
    ),
    (
        "hermes-two-calls",
        '<tool_call>\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": "trio"}}\n</tool_call>',
        [QUITO, TRIO],
        [Dialect.HERMES_XML, Dialect.HERMES_XML],
    ),
    (
        "hermes-cut-off-before-close",
        '<tool_call>\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}',
        [QUITO],
        [Dialect.HERMES_XML],
    ),
    (
        "qwen-coder-xml",
        "<tool_call>\n<function=get_air_quality>\n<parameter=city>\nQuito\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        [("get_air_quality", {"city": "Quito", "days": 3})],
        [Dialect.QWEN_CODER_XML],
    ),
    (
        "qwen-coder-xml-without-outer-tag",
        "<function=search>\n<parameter=query>\ntrio\n</parameter>\n"
        "<parameter=exact>\ntrue\n</parameter>\n</function>",
        [("search", {"query": "trio", "exact": True})],
        [Dialect.QWEN_CODER_XML],
    ),
    (
        "mistral-name-object",
        '[TOOL_CALLS]get_air_quality{"city": "Quito"}',
        [QUITO],
        [Dialect.MISTRAL],
    ),
    (
        "mistral-array",
        '[TOOL_CALLS] [{"name": "get_air_quality", "arguments": {"city": "Quito"}}, '
        '{"name": "search", "arguments": {"query": "trio"}}]',
        [QUITO, TRIO],
        [Dialect.MISTRAL, Dialect.MISTRAL],
    ),
    (
        "mistral-args-marker",
        '[TOOL_CALLS]get_air_quality[ARGS]{"city": "Quito"}',
        [QUITO],
        [Dialect.MISTRAL],
    ),
    (
        "mistral-call-id",
        '[TOOL_CALLS]get_air_quality[CALL_ID]a1B2c3D4e[ARGS]{"city": "Quito"}',
        [QUITO],
        [Dialect.MISTRAL],
    ),
    (
        "mistral-two-calls",
        '[TOOL_CALLS]get_air_quality[ARGS]{"city": "Quito"}[TOOL_CALLS]search[ARGS]{"query": "trio"}',
        [QUITO, TRIO],
        [Dialect.MISTRAL, Dialect.MISTRAL],
    ),
    (
        "llama-python-tag-json",
        '<|python_tag|>{"name": "get_air_quality", "parameters": {"city": "Quito"}}<|eom_id|>',
        [QUITO],
        [Dialect.LLAMA_PYTHON_TAG],
    ),
    (
        "llama-python-tag-builtin-call",
        '<|python_tag|>search.call(query="trio")<|eom_id|>',
        [TRIO],
        [Dialect.LLAMA_PYTHON_TAG],
    ),
    (
        "llama-json",
        '{"type": "function", "name": "get_air_quality", "parameters": {"city": "Quito"}}',
        [QUITO],
        [Dialect.LLAMA_JSON],
    ),
    (
        "rehearsal",
        'get_air_quality[ARGS]{"city": "Quito"}',
        [QUITO],
        [Dialect.REHEARSAL],
    ),
    (
        "python-call-keyword",
        '```python\nsearch(query="trio", limit=5)\n```',
        [("search", {"query": "trio", "limit": 5})],
        [Dialect.PYTHON_CALL],
    ),
    (
        "python-call-positional-in-schema-order",
        "```python\nget_air_quality('Quito', 3)\n```",
        [("get_air_quality", {"city": "Quito", "days": 3})],
        [Dialect.PYTHON_CALL],
    ),
    (
        "python-call-on-its-own-line",
        'I will check.\nget_air_quality(city="Quito")\n',
        [QUITO],
        [Dialect.PYTHON_CALL],
    ),
    (
        "python-call-string-concatenation",
        '```python\nsearch(query="tr" + "io")\n```',
        [TRIO],
        [Dialect.PYTHON_CALL],
    ),
    (
        "xml-function-name-attribute",
        '<tools>\n    <function name="get_air_quality" arguments=\'{"city": "Quito"}\'/>\n</tools>',
        [QUITO],
        [Dialect.XML_ATTR],
    ),
    (
        "xml-invoke-parameters",
        '<invoke name="get_air_quality">\n<parameter name="city">Quito</parameter>\n'
        '<parameter name="days">2</parameter>\n</invoke>',
        [("get_air_quality", {"city": "Quito", "days": 2})],
        [Dialect.XML_ATTR],
    ),
    (
        "xml-function-name-element",
        '<function-name>get_air_quality</function-name>\n<arguments>\n{"city": "Quito"}\n</arguments>',
        [QUITO],
        [Dialect.XML_TAGS],
    ),
    (
        "xml-tool-named-tag",
        '<tools>\n  <search query="trio" limit="2"/>\n</tools>',
        [("search", {"query": "trio", "limit": 2})],
        [Dialect.XML_TAGS],
    ),
    (
        "repaired-trailing-commas",
        '{"name": "get_air_quality", "arguments": {"city": "Quito",},}',
        [QUITO],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "repaired-single-quotes",
        "{'name': 'get_air_quality', 'arguments': {'city': 'Quito'}}",
        [QUITO],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "repaired-doubled-braces",
        '{{"name": "get_air_quality", "arguments": {"city": "Quito"}}}',
        [QUITO],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "repaired-python-literals",
        '{"name": "search", "arguments": {"query": "trio", "exact": True}}',
        [("search", {"query": "trio", "exact": True})],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "repaired-string-concatenation",
        '{"name": "search", "arguments": {"query": "tr" +\n    "io"}}',
        [TRIO],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "repaired-missing-final-brace",
        '{"name": "get_air_quality", "arguments": {"city": "Quito"}',
        [QUITO],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "repaired-inside-fence",
        "```json\n{'name': 'get_air_quality', 'arguments': {'city': 'Quito',}}\n```",
        [QUITO],
        [Dialect.REPAIRED_JSON],
    ),
    (
        "mixed-dialects-in-order",
        '<tool_call>\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n</tool_call>\n'
        'Then: [TOOL_CALLS]search[ARGS]{"query": "trio"}',
        [QUITO, TRIO],
        [Dialect.HERMES_XML, Dialect.MISTRAL],
    ),
    (
        "case-insensitive-unique-name",
        '{"name": "Get_Air_Quality", "arguments": {"city": "Quito"}}',
        [QUITO],
        [Dialect.BARE_JSON],
    ),
    (
        "arguments-beside-the-name",
        '{"name": "get_air_quality", "city": "Quito"}',
        [QUITO],
        [Dialect.BARE_JSON],
    ),
    (
        "respond",
        '{"name": "respond", "arguments": {"message": "It is sunny."}}',
        [("respond", {"message": "It is sunny."})],
        [Dialect.BARE_JSON],
    ),
    (
        "quoted-integer-coerced",
        '{"name": "get_air_quality", "arguments": {"city": "Quito", "days": "4"}}',
        [("get_air_quality", {"city": "Quito", "days": 4})],
        [Dialect.BARE_JSON],
    ),
]


@pytest.mark.parametrize(
    ("text", "calls", "dialects"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_dialect_is_recovered(
    text: str, calls: list[tuple[str, dict[str, Any]]], dialects: list[Dialect]
) -> None:
    """Each dialect's call comes back with its tool, coerced arguments and dialect, in order."""
    result = rescue(text, TOOLS)
    assert [(c.tool, c.args) for c in result.calls] == calls
    assert list(result.dialects) == dialects
    assert result.unknown_calls == []


NO_CALLS = [
    ("empty", ""),
    ("prose", "The capital of Ecuador is Quito."),
    ("arguments-without-a-name", '{"city": "Quito"}'),
    ("json-answer-object", '{"response": "No interaction data found for Caffeine."}'),
    ("markdown-code", "```python\nimport math\nprint(math.sqrt(144))\n```"),
    ("code-with-variables", "```python\nrecords = search(query)\nget_air_quality(city)\n```"),
    ("python-def", "def search(query='trio'):\n    return []"),
    ("tool-mentioned-in-prose", "You could call get_air_quality(city) to find out."),
    ("html", '<div class="x"><a href="/y">link</a></div>'),
    ("retry-nudge-echo", "Please try again with a valid tool call."),
    (
        "tool-response-echo",
        '<tool_response>\n{"name": "get_air_quality", "arguments": {"city": "Bergen"}}\n</tool_response>',
    ),
    (
        "tool-definition-echo",
        '{"type": "function", "function": {"name": "get_air_quality", "description": "Current air quality.",'
        ' "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}',
    ),
    (
        "tools-block-of-definitions",
        '<tools>\n{"type": "function", "function": {"name": "search", "description": "Search.", '
        '"parameters": {"properties": {"query": {"type": "string"}}, "type": "object"}}}\n</tools>',
    ),
    ("brace-soup", "{{{[[{ } ] ] } } } {[ }{ ]"),
]


@pytest.mark.parametrize("text", [c[1] for c in NO_CALLS], ids=[c[0] for c in NO_CALLS])
def test_text_without_calls_yields_none(text: str) -> None:
    """Prose, code, answers and echoes of tool results or definitions are not calls."""
    result = rescue(text, TOOLS)
    assert (result.calls, result.unknown_calls) == ([], [])


def test_reasoning_is_split_off_and_never_parsed() -> None:
    """A call inside <think> stays reasoning; only the call after it is returned."""
    text = (
        '<think>Maybe {"name": "search", "arguments": {"query": "x"}}? No.</think>\n'
        '{"name": "get_air_quality", "arguments": {"city": "Quito"}}'
    )
    result = rescue(text, TOOLS)
    assert [(c.tool, c.args) for c in result.calls] == [QUITO]
    assert result.reasoning == 'Maybe {"name": "search", "arguments": {"query": "x"}}? No.'
    assert result.text == '{"name": "get_air_quality", "arguments": {"city": "Quito"}}'


@pytest.mark.parametrize(
    ("text", "reasoning", "rest"),
    [
        ("<think>a</think>b", "a", "b"),
        ("[THINK]a[/THINK]b", "a", "b"),
        ("<thinking>a</thinking>\nb\n<think>c</think>\nd", "a\n\nc", "b\n\nd"),
        ("a\n</think>\n\nb", "a", "b"),
        ("b\n<think>cut off", "cut off", "b"),
        ("<think>\n\n</think>\n\nb", None, "b"),
        ('{"q": "<think>"}', None, '{"q": "<think>"}'),
        ('{"q": "a</think>b"}', None, '{"q": "a</think>b"}'),
        ("no reasoning", None, "no reasoning"),
    ],
    ids=[
        "think",
        "mistral-think",
        "two-blocks",
        "opened-by-template",
        "unclosed",
        "empty",
        "open-tag-inside-a-string",
        "close-tag-inside-a-string",
        "none",
    ],
)
def test_split_reasoning(text: str, reasoning: str | None, rest: str) -> None:
    """Think blocks of every form become reasoning; the rest is the visible text."""
    assert split_reasoning(text) == (reasoning, rest)


def test_unknown_tool_is_reported_not_returned() -> None:
    """A well-formed call of a tool that does not exist goes to unknown_calls only."""
    result = rescue('{"name": "get_stock", "arguments": {"symbol": "KRYL"}}', TOOLS)
    assert result.calls == []
    assert [(c.tool, c.args) for c in result.unknown_calls] == [("get_stock", {"symbol": "KRYL"})]
    assert rescue_tool_calls('{"name": "get_stock", "arguments": {}}', TOOLS) == []


def test_known_and_unknown_calls_are_separated() -> None:
    """Known calls keep their order and dialects; the unknown one is set aside."""
    text = (
        '{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n'
        '{"name": "tool_response", "arguments": {"x": 1}}\n'
        '{"name": "search", "arguments": {"query": "trio"}}'
    )
    result = rescue(text, TOOLS)
    assert [(c.tool, c.args) for c in result.calls] == [QUITO, TRIO]
    assert [c.tool for c in result.unknown_calls] == ["tool_response"]
    assert result.dialects == (Dialect.BARE_JSON, Dialect.BARE_JSON)


def test_unreadable_call_is_reported_as_malformed() -> None:
    """A call-shaped fragment that no repair can read is quoted back, not guessed at."""
    text = 'Calling {"name": "get_air_quality", "arguments": {"city": Quito}} now'
    result = rescue(text, TOOLS)
    assert result.calls == []
    assert result.malformed == ('{"name": "get_air_quality", "arguments": {"city": Quito}}',)


def test_cut_off_call_after_good_calls_is_malformed() -> None:
    """A reply cut off mid-call keeps the complete calls and reports the broken tail."""
    text = (
        '{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n'
        '{"name": "search", "arguments": {"query": "unterminated'
    )
    result = rescue(text, TOOLS)
    assert [(c.tool, c.args) for c in result.calls] == [QUITO]
    assert result.dialects == (Dialect.BARE_JSON,)
    assert result.malformed == ('{"name": "search", "arguments": {"query": "unterminated',)


def test_rescued_calls_get_fresh_ids() -> None:
    """Ids written by the model are not trusted; every rescued call gets its own fresh id."""
    text = (
        '{"id": "call_1", "function": {"name": "get_air_quality", "arguments": {"city": "Quito"}}}\n'
        '{"id": "call_1", "function": {"name": "get_air_quality", "arguments": {"city": "Bergen"}}}'
    )
    first, second = rescue_tool_calls(text, TOOLS)
    assert first.call_id != second.call_id
    assert "call_1" not in (first.call_id, second.call_id)


def test_constrained_reply_is_labelled() -> None:
    """A reply made under the tool-call schema is reported as constrained JSON."""
    text = '{"name": "get_air_quality", "arguments": {"city": "Quito"}}'
    assert rescue(text, TOOLS, constrained=True).dialects == (Dialect.CONSTRAINED_JSON,)


def test_constrained_reply_that_is_not_one_call_is_still_rescued() -> None:
    """A 'constrained' reply that is not exactly one call keeps its real dialect."""
    text = '```json\n{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n```'
    result = rescue(text, TOOLS, constrained=True)
    assert [(c.tool, c.args) for c in result.calls] == [QUITO]
    assert result.dialects == (Dialect.FENCED_JSON,)


def test_public_names_are_exported() -> None:
    """Every name of the rescue/respond/constrain API is importable and listed in __all__."""
    names = {
        "ConstraintDecision",
        "Dialect",
        "RescueResult",
        "choose_constraint",
        "coerce_args",
        "render_call",
        "rescue",
        "rescue_tool_calls",
        "respond_spec",
        "split_reasoning",
        "split_respond",
        "tool_call_grammar",
        "tool_call_schema",
        "with_respond",
        "workflow_tool_specs",
    }
    assert names <= set(guardrails.__all__)
    assert all(hasattr(guardrails, name) for name in names)


def test_many_broken_calls_are_all_repaired() -> None:
    """A long reply of calls each missing its closing brace yields every call, in order."""
    lines = [f'{{"tool": "get_air_quality", "args": {{"city": "C{i}"}}' for i in range(300)]
    result = rescue("\n".join(lines), TOOLS)
    assert [c.args["city"] for c in result.calls] == [f"C{i}" for i in range(300)]
    assert set(result.dialects) == {Dialect.REPAIRED_JSON}


def test_brace_soup_stops_the_scan_and_says_so() -> None:
    """Unreadable bracket soup is bounded work: calls before it survive, and it is logged."""
    text = '{"name": "get_air_quality", "arguments": {"city": "Quito"}}\n' + "{" * 20_000
    with structlog.testing.capture_logs() as logs:
        result = rescue(text, TOOLS)
    assert [(c.tool, c.args) for c in result.calls] == [QUITO]
    assert [e["event"] for e in logs] == ["rescue.scan_budget_exhausted"]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_air_quality", "arguments": {"city": "Quito", "days": ' + "9" * 5000 + "}}",
        '{"name": "get_air_quality", "arguments": {"city": "Quito", "days": ' + "9" * 5000 + ",}}",
        '{"name": "get_air_quality", "arguments": {"city": "Quito", "days": "' + "9" * 5000 + '"}}',
        "<function=get_air_quality><parameter=days>" + "9" * 5000 + "</parameter></function>",
        "```python\nget_air_quality('Quito', " + "9" * 5000 + ")\n```",
    ],
    ids=["strict", "repaired", "quoted", "qwen-xml", "python"],
)
def test_absurd_numbers_do_not_raise(text: str) -> None:
    """A 5000-digit number (beyond Python's int() limit) is rejected or left as text, never raised."""
    result = rescue(text, TOOLS)
    assert all(not isinstance(c.args.get("days"), int) for c in result.calls)
