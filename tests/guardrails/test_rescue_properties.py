"""Properties of rescue parsing: it never raises, round-trips every dialect, invents no calls."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails import Dialect, RescueResult, render_call, rescue, respond_spec

WEATHER = ToolSpec(
    name="get_air_quality",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)
BOOK = ToolSpec(
    name="book_flight",
    parameters={
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "seats": {"type": "integer"},
            "price": {"type": "number"},
            "refundable": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {
                "type": "object",
                "properties": {"note": {"type": "string"}, "level": {"type": "integer"}},
                "required": ["note", "level"],
            },
            "cabin": {"enum": ["economy", "business"]},
        },
        "required": ["origin", "seats", "price", "refundable", "tags"],
    },
)
NOOP = ToolSpec(name="noop", parameters={"type": "object", "properties": {}})
TOOLS = [WEATHER, BOOK, NOOP, respond_spec()]
NAMES = [spec.name for spec in TOOLS]

# Markup in a value would end an XML element early; those dialects get text without '<'.
MARKUP_SENSITIVE = {Dialect.QWEN_CODER_XML, Dialect.XML_TAGS}
TEXT_DIALECTS = [d for d in Dialect if d is not Dialect.NATIVE]


def _strings(markup: bool) -> st.SearchStrategy[str]:
    chars = st.characters(blacklist_categories=("Cs",))
    if not markup:
        chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="<")
    return st.text(chars, max_size=30)


def _args(spec: ToolSpec, markup: bool) -> st.SearchStrategy[dict[str, Any]]:
    text = _strings(markup)
    if spec is WEATHER:
        return st.fixed_dictionaries(
            {"city": text}, optional={"days": st.integers(-(10**9), 10**9)}
        )
    if spec is BOOK:
        return st.fixed_dictionaries(
            {
                "origin": text,
                "seats": st.integers(0, 10**6),
                "price": st.floats(allow_nan=False, allow_infinity=False),
                "refundable": st.booleans(),
                "tags": st.lists(text, max_size=3),
            },
            optional={
                "meta": st.fixed_dictionaries({"note": text, "level": st.integers(-5, 5)}),
                "cabin": st.sampled_from(["economy", "business"]),
            },
        )
    if spec is NOOP:
        return st.just({})
    return st.fixed_dictionaries({"message": text})


@st.composite
def _calls(draw: st.DrawFn) -> tuple[ToolCall, Dialect]:
    dialect = draw(st.sampled_from(TEXT_DIALECTS))
    spec = draw(st.sampled_from(TOOLS))
    args = draw(_args(spec, markup=dialect not in MARKUP_SENSITIVE))
    return ToolCall(tool=spec.name, args=args), dialect


# Prose that cannot form a call: no brackets, quotes, markup, fences or parentheses.
PROSE = st.text(
    st.sampled_from(list("abcdefghijklmnopqrstuvwxyz ABCXYZ 0123456789 .,;:!?-\n")), max_size=80
)


@settings(max_examples=400)
@given(call=_calls(), before=PROSE, after=PROSE)
def test_any_rendered_call_is_recovered_exactly(
    call: tuple[ToolCall, Dialect], before: str, after: str
) -> None:
    """A valid call in any dialect, with any prose around it, comes back exactly, once."""
    tool_call, dialect = call
    constrained = dialect is Dialect.CONSTRAINED_JSON
    rendered = render_call(tool_call, dialect)
    text = rendered if constrained else f"{before}\n{rendered}\n{after}"
    result = rescue(text, TOOLS, constrained=constrained)
    assert [(c.tool, c.args) for c in result.calls] == [(tool_call.tool, tool_call.args)]
    expected = dialect
    if dialect is Dialect.BARE_JSON and (before.strip() or after.strip()):
        expected = Dialect.JSON_IN_PROSE
    assert result.dialects == (expected,)
    assert result.unknown_calls == []


@settings(max_examples=150)
@given(
    calls=st.lists(_calls(), min_size=2, max_size=4),
    gaps=st.lists(PROSE, min_size=5, max_size=5),
)
def test_several_calls_come_back_in_order(
    calls: list[tuple[ToolCall, Dialect]], gaps: list[str]
) -> None:
    """Several calls in mixed dialects, separated by prose, are all recovered in text order."""
    # A constrained reply is one call alone; a Llama python-tag region runs to the end.
    usable = [
        (c, d) for c, d in calls if d not in (Dialect.CONSTRAINED_JSON, Dialect.LLAMA_PYTHON_TAG)
    ]
    text = gaps[0] + "".join(
        f"\n{render_call(c, d)}\n{gap}" for (c, d), gap in zip(usable, gaps[1:], strict=False)
    )
    result = rescue(text, TOOLS)
    expected = [(c.tool, c.args) for c, _ in usable[: len(gaps) - 1]]
    assert [(c.tool, c.args) for c in result.calls] == expected


@settings(max_examples=300)
@given(text=PROSE)
def test_prose_yields_no_calls(text: str) -> None:
    """Prose without brackets, quotes or markup never yields a call of any kind."""
    result = rescue(text, TOOLS)
    assert (result.calls, result.unknown_calls, result.malformed) == ([], [], ())


@settings(max_examples=300)
@given(text=st.text(st.characters(), max_size=300))
def test_text_not_naming_a_tool_yields_no_known_call(text: str) -> None:
    """Arbitrary text (lone surrogates included) that never names a tool calls none of them."""
    folded = text.casefold()
    result = rescue(text, TOOLS)
    if not any(name in folded for name in NAMES):
        assert result.calls == []


SOUP_TOKENS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    ":",
    ",",
    "\\",
    "+",
    "(",
    ")",
    " ",
    "\n",
    "name",
    '"name"',
    '"arguments"',
    "get_air_quality",
    "noop",
    "True",
    "null",
    "```",
    "```json\n",
    "<tool_call>",
    "</tool_call>",
    "<tools>",
    "</tools>",
    "<tool_response>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "<|python_tag|>",
    "<|eom_id|>",
    "<function=",
    "<parameter=",
    "</parameter>",
    "</function>",
    '<function name="get_air_quality"',
    "<invoke name=",
    "<function-name>",
    "<get_air_quality",
    "/>",
    ">",
    "<think>",
    "</think>",
    "[THINK]",
    "é",
    "\U0001f600",
    "\ud800",
    "\x00",
    "/*",
    "//",
    "<!--",
    "9" * 5000,
    "1e999",
]


@settings(max_examples=500)
@given(
    text=st.one_of(
        st.lists(st.sampled_from(SOUP_TOKENS), max_size=60).map("".join),
        st.text(st.characters(), max_size=200),
        st.text(st.sampled_from(list('{}[]"\\:,<>/=`()+ \n')), max_size=300),
    )
)
def test_never_raises(text: str) -> None:
    """Any text -- brace soup, dialect fragments, unicode, NULs -- parses without raising."""
    result = rescue(text, TOOLS)
    assert isinstance(result, RescueResult)
    assert len(result.dialects) == len(result.calls)
    assert all(call.tool in NAMES for call in result.calls)
