"""The simulated model: what it intends to do next, and how (often badly) it writes that down.

Two sources of replies. A **script** is consumed in order per conversation. Otherwise an **oracle**
says what a perfect model would do (call a tool with arguments, or answer), and the seeded
:class:`~forge_rt.backends.sim.FailureRates` decide how the intended call is rendered: natively,
as text in one of the dialects small models use, or wrong in content. The random draw is seeded by
(seed, conversation, turn) only, so concurrent conversations never change each other's replies.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

import msgspec

from forge_rt.backends.sim._config import Dialect, FailureRates, Intent, SimReply, SimToolCall
from forge_rt.backends.sim._view import RequestView, ViewTool
from forge_rt.core import RESPOND_TOOL_NAME
from forge_rt.core._jsonschema import (
    ARGUMENT_KEYS,
    NAME_KEYS,
    deref,
    example_arguments,
    example_value,
)
from forge_rt.guardrails import Gbnf

__all__ = [
    "PlannedCall",
    "PlannedReply",
    "call_id",
    "continue_prefill",
    "default_oracle",
    "plan_constrained",
    "plan_from_intent",
    "plan_scripted",
    "reply_key",
    "reply_rng",
    "schema_instance",
]

_encode_json = msgspec.json.Encoder().encode

FINAL_TEXT = "All requested steps are complete."

# Names a model invents when it calls a tool that does not exist.
_INVENTED = ("search", "lookup", "get_info", "run_query", "execute", "fetch_data")

_BARE_TEXT = (
    "I will use the {name} tool to take care of this.",
    "To do this I need to call {name} first, then report back.",
    "Let me think about how to approach this. The {name} tool looks like the right choice.",
    "Sure! I can help with that. I'll start by using {name}.",
)


class PlannedCall(msgspec.Struct, frozen=True):
    """A native tool call in a reply; ``arguments`` is the JSON text as it goes on the wire."""

    id: str
    name: str
    arguments: str


class PlannedReply(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the model will write for one request, before any token is generated."""

    content: str = ""
    reasoning: str | None = None
    calls: tuple[PlannedCall, ...] = ()
    finish_reason: str | None = None
    dialect: Dialect
    intent: Intent | None = None


def reply_key(seed: int, conversation: str, turn: int) -> str:
    """What seeds one reply's randomness: (seed, conversation, turn) and nothing else."""
    return f"{seed}\x00{conversation}\x00{turn}"


def reply_rng(key: str) -> random.Random:
    """The random source of one reply.

    ``random.Random`` seeds deterministically from a string (via SHA-512), independent of
    ``PYTHONHASHSEED``, so replies are the same across processes.
    """
    return random.Random(key)


def call_id(key: str, index: int) -> str:
    """A deterministic ``call_…`` id for the ``index``-th call of the reply keyed ``key``."""
    digest = hashlib.blake2b(f"{key}\x00{index}".encode(), digest_size=8).hexdigest()
    return f"call_{digest}"


def _strings(text: str | None) -> Callable[[str], str]:
    """What the sim writes for a string: ``text`` when it has one to say, else ``example <name>``."""
    if text is None:
        return lambda name: f"example {name}"
    return lambda _name: text


def _example(schema: Any, root: dict[str, Any], name: str, text: str | None = None) -> Any:
    """An example value as the sim writes it, strings fitted to their schema's lengths (a
    constrained reply must be an instance of its schema)."""
    return example_value(schema, root, name=name, strings=_strings(text), fit_lengths=True)


def _args_for(tool: ViewTool, text: str | None = None) -> dict[str, Any]:
    parameters = tool.parameters or {"type": "object"}
    return example_arguments(parameters, strings=_strings(text), fit_lengths=True)


def default_oracle(view: RequestView) -> Intent:
    """What a perfect model does next: call each offered tool once, in order, then finish.

    ``respond`` is kept for last; once every other tool has been called the oracle calls
    ``respond`` (if offered) with a short message, else answers in text. Arguments are example
    values from each tool's schema. With no tools, or ``tool_choice`` ``none``, it answers.
    """
    if not view.tools or view.tool_choice == "none":
        return FINAL_TEXT
    if view.tool_choice not in (None, "auto", "required"):
        forced = view.tool(view.tool_choice)
        if forced is not None:
            return SimToolCall(name=forced.name, arguments=_args_for(forced))
    called = set(view.called_tools())
    for tool in view.tools:
        if tool.name != RESPOND_TOOL_NAME and tool.name not in called:
            return SimToolCall(name=tool.name, arguments=_args_for(tool))
    respond = view.tool(RESPOND_TOOL_NAME)
    answer = _final_answer(view)
    if respond is not None:
        return SimToolCall(name=respond.name, arguments=_args_for(respond, answer))
    return answer


def _final_answer(view: RequestView) -> str:
    """The answer of a model that read its results: the last tool result, relayed."""
    results = [m.content for m in view.messages if m.role == "tool" and m.content]
    return f"{FINAL_TEXT} {results[-1]}" if results else FINAL_TEXT


def _draw(rates: FailureRates, rng: random.Random) -> Dialect:
    roll = rng.random()
    for dialect, rate in rates.as_dict().items():
        if roll < rate:
            return dialect
        roll -= rate
    return Dialect.NATIVE


def _wrong_type(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if schema.get("enum"):
        return "not-one-of-the-choices"
    if kind in ("integer", "number"):
        return "not a number"
    if kind == "boolean":
        return "yes"
    if kind == "array":
        return "not a list"
    if kind == "object":
        return "not an object"
    return 12345


def _break_args(tool: ViewTool | None, args: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``args`` with one required argument dropped or one argument given a wrong type."""
    schema = tool.parameters if tool is not None else {}
    props: dict[str, Any] = schema.get("properties", {})
    required = [r for r in schema.get("required", []) if r in args]
    typed = [k for k in props if k in args]
    broken = dict(args)
    if required and (not typed or rng.random() < 0.5):
        del broken[rng.choice(required)]
    elif typed:
        key = rng.choice(typed)
        broken[key] = _wrong_type(deref(props[key], schema))
    else:
        broken["unexpected_argument"] = True
    return broken


def _invent_name(intended: str, offered: set[str], rng: random.Random) -> str:
    candidates = [f"{intended}_v2", f"get_{intended}", f"{intended}_tool", *_INVENTED]
    return rng.choice([c for c in candidates if c not in offered])


def _call_text(dialect: Dialect, name: str, args: dict[str, Any]) -> str:
    """An intended call written as text in one of the dialects small models use."""
    payload = {"name": name, "arguments": args}
    if dialect is Dialect.BARE_JSON:
        return json.dumps(payload)
    if dialect is Dialect.FENCED_JSON:
        return "```json\n" + json.dumps(payload, indent=2) + "\n```"
    if dialect is Dialect.HERMES:
        return "<tool_call>\n" + json.dumps(payload) + "\n</tool_call>"
    if dialect is Dialect.QWEN_CODER:
        params = "".join(
            f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
            for k, v in args.items()
        )
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    if dialect is Dialect.MISTRAL:
        return f"[TOOL_CALLS]{name}{json.dumps(args)}"
    raise AssertionError(f"{dialect} is not a text dialect")


_TEXT_DIALECTS = frozenset(
    {Dialect.BARE_JSON, Dialect.FENCED_JSON, Dialect.HERMES, Dialect.QWEN_CODER, Dialect.MISTRAL}
)


def plan_from_intent(
    view: RequestView, intent: Intent, rates: FailureRates, key: str
) -> PlannedReply:
    """Render an oracle's intent as the seeded-random small model would write it.

    ``key`` (from :func:`reply_key`) seeds the draw; with every rate at zero nothing is drawn
    and the intended call goes out natively.
    """
    if isinstance(intent, str):
        return PlannedReply(content=intent, dialect=Dialect.TEXT, intent=intent)
    args = intent.arguments
    identifier = intent.id or call_id(key, 0)
    if isinstance(args, str) or not rates.any():
        native = PlannedCall(identifier, intent.name, _json_text(args))
        return PlannedReply(calls=(native,), dialect=Dialect.NATIVE, intent=intent)
    rng = reply_rng(key)
    dialect = _draw(rates, rng)
    name = intent.name
    if dialect in _TEXT_DIALECTS:
        return PlannedReply(content=_call_text(dialect, name, args), dialect=dialect, intent=intent)
    if dialect is Dialect.BARE_TEXT:
        text = rng.choice(_BARE_TEXT).format(name=name.replace("_", " "))
        return PlannedReply(content=text, dialect=dialect, intent=intent)
    if dialect is Dialect.UNKNOWN_TOOL:
        name = _invent_name(name, {t.name for t in view.tools}, rng)
    elif dialect is Dialect.WRONG_ARGS:
        args = _break_args(view.tool(name), args, rng)
    elif dialect is Dialect.PREMATURE_TERMINAL:
        respond = view.tool(RESPOND_TOOL_NAME)
        if respond is None or name == RESPOND_TOOL_NAME:
            dialect = Dialect.NATIVE  # nothing to call early: the intended call goes out as is
        else:
            name, args = respond.name, _args_for(respond, FINAL_TEXT)
    call = PlannedCall(identifier, name, _json_text(args))
    return PlannedReply(calls=(call,), dialect=dialect, intent=intent)


def _json_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else _encode_json(arguments).decode()


def plan_scripted(reply: SimReply, key: str) -> PlannedReply:
    """A scripted reply, exactly as written (calls without an id get deterministic ones)."""
    calls = tuple(
        PlannedCall(c.id or call_id(key, index), c.name, _json_text(c.arguments))
        for index, c in enumerate(reply.tool_calls)
    )
    return PlannedReply(
        content=reply.text,
        reasoning=reply.reasoning,
        calls=calls,
        finish_reason=reply.finish_reason,
        dialect=Dialect.SCRIPTED,
    )


_TEXT_KEYS = ("message", "text", "content", "answer", "response")


def _mentions(schema: dict[str, Any], root: dict[str, Any], name: str) -> bool:
    """Whether ``schema`` pins a property to the tool name ``name`` (a tool-call branch, a union
    holding one, or a list of such calls)."""
    schema = deref(schema, root)
    if schema.get("type") == "array" and "items" in schema:
        return _mentions(schema["items"], root, name)
    for key in ("anyOf", "oneOf"):
        if any(_mentions(branch, root, name) for branch in schema.get(key, ())):
            return True
    for key in NAME_KEYS:
        sub = deref(schema.get("properties", {}).get(key, {}), root)
        if sub.get("const") == name or name in sub.get("enum", ()):
            return True
    return False


def schema_instance(schema: dict[str, Any], root: dict[str, Any], intent: Intent) -> Any:
    """A JSON instance of ``schema`` that carries ``intent`` wherever the schema has room for it.

    A tool-call shaped schema (an object with a name-like and an arguments-like property, or a
    union of such branches) gets the intended name and arguments; a union picks the branch that
    names the intended tool; a plain object takes the intended arguments that it declares; a
    text intent fills a message-like string property. Everything else gets example values.
    """
    schema = deref(schema, root)
    name = intent.name if isinstance(intent, SimToolCall) else None
    args = intent.arguments if isinstance(intent, SimToolCall) else None
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            branches = [deref(b, root) for b in schema[key]]
            chosen = next((b for b in branches if name and _mentions(b, root, name)), None)
            if chosen is None:
                chosen = next((b for b in branches if b.get("type") != "null"), branches[0])
            return schema_instance(chosen, root, intent)
    if schema.get("allOf") and len(schema["allOf"]) == 1:
        return schema_instance(schema["allOf"][0], root, intent)
    kind = schema.get("type", "object" if "properties" in schema else None)
    if kind == "array" and "items" in schema:
        count = max(1, int(schema.get("minItems", 1)))
        return [schema_instance(schema["items"], root, intent) for _ in range(count)]
    if kind != "object" or "properties" not in schema:
        text = intent if isinstance(intent, str) else None
        return _example(schema, root, "value", text)
    props: dict[str, Any] = schema["properties"]
    required = set(schema.get("required", props))
    out: dict[str, Any] = {}
    for key, sub in props.items():
        resolved = deref(sub, root)
        if key in NAME_KEYS and name is not None and resolved.get("type", "string") == "string":
            pinned = resolved.get("const", None)
            allowed = resolved.get("enum")
            fits = pinned in (None, name) and (allowed is None or name in allowed)
            out[key] = name if fits else _example(resolved, root, key)
        elif key in ARGUMENT_KEYS and isinstance(args, dict) and _args_fit(args, resolved):
            out[key] = _fitted(args, resolved, root)
        elif isinstance(args, dict) and key in args:
            out[key] = _fitted(args[key], resolved, root)
        elif isinstance(intent, str) and key in _TEXT_KEYS and resolved.get("type") == "string":
            out[key] = intent
        elif key in required:
            out[key] = (
                schema_instance(resolved, root, intent)
                if "properties" in resolved or ("anyOf" in resolved or "oneOf" in resolved)
                else _example(resolved, root, key)
            )
    return out


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "array": (list,),
    "object": (dict,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _fitted(value: Any, schema: Any, root: dict[str, Any]) -> Any:
    """``value`` cut to the ``maxLength`` and ``maxItems`` of ``schema``, as a model decoding
    under the constraint is cut off: the grammar closes the string or the list there."""
    schema = deref(schema, root) if isinstance(schema, dict) else {}
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key, ()):
            resolved = deref(branch, root)
            kinds = resolved.get("type")
            if isinstance(kinds, str) and isinstance(value, _JSON_TYPES.get(kinds, ())):
                return _fitted(value, resolved, root)
    if isinstance(value, str) and "maxLength" in schema:
        return value[: int(schema["maxLength"])]
    if isinstance(value, list):
        kept = value[: int(schema["maxItems"])] if "maxItems" in schema else value
        return [_fitted(item, schema.get("items", {}), root) for item in kept]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _fitted(v, props.get(k, {}), root) for k, v in value.items()}
    return value


def _args_fit(args: dict[str, Any], schema: dict[str, Any]) -> bool:
    props = schema.get("properties")
    if props is None:
        return bool(schema.get("type", "object") == "object")
    required = set(schema.get("required", ()))
    return set(args) <= set(props) and required <= set(args)


def plan_constrained(view: RequestView, intent: Intent) -> PlannedReply:
    """The intended move written as an instance of the request's output constraint.

    A JSON schema gets a schema instance (a tool-call schema that also admits an array of calls
    gets the one intended call as a bare object, its first branch that names it; strings and
    lists cut to the schema's bounds); a GBNF grammar (which the sim does not parse) gets the
    intended call as bare ``{"name": …, "arguments": …}`` JSON, the shape tool-call grammars
    describe -- unless the intent is text the grammar admits as it is (a grammar with a text
    branch beside the calls), which is then written as plain text; a schema-less JSON mode
    gets the call as JSON too.
    """
    if view.grammar is not None and isinstance(intent, str) and Gbnf(view.grammar).accepts(intent):
        return PlannedReply(content=intent, dialect=Dialect.CONSTRAINED, intent=intent)
    if view.schema is not None:
        value = schema_instance(view.schema, view.schema, intent)
    elif isinstance(intent, SimToolCall):
        value = {"name": intent.name, "arguments": intent.arguments}
    else:
        value = {"response": intent}
    return PlannedReply(
        content=_encode_json(value).decode(), dialect=Dialect.CONSTRAINED, intent=intent
    )


def continue_prefill(plan: PlannedReply, prefill: str) -> PlannedReply:
    """The part of ``plan`` that follows an assistant prefill the client already has.

    When the planned text starts with the prefill only the rest is written (a resumed reply
    continues where it stopped); otherwise the model writes its whole reply after the prefill.
    """
    if not plan.content.startswith(prefill):
        return plan
    return msgspec.structs.replace(plan, content=plan.content[len(prefill) :])
