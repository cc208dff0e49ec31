"""The shapes in which models write tool calls as text, and a renderer for each.

:class:`Dialect` names what rescue parsing recognised, one per recovered call, so metrics and
nudges can say which format a model fell into. :func:`render_call` writes a call in a given
dialect; the simulated backend and the property tests use it to produce realistic model text.
"""

from __future__ import annotations

import enum
import html
import json
from typing import Any

from forge_rt.core import ToolCall

__all__ = [
    "FENCE",
    "HERMES_CLOSE",
    "HERMES_OPEN",
    "JSON_CALL_OPENERS",
    "MISTRAL_TOKEN",
    "PYTHON_TAG",
    "TEXT_CALL_MARKERS",
    "TOOLS_CLOSE",
    "TOOLS_OPEN",
    "Dialect",
    "render_call",
]

# --- the markers of the dialects: rescue parsing, rendering and stream gating all read these ---

FENCE = "```"
HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
TOOLS_OPEN, TOOLS_CLOSE = "<tools>", "</tools>"
PYTHON_TAG = "<|python_tag|>"
MISTRAL_TOKEN = "[TOOL_CALLS]"

TEXT_CALL_MARKERS: tuple[str, ...] = (
    FENCE,
    HERMES_OPEN[:-1],  # <tool_call ...> and <tool_calls>
    "<function",  # Qwen-Coder <function=NAME> and XML <function name="...">
    TOOLS_OPEN[:-1],
    PYTHON_TAG,
    MISTRAL_TOKEN[:-1],
)
"""Literal text that may begin a call written as text, besides a JSON object and ``name(``: a
reply streamed as prose must be held from the first of these until it is checked."""

JSON_CALL_OPENERS: tuple[tuple[str, ...], ...] = (
    (),
    (f"{FENCE}json",),
    (FENCE,),
    (HERMES_OPEN,),
    (f"{FENCE}json", HERMES_OPEN),
    (MISTRAL_TOKEN,),
    (MISTRAL_TOKEN, "["),
    ("[",),
    (f"{FENCE}json", "["),
    (FENCE, "["),
)
"""What may stand before a JSON call object (whitespace aside) in the dialects rescue reads."""


class Dialect(enum.StrEnum):
    """Where and how a tool call was written."""

    NATIVE = "native"
    """Structured ``tool_calls`` from the backend; nothing was parsed from text."""
    CONSTRAINED_JSON = "constrained_json"
    """The whole reply is one call object produced under constrained decoding."""
    BARE_JSON = "bare_json"
    """``{"name": ..., "arguments": ...}`` (or ``tool``/``args``, ``function: {...}``) alone."""
    JSON_IN_PROSE = "json_in_prose"
    """A bare JSON call with prose around it."""
    FENCED_JSON = "fenced_json"
    """A JSON call inside a ```json or plain ``` fence."""
    REPAIRED_JSON = "repaired_json"
    """Near-JSON that needed repair: trailing commas, single quotes, ``{{...}}``, ``"a" + "b"``."""
    HERMES_XML = "hermes_xml"
    """Hermes/Qwen ``<tool_call>{...}</tool_call>`` (also calls inside an echoed ``<tools>``)."""
    QWEN_CODER_XML = "qwen_coder_xml"
    """Qwen-Coder ``<function=NAME><parameter=K>V</parameter></function>``."""
    MISTRAL = "mistral"
    """``[TOOL_CALLS]name{...}``, ``[TOOL_CALLS]name[ARGS]{...}`` or ``[TOOL_CALLS][{...}]``."""
    LLAMA_PYTHON_TAG = "llama_python_tag"
    """Llama 3 ``<|python_tag|>`` followed by JSON or a Python call."""
    LLAMA_JSON = "llama_json"
    """Llama 3 ``{"type": "function", "name": ..., "parameters": {...}}``."""
    REHEARSAL = "rehearsal"
    """``name[ARGS]{...}`` without the ``[TOOL_CALLS]`` token."""
    PYTHON_CALL = "python_call"
    """``load_ledger(3, 2031)`` or ``report(findings="...")``, usually in a ```python block."""
    XML_ATTR = "xml_attr"
    """The name in an attribute: ``<function name="X" arguments='{...}'/>``, ``<invoke name=...>``."""
    XML_TAGS = "xml_tags"
    """The name in an element or tag: ``<function-name>X</function-name>``, ``<X a="1"/>``."""


def _json(value: Any, *, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _xml_value(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


def render_call(call: ToolCall, dialect: Dialect) -> str:
    """``call`` written the way a model writing in ``dialect`` would write it (a one-line
    lead-in for :data:`Dialect.JSON_IN_PROSE`; :data:`Dialect.PYTHON_CALL` needs argument names
    that are Python identifiers)."""
    name, args = call.tool, call.args
    plain = {"name": name, "arguments": args}
    if dialect in (Dialect.NATIVE, Dialect.CONSTRAINED_JSON, Dialect.BARE_JSON):
        return _json(plain)
    if dialect is Dialect.JSON_IN_PROSE:
        return f"I will call {name} now.\n{_json(plain)}\nThat should do it."
    if dialect is Dialect.FENCED_JSON:
        return f"{FENCE}json\n{_json(plain, indent=2)}\n{FENCE}"
    if dialect is Dialect.REPAIRED_JSON:
        # Doubled braces and a trailing comma: the two repairs small models need most.
        return f'{{{{"name": {_json(name)}, "arguments": {_json(args)},}}}}'
    if dialect is Dialect.HERMES_XML:
        return f"{HERMES_OPEN}\n{_json(plain)}\n{HERMES_CLOSE}"
    if dialect is Dialect.QWEN_CODER_XML:
        params = "".join(
            f"<parameter={key}>\n{_xml_value(value)}\n</parameter>\n" for key, value in args.items()
        )
        return f"{HERMES_OPEN}\n<function={name}>\n{params}</function>\n{HERMES_CLOSE}"
    if dialect is Dialect.MISTRAL:
        return f"{MISTRAL_TOKEN}{name}[ARGS]{_json(args)}"
    if dialect is Dialect.LLAMA_PYTHON_TAG:
        return f"{PYTHON_TAG}{_json({'name': name, 'parameters': args})}"
    if dialect is Dialect.LLAMA_JSON:
        return _json({"type": "function", "name": name, "parameters": args})
    if dialect is Dialect.REHEARSAL:
        return f"{name}[ARGS]{_json(args)}"
    if dialect is Dialect.PYTHON_CALL:
        bad = [key for key in args if not key.isidentifier()]
        if bad:
            raise ValueError(
                f"cannot render {name} as a Python call: argument names {bad} are not "
                "identifiers; use another dialect"
            )
        kwargs = ", ".join(f"{key}={value!r}" for key, value in args.items())
        return f"{FENCE}python\n{name}({kwargs})\n{FENCE}"
    if dialect is Dialect.XML_ATTR:
        escaped = html.escape(_json(args), quote=True)
        return f"{TOOLS_OPEN}\n<function name=\"{html.escape(name)}\" arguments='{escaped}'/>\n{TOOLS_CLOSE}"
    if dialect is Dialect.XML_TAGS:
        return f"<function-name>{name}</function-name>\n<arguments>\n{_json(args)}\n</arguments>"
    raise ValueError(f"unknown dialect {dialect!r}")
