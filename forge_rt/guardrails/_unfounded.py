"""A call made of values from nowhere, where a text answer was open, is sent back once.

Asked something none of the offered tools does, a small model calls one of them anyway and
fills it with values of its own. Where the reply could have been text (a constraint that admits
text beside the calls), the model chose among tools that do not fit. The signal is structural:
every value the call carries -- each string and number in its arguments, nested ones included --
is absent from everything the model was given: the system prompt, the requests and the tools'
results (see :class:`~forge_rt.guardrails._guesses.ArgumentGrounding`), and the called tool's
own description and schema. A string counts as present when any of its words of three
characters or more is. Values the tool's schema itself lists (``enum``, ``const``, ``default``)
and booleans say nothing either way; a call with no other value is not judged.

Such a reply is sent back **once per turn** with a note that names the values and says both
ways on: call with the request's own values, or answer in text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

from forge_rt.core import ToolCall, ToolSpec
from forge_rt.guardrails._guesses import ArgumentGrounding
from forge_rt.guardrails._relevance import judged, related
from forge_rt.guardrails._rescue_args import schema_of

__all__ = [
    "Unfounded",
    "UnfoundedCalls",
    "unfounded_call_text",
]

# The most values a note names: enough to recognise the call, short enough to read.
_NAMED = 4
# A word that can be looked for in the facts; a string with none ("hi", "ok") cannot be judged.
_WORD = re.compile(r"[^\W_]{3,}")
# A string longer than this is composed text (a message body), not a value to look up.
_MAX_VALUE_CHARS = 200


class Unfounded(msgspec.Struct, frozen=True, kw_only=True):
    """A call none of whose values the model was given: ``values`` as ``path=value`` pairs."""

    call: ToolCall
    values: tuple[tuple[str, str | int | float], ...]


class UnfoundedCalls:
    """Finds a reply whose every call is made of values from nowhere, once per turn."""

    def __init__(self, facts: ArgumentGrounding) -> None:
        self._facts = facts
        self._spent = False
        # Each tool's description and schema as facts of their own, built on first use.
        self._own: dict[str, ArgumentGrounding] = {}

    def new_turn(self) -> None:
        """A new user turn: its first such reply may be sent back again."""
        self._spent = False

    def check(self, calls: Sequence[ToolCall], specs: Mapping[str, ToolSpec]) -> list[Unfounded]:
        """The calls to send back (all of ``calls``), or none: only when every call is
        unfounded, never before the turn's request is known, and at most once a turn (spent
        here). ``specs`` are the tools by name."""
        if self._spent or not calls or not self._facts.request_known:
            return []
        found = []
        for call in calls:
            judged = self._judged(call, specs)
            if not judged or any(seen for _, _, seen in judged):
                return []
            found.append(Unfounded(call=call, values=tuple((p, v) for p, v, _ in judged)))
        self._spent = True
        return found

    def unrelated(
        self, calls: Sequence[ToolCall], specs: Mapping[str, ToolSpec], request: frozenset[str]
    ) -> list[ToolCall]:
        """The calls to send back (all of ``calls``) when the tool of every one shares no word
        with the turn's ``request`` (see :mod:`forge_rt.guardrails._relevance`), or none. The
        turn's one refusal of a call from nowhere is the value reading's too (spent here)."""
        if self._spent or not calls or not request:
            return []
        for call in calls:
            spec = specs.get(call.tool)
            if spec is None or not judged(spec) or related(request, spec):
                return []
            values = self._judged(call, specs)
            if values and all(isinstance(v, int | float) and seen for _, v, seen in values):
                return []  # only numbers the model was given: "17 + 25" is add(17, 25)
        self._spent = True
        return list(calls)

    def _judged(
        self, call: ToolCall, specs: Mapping[str, ToolSpec]
    ) -> list[tuple[str, str | int | float, bool]]:
        """Each checkable value of ``call`` with its path, and whether the model was given it
        (by the run's facts or by the called tool's own text)."""
        spec = specs.get(call.tool)
        properties = schema_of(spec).get("properties") if spec is not None else None
        values = _values(call.args, properties if isinstance(properties, Mapping) else {})
        own = self._tool_facts(call.tool, spec)
        return [(path, value, self._seen(value, own)) for path, value in values]

    def _tool_facts(self, tool: str, spec: ToolSpec | None) -> ArgumentGrounding:
        """What ``tool``'s own description and schema give, read the way the run's facts are."""
        own = self._own.get(tool)
        if own is None:
            own = ArgumentGrounding()
            if spec is not None:
                own.learn(f"{spec.description}\n{json.dumps(schema_of(spec))}")
            self._own[tool] = own
        return own

    def _seen(self, value: str | int | float, own: ArgumentGrounding) -> bool:
        """A number among the facts' or the tool's own numbers; a string with any of its words
        in either (a text the model composed, "Hello Ines!", is founded by the name it
        greets)."""
        if not isinstance(value, str):
            return self._facts.seen(value) or own.seen(value)
        return any(self._facts.seen(word) or own.seen(word) for word in _WORD.findall(value))


def _values(
    args: Mapping[str, Any], properties: Mapping[str, Any], prefix: str = ""
) -> Iterator[tuple[str, str | int | float]]:
    """The checkable leaf values of ``args``: strings and numbers that the schema does not list
    itself, each with its path (``filter.city``, ``ids[1]``)."""
    for name, value in args.items():
        schema = properties.get(name)
        yield from _leaves(value, schema if isinstance(schema, Mapping) else {}, prefix + name)


def _leaves(
    value: Any, schema: Mapping[str, Any], path: str
) -> Iterator[tuple[str, str | int | float]]:
    if isinstance(value, bool) or value is None or _listed(value, schema):
        return
    if isinstance(value, Mapping):
        nested = schema.get("properties")
        yield from _values(value, nested if isinstance(nested, Mapping) else {}, f"{path}.")
    elif isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            yield from _leaves(item, items if isinstance(items, Mapping) else {}, f"{path}[{i}]")
    elif isinstance(value, str):
        if _WORD.search(value) and len(value) <= _MAX_VALUE_CHARS:
            yield path, value
    elif isinstance(value, int | float):
        yield path, value


def _listed(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` itself offers ``value`` (an enum member, its const or default)."""
    offered = [*schema.get("enum", ())]
    offered += [schema[key] for key in ("const", "default") if key in schema]
    return any(value == choice and type(value) is type(choice) for choice in offered)


def unfounded_call_text(found: Unfounded) -> str:
    """The note a call made of values from nowhere is answered with."""
    shown = ", ".join(
        f"{path}={msgspec.json.encode(value).decode()}" for path, value in found.values[:_NAMED]
    )
    return (
        f"Not run: no value of this {found.call.tool} call ({shown}) appears in the request "
        "or in any result. If this tool fits the request, call it again with the values the "
        "request gives. If no tool fits, answer the request in plain text instead."
    )
