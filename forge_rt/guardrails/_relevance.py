"""A first call to a tool whose own text shares no word with the request is sent back once.

Asked something none of the offered tools does ("who won the cup in 2010?" beside
``stock_ticker`` and ``compress_file``), a small model calls one of them anyway: under a
constraint the reply must look like a call, and it fills the nearest tool with the request's
own words, so the values are founded (``company_name="FIFA"``) and the value reading of
:mod:`forge_rt.guardrails._unfounded` passes it. What it does not fit is the *tool*: a tool
that does what the user asks is described by the words the user uses. The signal read here is
structural: the words of the tool's name, description, parameter names and parameter
descriptions, against the words of the conversation's recent requests (a follow-up, "and for
the other one?", is about what the turn before asked). A tool that shares none of them is not
what the request asked for.

Words are :func:`~forge_rt.guardrails._grounding.content_tokens` (three letters or more, less
stop words, and numbers); two match when they are equal or the shorter (three characters or
more) begins the longer -- "van" and "vans", "book" and "booking" -- so inflection does not
hide a shared word in any language that inflects at the end.

A call made only of numbers the model was given is not judged either: "what is 17 + 25?" shares
no word with ``add`` ("Add two numbers"), and both its numbers are the request's (an operation
is often a symbol; a request's *words* copied into a tool, ``company_name="FIFA"``, are the
shape this rule is for). Only a tool
whose description has three content words or more is judged (a bare
``get_conditions(city)`` says too little about itself to be found unrelated to "which is
warmer?"). Only the turn's first calls are read (before any result: a later call may follow what a result
found, which the request never named), only where a text answer was open (paired where only a
workflow's synthetic ``respond`` was, it turned two of the generated suite's recoveries wrong
and no decline right), and only a reply
whose *every* call is unrelated (one related call makes the reply an attempt at the task). Such
a reply is sent back once a turn, the turn's one refusal of a call from nowhere shared with the
value reading. The note names the tool and says what it does in its own words; the next reply
may not call that tool (the constraint leaves it out until a batch runs: the 0.5B, told so in
words alone, sent the same call again), and is otherwise taken as it is. The cost is a request
no tool's words share a word with that a tool still fits (a request in another language than
the descriptions): its first reply is then text or another tool.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails._grounding import content_tokens, same_word
from forge_rt.guardrails._rescue_args import schema_of

__all__ = ["judged", "related", "same_note_text", "tool_words", "unrelated_call_text"]

_SHOWN_CHARS = 160  # how much of a tool's description the note quotes
_DESCRIBED_WORDS = 3  # a description shorter than this says too little to judge a tool by


def tool_words(spec: ToolSpec) -> frozenset[str]:
    """The words a tool is described by: its name's parts, its description, and its
    parameters' names and descriptions, at every depth."""
    text = [spec.name.replace("_", " ").replace(".", " "), spec.description or ""]
    text.extend(_schema_text(schema_of(spec)))
    return frozenset(content_tokens(" ".join(text)))


def judged(spec: ToolSpec) -> bool:
    """Whether ``spec`` says enough about what it does to be judged unrelated: a description
    of three content words or more. A bare ``get_conditions(city)`` shares no word with "which
    is warmer?" and is the tool for it; a tool that describes itself is described by the
    words a request for it uses."""
    return len(content_tokens(spec.description or "")) >= _DESCRIBED_WORDS


def related(request: Iterable[str], spec: ToolSpec) -> bool:
    """Whether any of the ``request``'s words matches a word of ``spec``'s own text."""
    words = tool_words(spec)
    return any(same_word(asked, word) for asked in request for word in words)


def unrelated_call_text(call: ToolCall, spec: ToolSpec) -> str:
    """The note a call to a tool that shares no word with the request is answered with."""
    described = " ".join((spec.description or "").split())
    if len(described) > _SHOWN_CHARS:
        described = described[: _SHOWN_CHARS - 3].rstrip() + "..."
    does = f" ({described})" if described else ""
    return (
        f"Not run: nothing in the request matches what {call.tool} does{does}. Answer the "
        "request in plain text, or call a tool that does what it asks."
    )


def same_note_text(tool: str) -> str:
    """The note for a further call of ``tool`` in a reply whose first call of it was sent back:
    the reason is given once, not once a call."""
    return f"Not run, as the call of {tool} before it."


def _schema_text(schema: object) -> list[str]:
    """The names and descriptions of a schema's properties, nested ones included; enum
    members too (a tool that takes ``unit: "celsius" | "fahrenheit"`` is about degrees)."""
    if not isinstance(schema, dict):
        return []
    text: list[str] = []
    description = schema.get("description")
    if isinstance(description, str):
        text.append(description)
    enum = schema.get("enum")
    if isinstance(enum, list):
        text.extend(json.dumps(m) if not isinstance(m, str) else m for m in enum)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            text.append(str(name).replace("_", " "))
            text.extend(_schema_text(sub))
    text.extend(_schema_text(schema.get("items")))
    return text
