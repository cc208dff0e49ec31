"""Constrained decoding: a schema (or grammar) whose every instance is a valid tool call.

An enumerable choice belongs in a grammar, not only in a prompt. :func:`tool_call_schema` builds
the JSON schema of the calls of the tools (llama-server ``json_schema``, vLLM structured output,
Ollama ``format``); :func:`tool_call_grammar` writes the same language as GBNF. Both are bounded
(see :mod:`forge_rt.guardrails._bounds`), and :func:`reply_token_budget` is the ``max_tokens``
that follows. :func:`choose_constraint` decides, per workflow mode and backend capability, what
to send, and logs the decision with its reason: a backend that cannot constrain is never
switched silently.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from actors import quiet_logger
from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ClientCapabilities,
    ConstrainMode,
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    OutputConstraint,
    ToolCall,
    ToolSpec,
)
from forge_rt.core._jsonschema import RecursiveRefError, RefExpansion, SchemaRefError
from forge_rt.errors import ConstraintUnsupportedError, ToolSchemaError, WorkflowDefinitionError
from forge_rt.guardrails._bounds import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_LENGTH,
    FREE_CALL_MIN_TOKENS,
    MAX_REPLY_TOKENS,
    PLAIN_REPLY_TOKENS,
    bounded,
    call_tokens,
    calls_tokens,
    instance_tokens,
)
from forge_rt.guardrails._exclude import Excluded, argument_variants, render_json
from forge_rt.guardrails._rescue_args import schema_of
from forge_rt.guardrails._shape import CallShape
from forge_rt.guardrails._validator import call_key

__all__ = [
    "ConstraintDecision",
    "NarrowedConstraint",
    "choose_constraint",
    "reply_token_budget",
    "tool_call_grammar",
    "tool_call_schema",
]

log = quiet_logger(__name__)

_ONE_OR_MORE = CallShape()  # the default: one call, or several as an array

_DROP = frozenset({"$defs", "definitions", "$schema", "$id"})


class _Inliner:
    """Copies a schema with every local ``$ref`` replaced by its target (recursion is refused)."""

    def __init__(self, root: Mapping[str, Any], tool: str) -> None:
        self._refs = RefExpansion(root)
        self._tool = tool

    def copy(self, schema: Any, *, close_objects: bool) -> Any:
        if isinstance(schema, list):
            return [self.copy(item, close_objects=close_objects) for item in schema]
        if not isinstance(schema, Mapping):
            return schema
        if "$ref" in schema:
            try:
                with self._refs.expand(schema) as target:
                    return self.copy(target, close_objects=close_objects)
            except RecursiveRefError as exc:
                raise ToolSchemaError(
                    f"{self._tool}: {exc} cannot be inlined into a flat schema for constrained "
                    "decoding; flatten the parameter model or use constrain='never'"
                ) from exc
            except SchemaRefError as exc:
                raise ToolSchemaError(
                    f"{self._tool}: {exc}; constrained decoding needs every $ref resolvable locally"
                ) from exc
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _DROP:
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
                out[key] = {
                    name: self.copy(sub, close_objects=close_objects) for name, sub in value.items()
                }
            elif key in ("const", "enum", "default", "examples", "example"):
                out[key] = value
            else:
                out[key] = self.copy(value, close_objects=close_objects)
        if close_objects and isinstance(out.get("properties"), dict):
            # The constraint must not produce the undeclared arguments validation refuses; a
            # tool without parameters takes ``{}``.
            out.setdefault("additionalProperties", False)
        return out


def _arguments_schema(spec: ToolSpec) -> dict[str, Any]:
    root = schema_of(spec)
    inlined = _Inliner(root, spec.name).copy(root, close_objects=True)
    if not isinstance(inlined, dict):
        raise ToolSchemaError(f"{spec.name}: parameters must be a JSON-schema object")
    inlined.setdefault("type", "object")
    result: dict[str, Any] = bounded(inlined)
    return result


def _check_tools(tools: Sequence[ToolSpec]) -> None:
    if not tools:
        raise WorkflowDefinitionError(
            "no tools to constrain to: a tool-call schema needs at least one tool"
        )
    names = [spec.name for spec in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise WorkflowDefinitionError(f"tool names must be unique, got duplicates {duplicates}")


def tool_call_schema(
    tools: Sequence[ToolSpec],
    *,
    shape: CallShape = _ONE_OR_MORE,
    exclude: Sequence[ToolCall] = (),
    answers: Sequence[str] = (),
) -> dict[str, Any]:
    """A JSON schema whose instances are exactly the replies calling ``tools``.

    ``anyOf`` one closed object ``{"name", "arguments"}`` per tool: ``name`` is a ``const``,
    ``arguments`` the tool's parameter schema with ``$ref`` inlined and ``$defs`` dropped
    (llama.cpp's converter does not follow references), objects closed where the validator
    would reject extra keys, strings and arrays bounded (:func:`~forge_rt.guardrails.bounded`).

    With ``shape.parallel`` (the default) a JSON array of 1 to
    :data:`~forge_rt.guardrails.DEFAULT_MAX_CALLS` such calls is a further branch; a single call
    stays a bare object, the shape small models write by themselves and the one the proxy streams
    a ``respond`` message from. With ``shape.listed`` the reply is always the array: every call
    then ends at a choice between ``,`` and ``]``, where a model weighs whether the request asks
    for more (as a bare object, a small model nearly always stops after one call). With
    ``shape.one_tool`` too, the array is of one tool's calls (``anyOf`` one array per tool). See
    :class:`~forge_rt.guardrails.CallShape`.

    ``exclude``: calls the reply may not make. A tool with an excluded call is offered only with
    arguments that differ from each of them in at least one argument (see
    :mod:`forge_rt.guardrails._exclude`); a tool whose arguments cannot differ is left out, and
    :class:`~forge_rt.errors.WorkflowDefinitionError` is raised if that leaves none.

    ``answers``: the texts a ``respond`` call's ``message`` may be, exactly (an ``enum``); empty,
    any text (``Guardrails.answer_choices``).
    """
    _check_tools(tools)
    calls: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"name": {"const": spec.name}, "arguments": render_json(args)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for spec, args in _call_arguments(tools, exclude, answers)
    ]
    if not shape.parallel:
        return {"anyOf": calls}
    if shape.listed and shape.one_tool:
        by_tool: dict[str, list[dict[str, Any]]] = {}
        for call in calls:
            by_tool.setdefault(call["properties"]["name"]["const"], []).append(call)
        return {
            "anyOf": [
                _array_of(group, most=_most_calls(shape, name)) for name, group in by_tool.items()
            ]
        }
    batch = _array_of(calls)
    return batch if shape.listed else {"anyOf": [*calls, batch]}


def _most_calls(shape: CallShape, tool: str) -> int:
    """How many calls a list of ``tool``'s calls may hold: one for a tool that writes."""
    return 1 if tool in shape.single else DEFAULT_MAX_CALLS


def _array_of(calls: list[dict[str, Any]], most: int = DEFAULT_MAX_CALLS) -> dict[str, Any]:
    """A JSON array of 1 to ``most`` of ``calls``."""
    return {"type": "array", "items": {"anyOf": calls}, "minItems": 1, "maxItems": most}


def _call_arguments(
    tools: Sequence[ToolSpec], exclude: Sequence[ToolCall], answers: Sequence[str] = ()
) -> list[tuple[ToolSpec, dict[str, Any]]]:
    """Each tool with each arguments schema it may be called with (several where ``exclude``
    holds calls of it: one per way to differ from them; none where its calls cannot differ);
    ``respond``'s message one of ``answers`` where there are some."""
    out: list[tuple[ToolSpec, dict[str, Any]]] = []
    for spec in tools:
        blocked = [call.args for call in exclude if call.tool == spec.name]
        schema = _arguments_schema(spec)
        if answers and spec.name == RESPOND_TOOL_NAME:
            schema = _answering(schema, answers)
        out += [(spec, args) for args in argument_variants(schema, blocked)]
    if not out:
        raise WorkflowDefinitionError(
            f"no call is left to constrain to: every call of {sorted(t.name for t in tools)} "
            "is excluded"
        )
    return out


def _answering(schema: Mapping[str, Any], answers: Sequence[str]) -> dict[str, Any]:
    """A ``respond`` arguments schema whose ``message`` is exactly one of ``answers``."""
    properties = dict(schema.get("properties") or {})
    properties["message"] = {"type": "string", "enum": list(dict.fromkeys(answers))}
    return {**schema, "properties": properties}


# --- GBNF --------------------------------------------------------------------------------------

_MORE_ITEMS = f"{{0,{DEFAULT_MAX_ITEMS - 1}}}"  # after the first item of an unbounded container

_BASE_RULES = {
    # Twelve characters: a newline and two-space indentation five levels deep (an object inside
    # the arguments of a call in an array of calls), and no longer run between two tokens.
    "ws": r"[ \t\n]{0,12}",
    # One character of a JSON string; a \u escape is a BMP character or a whole surrogate pair,
    # so lengths count as Python counts them and no lone surrogate is ever produced.
    "char": r'[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" bmp | "u" [dD] [89abAB] hex hex "\\u" [dD] [c-fC-F] hex hex)',
    "bmp": "[0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex",
    "hex": "[0-9a-fA-F]",
    # A value of any type (a parameter without a schema) is bounded like a declared one.
    "string": f'"\\"" char{{0,{DEFAULT_MAX_LENGTH}}} "\\""',
    "integer": r'"-"? ([0-9] | [1-9] [0-9]{1,15})',
    "number": r'"-"? ([0-9] | [1-9] [0-9]{1,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?',
    "boolean": r'"true" | "false"',
    "null": r'"null"',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )'
    + _MORE_ITEMS
    + ' )? ws "}"',
    "array": '"[" ws ( value ( ws "," ws value )' + _MORE_ITEMS + ' )? ws "]"',
}


def _literal(text: str) -> str:
    """``text`` as a GBNF double-quoted literal."""
    out = []
    for c in text:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _json_literal(value: Any) -> str:
    return _literal(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


class _Grammar:
    """Builds GBNF rules for a JSON schema (already inlined), one named rule per sub-schema."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}
        self._tool = ""

    def for_tool(self, tool: str) -> None:
        """Name the tool whose schema is converted next (for error messages)."""
        self._tool = tool

    def name(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        candidate, n = base, 1
        while candidate in self.rules or candidate in _BASE_RULES or candidate == "root":
            n += 1
            candidate = f"{base}-{n}"
        self.rules[candidate] = ""  # reserved until defined
        return candidate

    def text(self, root: str) -> str:
        """The whole grammar: ``root`` as its start rule, the rules built so far, the base rules."""
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self.rules.items()]
        lines += [f"{name} ::= {body}" for name, body in _BASE_RULES.items()]
        return "\n".join(lines) + "\n"

    def define(self, hint: str, body: str) -> str:
        name = self.name(hint)
        self.rules[name] = body
        return name

    def expr(self, schema: Any, hint: str) -> str:
        """A GBNF expression matching exactly the JSON texts of ``schema``'s instances."""
        if isinstance(schema, Excluded):
            return self.define(hint, schema.gbnf())
        if schema is True or schema == {} or not isinstance(schema, Mapping):
            return "value"
        literal = self.literal_expr(schema, hint)
        if literal is not None:
            return literal
        combined = self.combined_expr(schema, hint)
        if combined is not None:
            return combined
        return self.typed_expr(schema, hint)

    def literal_expr(self, schema: Mapping[str, Any], hint: str) -> str | None:
        """The alternatives of a ``const`` or ``enum`` schema; None when it is neither. An
        ``enum`` that is empty or no list is an error in the tool's schema."""
        if "const" in schema:
            return _json_literal(schema["const"])
        if "enum" not in schema:
            return None
        values = schema["enum"]
        if not isinstance(values, list) or not values:
            raise ToolSchemaError(f"{self._tool}: empty enum at {hint}")
        return "(" + " | ".join(_json_literal(v) for v in values) + ")"

    def combined_expr(self, schema: Mapping[str, Any], hint: str) -> str | None:
        """A union's branches as alternatives, or a one-part ``allOf`` as its part; None for
        neither. An ``allOf`` of several parts is an error: a grammar cannot intersect them."""
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [self.expr(sub, f"{hint}-{i}") for i, sub in enumerate(schema[key])]
                return "(" + " | ".join(options) + ")"
        if "allOf" not in schema:
            return None
        parts = schema["allOf"]
        if len(parts) != 1:
            raise ToolSchemaError(
                f"{self._tool}: allOf with {len(parts)} parts at {hint} cannot be turned "
                "into a grammar"
            )
        return self.expr(parts[0], hint)

    def typed_expr(self, schema: Mapping[str, Any], hint: str) -> str:
        """The expression for ``schema``'s ``type`` (``object`` when it only lists
        ``properties``; any value when it names none); a list of types is their union."""
        kind = schema.get("type")
        if kind is None and "properties" in schema:
            kind = "object"
        if kind is None:
            return "value"
        if isinstance(kind, list):
            options = [self.expr({**schema, "type": k}, f"{hint}-{k}") for k in kind]
            return "(" + " | ".join(options) + ")"
        if kind == "string":
            return self.string(schema, hint)
        if kind in ("integer", "number", "boolean", "null"):
            return str(kind)
        if kind == "array":
            return self.array(schema, hint)
        if kind == "object":
            return self.object(schema, hint)
        raise ToolSchemaError(f"{self._tool}: unknown type {kind!r} at {hint}")

    def string(self, schema: Mapping[str, Any], hint: str) -> str:
        low = schema.get("minLength")
        high = schema.get("maxLength")
        if low is None and high is None:
            return "string"
        if not low and high == DEFAULT_MAX_LENGTH:
            return "string"  # the base rule already has the default bound
        low = int(low or 0)
        bounds = f"{{{low},{'' if high is None else int(high)}}}"
        return self.define(hint, f'"\\"" char{bounds} "\\""')

    def array(self, schema: Mapping[str, Any], hint: str) -> str:
        item = self.expr(schema.get("items", True), f"{hint}-item")
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        if high is not None and int(high) == 0:
            return self.define(hint, '"[" ws "]"')
        more_high = "" if high is None else str(int(high) - 1)
        repeat = "*" if low <= 1 and high is None else f"{{{max(low - 1, 0)},{more_high}}}"
        more = f'( ws "," ws {item} ){repeat}'
        body = f"{item} {more}"
        if low == 0:
            body = f"( {body} )?"
        return self.define(hint, f'"[" ws {body} ws "]"')

    def object(self, schema: Mapping[str, Any], hint: str) -> str:
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            extra = schema.get("additionalProperties")
            if extra is False:
                return self.define(hint, '"{" ws "}"')
            if not isinstance(extra, Mapping) or not extra:
                return "object"
            # A mapping whose values all follow one schema (dict[str, X]).
            value = self.expr(extra, f"{hint}-value")
            member = f'string ws ":" ws {value}'
            return self.define(
                hint, f'"{{" ws ( {member} ( ws "," ws {member} ){_MORE_ITEMS} )? ws "}}"'
            )
        required = set(schema.get("required", []))
        items = [
            (
                _literal(json.dumps(key, ensure_ascii=False)),
                self.expr(sub, f"{hint}-{key}"),
                key in required,
            )
            for key, sub in props.items()
        ]
        memo: dict[tuple[int, bool], str] = {}

        def rest(i: int, first: bool) -> str:
            """Properties ``i..`` in order, optional ones skippable; "" when nothing remains."""
            if i == len(items):
                return ""
            if (i, first) in memo:
                return memo[(i, first)]
            key, value, needed = items[i]
            pair = f'{key} ws ":" ws {value}'
            if not first:
                pair = f'"," ws {pair}'
            after = rest(i + 1, False)
            taken = f"{pair} ws {after}".strip() if after else pair
            if needed:
                body = taken
            else:
                skipped = rest(i + 1, first)
                body = f"( {taken} )?" if not skipped else f"( {taken} | {skipped} )"
            name = self.define(f"{hint}-p{i}{'f' if first else ''}", body)
            memo[(i, first)] = name
            return name

        members = rest(0, True)
        return self.define(hint, f'"{{" ws {members} ws "}}"')


def tool_call_grammar(
    tools: Sequence[ToolSpec],
    *,
    shape: CallShape = _ONE_OR_MORE,
    exclude: Sequence[ToolCall] = (),
    answers: Sequence[str] = (),
) -> str:
    """A GBNF grammar for the same replies :func:`tool_call_schema` describes.

    Types, required and optional properties, enums, consts, string and array lengths are
    enforced; numeric bounds, ``pattern`` and ``format`` are not (validation checks them). Keys
    come in schema order, whitespace between tokens is at most 12 characters, strings and arrays
    (and values of any type) are bounded, and numbers have at most 16 integer digits, 16
    decimals and a two-digit exponent, so sampling cannot run away inside a value or produce a
    number that does not fit a double. ``shape``, ``exclude`` and ``answers`` act as in
    :func:`tool_call_schema`.

    ``shape.prose``: a reply may also be text whose first character cannot open a call (not
    ``{``, ``[``, a backtick, ``<`` or whitespace), and the calls may come in a code fence: the
    model decides *whether* it calls, the grammar holds only *how*. A JSON schema has no text
    branch (see ``GuardrailOptions.prose_answers``).
    """
    _check_tools(tools)
    grammar = _Grammar()
    alternatives: list[str] = []
    by_tool: dict[str, list[str]] = {}
    for spec, arguments in _call_arguments(tools, exclude, answers):
        grammar.for_tool(spec.name)
        args = grammar.expr(arguments, f"{spec.name}-args")
        alternative = grammar.define(
            f"call-{spec.name}",
            f'"{{" ws "\\"name\\"" ws ":" ws {_json_literal(spec.name)} ws "," ws '
            f'"\\"arguments\\"" ws ":" ws {args} ws "}}"',
        )
        alternatives.append(alternative)
        by_tool.setdefault(spec.name, []).append(alternative)
    if shape.parallel and shape.listed and shape.one_tool:
        lists = []
        for name, group in by_tool.items():
            of_tool = grammar.define(f"calls-of-{name}", " | ".join(group))
            lists.append(_gbnf_list(of_tool, most=_most_calls(shape, name)))
        root = " | ".join(lists)
    elif shape.parallel:
        call = grammar.define("call", " | ".join(alternatives))
        batch = _gbnf_list(call)
        root = batch if shape.listed else f"{call} | {batch}"
    else:
        root = " | ".join(alternatives)
    if shape.prose:
        calls = grammar.define("calls", root)
        fenced = grammar.define("fenced", f'"```" "json"? ws {calls} ws "```"')
        text = grammar.define("prose", _PROSE)
        root = f"{calls} | {fenced} | {text}"
    return grammar.text(root)


def _gbnf_list(call: str, most: int = DEFAULT_MAX_CALLS) -> str:
    """A GBNF JSON array of 1 to ``most`` of ``call``."""
    more = f' ( ws "," ws {call} ){{0,{most - 1}}}' if most > 1 else ""
    return f'"[" ws {call}{more} ws "]"'


# Text that cannot be the start of a call: its first character opens no JSON value, fence or tag.
_PROSE = r"[^\x5B{`<\x20\t\n\r] .*"


def schema_grammar(schema: Mapping[str, Any]) -> str:
    """A GBNF grammar for the JSON texts of ``schema`` (one :func:`tool_call_schema` built):
    a call the backend ran under a JSON schema is continued under the rest of this grammar."""
    grammar = _Grammar()
    return grammar.text(grammar.expr(schema, "reply"))


# --- choosing --------------------------------------------------------------------------------


class ConstraintDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What to send the backend for one workflow, and why (the reason is logged and reported)."""

    constraint: OutputConstraint | None
    reason: str
    mode: str


def _kind(constraint: OutputConstraint | None) -> str:
    if constraint is None:
        return "none"
    return "json_schema" if isinstance(constraint, JsonSchemaConstraint) else "grammar"


def choose_constraint(
    mode: ConstrainMode,
    capabilities: ClientCapabilities,
    tools: Sequence[ToolSpec],
    *,
    backend: str | None = None,
    shape: CallShape = _ONE_OR_MORE,
) -> ConstraintDecision:
    """Decide whether (and how) to constrain the model's output to calls of ``tools``.

    - ``never``: no constraint; rescue parsing reads whatever the model writes.
    - ``auto`` (the default): a JSON schema where the backend accepts one, else a GBNF grammar
      where it accepts that, else no constraint (rescue parsing reads the reply). Constrained
      decoding helps small local models most, so it is on wherever it can be.
    - ``always``: the same, but a backend with neither raises
      :class:`~forge_rt.errors.ConstraintUnsupportedError`.

    Pass the tools the model is offered, ``respond`` included, so it can still answer in text.
    With ``shape.prose`` a backend that takes both kinds gets the grammar, one that takes only a
    JSON schema gets the calls alone. The decision is logged (``guardrails.constraint``).
    """
    if mode not in ("auto", "always", "never"):
        raise ValueError(f"constrain must be 'auto', 'always' or 'never', got {mode!r}")
    constraint: OutputConstraint | None = None
    if mode == "never":
        reason = "constrain='never': replies are read by rescue parsing"
    elif not tools:
        reason = "no tools are offered, so there is no call to constrain to"
    elif shape.prose and capabilities.grammar:
        gbnf = tool_call_grammar(tools, shape=shape)
        constraint = GrammarConstraint(gbnf=gbnf, admits_text=True)
        reason = (
            f"the backend accepts a GBNF grammar: a reply is text or calls of {len(tools)} tools"
        )
    elif capabilities.json_schema:
        schema = tool_call_schema(tools, shape=shape)
        constraint = JsonSchemaConstraint(schema=schema)
        reason = (
            f"the backend accepts a JSON schema: every reply is a call of one of {len(tools)} tools"
        )
    elif capabilities.grammar:
        gbnf = tool_call_grammar(tools, shape=msgspec.structs.replace(shape, prose=False))
        constraint = GrammarConstraint(gbnf=gbnf)
        reason = f"the backend accepts a GBNF grammar: every reply is a call of one of {len(tools)} tools"
    elif mode == "always":
        raise ConstraintUnsupportedError(
            f"constrain='always' but backend {backend or '(unnamed)'} accepts neither a JSON "
            "schema nor a grammar; use constrain='auto' to rely on rescue parsing there, or a "
            "backend that supports structured output (llama-server, vLLM, Ollama)",
            mode=mode,
            backend=backend,
        )
    else:
        reason = "the backend accepts no JSON schema or grammar: replies are read by rescue parsing"
    log.debug(  # a decision of the run's setup, not news: the trace header holds it too
        "guardrails.constraint",
        mode=mode,
        constraint=_kind(constraint),
        tools=len(tools),
        backend=backend,
        reason=reason,
    )
    return ConstraintDecision(constraint=constraint, reason=reason, mode=mode)


NARROWED_KEPT = 64
"""How many narrowed constraints a :class:`NarrowedConstraint` keeps built (least recently used
out first): the tool sets of one workflow are few, its exclusions and answers many."""


class NarrowedConstraint:
    """A workflow's constraint, narrowed each iteration to the tools callable now.

    The tools offered in the prompt stay the same (so the backend's KV cache of the prompt stays
    valid); only the output constraint shrinks. Each narrowing is built once and kept, in the
    ``shape`` ``constraint`` was built with. ``grammar``: the backend takes a GBNF grammar too;
    then a narrowing that holds the answer to texts with a character JSON escapes (a quote, a
    backslash, a line break) is a grammar even where ``constraint`` is a JSON schema:
    llama-server's ``/completion`` lets a string held to such an ``enum`` end early at the
    escape, cutting the answer.
    """

    def __init__(
        self,
        constraint: OutputConstraint | None,
        tools: Sequence[ToolSpec],
        *,
        shape: CallShape = _ONE_OR_MORE,
        grammar: bool = False,
    ) -> None:
        self._constraint = constraint
        self._grammar = grammar
        self._all = frozenset(t.name for t in tools)
        prose = isinstance(constraint, GrammarConstraint) and constraint.admits_text
        self._shape = msgspec.structs.replace(shape, prose=prose)
        # Bounded: exclusions and answers differ from turn to turn; a chat daemon runs for weeks.
        self._narrowed: OrderedDict[
            tuple[frozenset[str], frozenset[Any], tuple[str, ...], frozenset[Any]],
            OutputConstraint,
        ] = OrderedDict()

    def to(
        self,
        allowed: Sequence[ToolSpec],
        *,
        exclude: Sequence[ToolCall] = (),
        answers: Sequence[str] = (),
        pins: Sequence[ToolCall] = (),
    ) -> OutputConstraint | None:
        """The constraint for a reply that may call only ``allowed`` (all of them, nothing
        excluded, no answers, no pins: unchanged), none of the calls in ``exclude``, ``respond``
        only with one of ``answers`` as its message where there are some, and each tool of
        ``pins`` only with the values its pin's arguments give (``Guardrails.pinned_calls``).
        A tool whose arguments cannot differ from ``exclude`` (``Guardrails.excluded_calls``)
        is left out while another tool is left, else nothing is excluded.
        """
        constraint = self._constraint
        allowed, blocked = _excludable(allowed, exclude)
        names = frozenset(spec.name for spec in allowed)
        answers = tuple(answers) if RESPOND_TOOL_NAME in names else ()
        pins = [pin for pin in pins if pin.tool in names]
        unchanged = names == self._all and not blocked and not answers and not pins
        if constraint is None or not names or unchanged:
            return constraint
        pinned = frozenset(call_key(pin) for pin in pins)
        key = (names, frozenset(call_key(call) for call in blocked), answers, pinned)
        narrowed = self._narrowed.get(key)
        if narrowed is not None:
            self._narrowed.move_to_end(key)
            return narrowed
        by_tool = {pin.tool: pin.args for pin in pins}
        allowed = [
            _pinned(spec, by_tool[spec.name]) if spec.name in by_tool else spec for spec in allowed
        ]
        narrowed = self._build(constraint, allowed, blocked, answers)
        self._narrowed[key] = narrowed
        if len(self._narrowed) > NARROWED_KEPT:
            self._narrowed.popitem(last=False)
        return narrowed

    def _build(
        self,
        constraint: OutputConstraint,
        allowed: Sequence[ToolSpec],
        blocked: Sequence[ToolCall],
        answers: tuple[str, ...],
    ) -> OutputConstraint:
        """A new constraint of ``constraint``'s kind (a JSON schema, else a grammar) for
        ``allowed`` without ``blocked``, in this workflow's shape."""
        shape = self._shape
        escaped = self._grammar and any(_JSON_ESCAPED.search(a) for a in answers)
        if isinstance(constraint, JsonSchemaConstraint) and not escaped:
            schema = tool_call_schema(allowed, shape=shape, exclude=blocked, answers=answers)
            return JsonSchemaConstraint(schema=schema)
        gbnf = tool_call_grammar(allowed, shape=shape, exclude=blocked, answers=answers)
        return GrammarConstraint(gbnf=gbnf, admits_text=shape.prose)


def _pinned(spec: ToolSpec, values: Mapping[str, Any]) -> ToolSpec:
    """``spec`` with each top-level field of ``values`` held to that one value."""
    schema = schema_of(spec)
    properties = dict(schema.get("properties") or {})
    for field, value in values.items():
        properties[field] = {"enum": [value]}
    parameters = {**schema, "properties": properties}
    return ToolSpec(name=spec.name, description=spec.description, parameters=parameters)


# A character a JSON string writes escaped: a quote, a backslash, a control character.
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _excludable(
    allowed: Sequence[ToolSpec], exclude: Sequence[ToolCall]
) -> tuple[Sequence[ToolSpec], list[ToolCall]]:
    """The tools still offered and the blocked calls a constraint leaves out of them (see
    :meth:`NarrowedConstraint.to`)."""
    names = frozenset(spec.name for spec in allowed)
    blocked = [call for call in exclude if call.tool in names]
    if not blocked:
        return allowed, blocked
    left = [spec for spec in allowed if _can_differ(spec, blocked)]
    if not left:
        log.info("guardrails.exclusion_impossible", tools=sorted(names))
        return allowed, []
    kept = frozenset(spec.name for spec in left)
    return left, [call for call in blocked if call.tool in kept]


def _can_differ(spec: ToolSpec, blocked: Sequence[ToolCall]) -> bool:
    """Whether ``spec`` has a call other than the ``blocked`` ones that a constraint can write."""
    mine = [call.args for call in blocked if call.tool == spec.name]
    return not mine or bool(argument_variants(_arguments_schema(spec), mine))


# --- the token budget ----------------------------------------------------------------------


def reply_token_budget(request: InferenceRequest) -> int:
    """The ``max_tokens`` a reply to ``request`` needs: what it may contain, and no more.

    - A JSON-schema constraint: the most tokens an instance of it can take
      (:func:`~forge_rt.guardrails.instance_tokens`), so the cap never cuts a reply the
      constraint admits; :func:`tool_call_schema` bounds every value, so this is finite.
    - A grammar, built by :func:`tool_call_grammar` from the request's tools: the same for an
      array of up to :data:`~forge_rt.guardrails.DEFAULT_MAX_CALLS` of their calls (the widest
      grammar they can have); a grammar without tools is someone else's, and gets
      :data:`~forge_rt.guardrails.MAX_REPLY_TOKENS`.
    - Tools but no constraint (free decoding): one call of the widest tool, since rescue runs
      every complete call before a cut; at least :data:`~forge_rt.guardrails.FREE_CALL_MIN_TOKENS`.
    - No tools: :data:`~forge_rt.guardrails.PLAIN_REPLY_TOKENS`.

    Never more than :data:`~forge_rt.guardrails.MAX_REPLY_TOKENS`. A schema that cannot be
    inlined (a broken or recursive ``$ref``) is priced from what resolves. The guarded step
    applies this where the caller set no ``max_tokens``.
    """
    constraint, tools = request.constraint, request.tools
    if isinstance(constraint, JsonSchemaConstraint):
        budget = instance_tokens(constraint.schema)
    elif not tools:
        return MAX_REPLY_TOKENS if constraint is not None else PLAIN_REPLY_TOKENS
    else:
        each = [call_tokens(spec.name, schema_of(spec)) for spec in tools]
        if constraint is not None:
            budget = calls_tokens(each, max_calls=DEFAULT_MAX_CALLS)
        else:
            budget = max(FREE_CALL_MIN_TOKENS, *each)
    return min(budget, MAX_REPLY_TOKENS)
