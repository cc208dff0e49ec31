"""Turn one model reply into calls that may run, or the corrections the model must see.

The validator is stateless: it rescues calls written as text, collapses identical calls repeated
inside one reply, and checks each call's tool name and arguments against the tools' schemas.
Budgets and escalation live elsewhere (:mod:`._errors_budget`, :mod:`._facade`).

An argument the schema does not have is dropped, and the call runs without it (``ignored`` says
which, so the result can tell the model); a value that is a placeholder or an echo of a
correction is refused like a wrong type (see :mod:`._placeholders`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pydantic

from actors import quiet_logger
from forge_rt.core import (
    TOKEN_LIMIT_REASONS,
    ArgumentError,
    LLMResponse,
    TextResponse,
    ToolArgumentError,
    ToolCall,
    ToolSpec,
)
from forge_rt.guardrails._dialects import Dialect
from forge_rt.guardrails._guesses import ArgumentGrounding
from forge_rt.guardrails._nudges import (
    Nudge,
    RetryCause,
    bad_args_nudge,
    call_nudge,
    unknown_tool_nudge,
    withheld_tool_nudge,
)
from forge_rt.guardrails._placeholders import (
    EchoCorpus,
    before_copied_note,
    has_echo_markup,
    marked_errors,
    normalise,
    placeholder_errors,
    strip_echo_markup,
)
from forge_rt.guardrails._repetition import (
    REPETITION_FINISH_REASON,
    before_the_loop,
    loop_start,
)
from forge_rt.guardrails._rescue import rescue
from forge_rt.guardrails._rescue_args import schema_of, top_field, valid_with

__all__ = [
    "CallKey",
    "ResponseValidator",
    "ValidationResult",
    "argument_errors",
    "call_key",
    "collapse_calls",
    "cut_cause",
]


log = quiet_logger(__name__)

Reply = LLMResponse | list[ToolCall] | TextResponse | str


def cut_cause(finish_reason: str | None) -> RetryCause | None:
    """Why a reply with ``finish_reason`` was stopped before its end, or None if it was not: at
    the token limit (small models repeat a call until they hit it), or by the guarded step for
    repeating itself (as good as the limit: more of the same would have followed)."""
    if finish_reason in TOKEN_LIMIT_REASONS:
        return RetryCause.TRUNCATED
    if finish_reason == REPETITION_FINISH_REASON:
        return RetryCause.REPEATED
    return None


# Text that opens a call: a brace or bracket, then a call's key.
_CALL_LIKE = re.compile(r"[{\[]\s*\"?(name|tool|function|arguments)\"?\s*:", re.IGNORECASE)


class ValidationResult(msgspec.Struct, frozen=True, kw_only=True):
    """What one reply amounts to: ``calls`` are its calls in order, identical repeats collapsed
    (``collapsed`` says how many were dropped); a call that passed validation carries its
    schema-coerced arguments. ``errors`` holds one tool-channel nudge per call that cannot run
    (unknown tool, bad arguments), paired by ``call_id``. ``needs_retry`` is set when the reply
    held no call at all; ``cause`` then says why and ``malformed`` quotes a call-like fragment
    that could not be read, if rescue found one. ``text`` is the prose beside native calls (empty
    for rescued calls, which are re-rendered structurally), ``raw`` the reply as received.
    ``ignored`` maps the id of a call that may run to the arguments dropped from it as not in
    its schema. ``placeholders``: some refused value stood for a value rather than being one
    (the rule ``placeholders``), not only broke the schema. ``answer_so_far``: for a reply
    stopped before its end that holds no call, the answer it was writing, where it was one --
    prose, or the message of the synthetic respond tool -- up to the cut (or, stopped for
    repeating itself, written once); the rule ``cut_answers`` takes it where text is offered.
    """

    calls: list[ToolCall]
    errors: list[Nudge]
    needs_retry: bool
    placeholders: bool = False
    ignored: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    dialects: tuple[Dialect, ...] = ()
    collapsed: int = 0
    cause: RetryCause | None = None
    malformed: str | None = None
    raw: str = ""
    text: str = ""
    reasoning: str | None = None
    rescued: bool = False
    answer_so_far: str | None = None

    @property
    def ok(self) -> bool:
        """Whether every call may run."""
        return not self.needs_retry and not self.errors

    @property
    def failed_ids(self) -> frozenset[str]:
        """The call ids that got an error."""
        return frozenset(e.call_id for e in self.errors if e.call_id is not None)


# A call's identity (see :func:`call_key`): its tool and its arguments in canonical JSON.
CallKey = tuple[str, bytes]


def call_key(call: ToolCall) -> CallKey:
    """What makes two calls the same call: the tool and its arguments in canonical JSON."""
    return call.tool, msgspec.json.encode(call.args, order="sorted")


def collapse_calls(calls: Sequence[ToolCall]) -> tuple[list[ToolCall], int]:
    """The calls with identical ones (same tool, same arguments) kept once, first id wins, and
    how many were dropped: small models repeat one call many times in a reply."""
    seen: set[tuple[str, bytes]] = set()
    kept: list[ToolCall] = []
    for call in calls:
        key = call_key(call)
        if key not in seen:
            seen.add(key)
            kept.append(call)
    return kept, len(calls) - len(kept)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


_EXPECTED = {
    "int_type": "int",
    "int_parsing": "int",
    "int_from_float": "int",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "str",
    "bool_type": "bool",
    "bool_parsing": "bool",
    "list_type": "array",
    "tuple_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}
_BOUNDS = {
    "greater_than_equal": ("ge", ">="),
    "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="),
    "less_than": ("lt", "<"),
}
_LENGTHS = {
    "string_too_short": ("str", "min_length", ">="),
    "string_too_long": ("str", "max_length", "<="),
    "too_short": ("array", "min_length", ">="),
    "too_long": ("array", "max_length", "<="),
}


def _path(loc: Sequence[int | str]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _msgspec_style(error: Mapping[str, Any]) -> ArgumentError:
    """One pydantic error rendered the way msgspec words it: expected, got, where."""
    kind: str = error["type"]
    loc: tuple[int | str, ...] = tuple(error["loc"])
    value = error.get("input")
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    if kind == "missing":
        return ArgumentError(_path(loc[:-1]), f"Object missing required field `{loc[-1]}`")
    if kind == "extra_forbidden":
        return ArgumentError(_path(loc[:-1]), f"Object contains unknown field `{loc[-1]}`")
    if kind in _EXPECTED:
        return ArgumentError(_path(loc), f"Expected `{_EXPECTED[kind]}`, got `{_json_type(value)}`")
    if kind in _BOUNDS:
        key, op = _BOUNDS[kind]
        return ArgumentError(_path(loc), f"Expected `{_json_type(value)}` {op} {ctx[key]}")
    if kind in _LENGTHS:
        name, key, op = _LENGTHS[kind]
        return ArgumentError(_path(loc), f"Expected `{name}` of length {op} {ctx[key]}")
    if kind == "string_pattern_mismatch":
        return ArgumentError(_path(loc), f"Expected `str` matching regex {ctx['pattern']!r}")
    if kind == "literal_error":
        return ArgumentError(_path(loc), f"Expected {ctx['expected']}, got {value!r}")
    return ArgumentError(_path(loc), f"{error['msg']}, got `{_json_type(value)}`")


def argument_errors(exc: ToolArgumentError) -> list[ArgumentError]:
    """The errors of ``exc`` in msgspec wording ("Expected `int`, got `str`" - at `$.year`),
    re-worded from the pydantic error ``ToolSpec.validate_args`` keeps as ``__cause__``."""
    cause = exc.__cause__
    if not isinstance(cause, pydantic.ValidationError):
        return list(exc.errors)
    return [_msgspec_style(e) for e in cause.errors()]


def _merge(first: list[ArgumentError], second: list[ArgumentError]) -> list[ArgumentError]:
    """``first`` plus the errors of ``second`` at paths ``first`` does not already explain."""
    covered = {e.path for e in first}
    return first + [e for e in second if e.path not in covered]


def _descriptions(spec: ToolSpec) -> tuple[str, ...]:
    """The tool's description and every description in its schema, normalised for matching."""
    found = [spec.description]
    stack: list[Any] = [schema_of(spec)]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            text = node.get("description")
            if isinstance(text, str):
                found.append(text)
            stack.extend(node.values())  # a property may itself be called "description"
        elif isinstance(node, list):
            stack.extend(node)
    return tuple(dict.fromkeys(f for t in found if (f := normalise(t))))


class ResponseValidator:
    """Checks replies against a fixed set of tools.

    ``rescue`` turns calls written as text (bare or fenced JSON, XML, Python-call syntax, ...)
    into structured calls; with it off, any reply without native tool calls needs a retry.
    ``placeholders`` refuses argument values that stand for a value rather than being one
    (see :func:`placeholder_errors`), and, with ``markers``, a value that holds the text those
    mark as a correction's (see :func:`marked_errors`; ``answer_tool`` is the synthetic
    ``respond``, whose message may go on into it); off, only the schema judges the arguments.
    ``withheld`` maps tools a policy denies (not among ``tools``) to the reason a call of one is
    refused with. ``facts``: what the task gave, for the correction of a placeholder to show the
    same-shaped value it holds.
    """

    def __init__(
        self,
        tools: Sequence[ToolSpec],
        *,
        rescue: bool = True,
        placeholders: bool = True,
        withheld: Mapping[str, str] | None = None,
        facts: ArgumentGrounding | None = None,
        markers: re.Pattern[str] | None = None,
        answer_tool: str | None = None,
    ) -> None:
        if not tools:
            raise ValueError("ResponseValidator needs at least one tool")
        by_name: dict[str, ToolSpec] = {}
        for spec in tools:
            if spec.name in by_name:
                raise ValueError(f"tool {spec.name!r} is given twice; tool names must be unique")
            by_name[spec.name] = spec
        self._tools = by_name
        self._specs = tuple(by_name.values())
        self._rescue = rescue
        self._placeholders = placeholders
        self._markers = markers  # the guardrails' own text, where the caller can tell it
        self._answer_tool = answer_tool  # the synthetic respond tool, if offered
        self._withheld = dict(withheld or {})
        self._facts = facts  # what the task gave, for the value a placeholder stood for
        offered = sorted(set(self._withheld) & set(by_name))
        if offered:
            raise ValueError(f"tool(s) {offered} are both offered and withheld")
        self._descriptions = {name: _descriptions(spec) for name, spec in by_name.items()}
        self._names = frozenset(n for spec in self._specs for n in spec.property_names())

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The tools replies are checked against."""
        return self._specs

    @property
    def rescue_enabled(self) -> bool:
        return self._rescue

    def validate(
        self, response: Reply, *, echoes: EchoCorpus | None = None, constrained: bool = False
    ) -> ValidationResult:
        """Validate one reply: native calls, a text reply, or an LLMResponse holding either.
        ``echoes``: the corrections the model was shown (an argument copied from one is
        refused). ``constrained``: the reply was decoded under a tool-call constraint, so its
        text is parsed as the promised call even with rescue off (dialect ``constrained_json``)."""
        raw, reasoning, native = _unpack(response)
        # Why the reply was stopped before its end, if it was.
        finish = response.finish_reason if isinstance(response, LLMResponse) else None
        cut = cut_cause(finish)
        if native:
            return self._check(
                native,
                raw=raw,
                text=raw,
                reasoning=reasoning,
                dialects=(),
                rescued=False,
                echoes=echoes,
            )
        if self._rescue or constrained:
            return self._rescued(raw, reasoning, cut=cut, echoes=echoes, constrained=constrained)
        return self._retry(raw, reasoning, cut=cut, echoes=echoes)

    def _rescued(
        self,
        raw: str,
        reasoning: str | None,
        *,
        cut: RetryCause | None,
        echoes: EchoCorpus | None,
        constrained: bool = False,
    ) -> ValidationResult:
        found = rescue(raw, self.tools, constrained=constrained)
        calls = [*found.calls, *found.unknown_calls]
        if not calls and cut is not None and (kept := _salvaged_text(raw, cut)) is not None:
            salvaged = rescue(kept, self.tools, constrained=constrained)
            if salvaged.calls:
                log.info("guardrails.salvaged_cut_reply", chars=len(raw) - len(kept))
                found, calls = salvaged, list(salvaged.calls)
        thought = reasoning if reasoning is not None else found.reasoning
        if not calls:
            fragment = found.malformed[0] if found.malformed else None
            retry = self._retry(
                raw, thought, body=found.text, fragment=fragment, cut=cut, echoes=echoes
            )
            if cut is None:
                return retry
            so_far = self._answer_so_far(raw, found.text, cut, constrained=constrained)
            return msgspec.structs.replace(retry, answer_so_far=so_far)
        return self._check(
            calls,
            raw=raw,
            text="",
            reasoning=thought,
            dialects=tuple(found.dialects),
            rescued=True,
            echoes=echoes,
        )

    def _retry(
        self,
        raw: str,
        reasoning: str | None,
        *,
        body: str | None = None,
        fragment: str | None = None,
        cut: RetryCause | None = None,
        echoes: EchoCorpus | None = None,
    ) -> ValidationResult:
        """No call in the reply; ``body`` is its text without reasoning blocks; ``cut``: why
        the reply was stopped before its end, if it was (see :func:`cut_cause`); ``echoes``: the
        corrections the model was shown, which text that copies them is an echo of."""
        text = (raw if body is None else body).strip()
        if cut is not None and text:
            cause, fragment = cut, None
        elif fragment is not None:
            cause = RetryCause.BROKEN_CALL
        else:
            cause = _retry_cause(text, echoes, self._markers)
        log.debug("guardrails.no_call", cause=cause.value, chars=len(raw))
        return ValidationResult(
            calls=[],
            errors=[],
            needs_retry=True,
            cause=cause,
            malformed=fragment,
            raw=raw,
            reasoning=reasoning,
        )

    def _answer_so_far(
        self, raw: str, body: str, cut: RetryCause, *, constrained: bool
    ) -> str | None:
        """The answer a reply stopped before its end was writing: its prose where no call was
        begun, else the message of a synthetic respond call whose string the cut left open.
        Either is written once where the reply was stopped for repeating itself."""
        text = body.strip()
        if text and not _CALL_LIKE.search(text):
            looped = loop_start(text) if cut is RetryCause.REPEATED else None
            return (text if looped is None else text[:looped]).rstrip() or None
        if self._answer_tool is None:
            return None
        kept = before_the_loop(raw) if cut is RetryCause.REPEATED else None
        closed = kept if kept is not None else _closed_string(raw)
        found = rescue(closed, self.tools, constrained=constrained)
        if len(found.calls) != 1 or found.calls[0].tool != self._answer_tool:
            return None
        message = found.calls[0].args.get("message")
        return message.strip() or None if isinstance(message, str) else None

    def _given(
        self, spec: ToolSpec, args: Mapping[str, Any], unusable: Sequence[str]
    ) -> dict[str, Any]:
        """For each unusable string field, the first same-shaped value the task gave that the
        schema accepts in its place."""
        if self._facts is None:
            return {}
        given: dict[str, Any] = {}
        for field in unusable:
            value = args.get(field)
            if not isinstance(value, str):
                continue
            fits = (
                c
                for c in self._facts.candidates(value)
                if valid_with(spec, {**args, **given}, field, c)
            )
            found = next(fits, None)
            if found is not None:
                given[field] = found
        return given

    def _check(
        self,
        calls: Sequence[ToolCall],
        *,
        raw: str,
        text: str,
        reasoning: str | None,
        dialects: tuple[Dialect, ...],
        rescued: bool,
        echoes: EchoCorpus | None,
    ) -> ValidationResult:
        kept, collapsed = collapse_calls(calls)
        if collapsed:
            log.info("guardrails.collapsed", collapsed=collapsed, kept=len(kept))
        checked: list[ToolCall] = []
        errors: list[Nudge] = []
        ignored: dict[str, tuple[str, ...]] = {}
        ran: set[tuple[str, bytes]] = set()
        stood_for = False  # some refused value was a placeholder
        for call in kept:
            spec = self._tools.get(call.tool)
            if spec is None:
                reason = self._withheld.get(call.tool)
                text = (
                    unknown_tool_nudge(call.tool, self.tools)
                    if reason is None
                    else withheld_tool_nudge(call.tool, reason, self.tools)
                )
                if reason is not None:
                    log.info("guardrails.withheld_call", tool=call.tool)
                errors.append(call_nudge(call, text))
                checked.append(call)
                continue
            unknown = spec.unknown_args(call.args)
            dropped = {k: call.args[k] for k in unknown}
            args = {k: strip_echo_markup(v) for k, v in call.args.items() if k not in dropped}
            placeholders = (
                placeholder_errors(
                    args,
                    descriptions=self._descriptions[spec.name],
                    names=self._names,
                    echoes=echoes,
                )
                if self._placeholders
                else []
            )
            if self._placeholders and self._markers is not None:
                answer = call.tool == self._answer_tool
                placeholders += marked_errors(args, self._markers, answer=answer)
            try:
                valid = spec.validate_args(args)
            except ToolArgumentError as exc:
                problems = _merge(placeholders, argument_errors(exc))
            else:
                problems = placeholders
            if problems:
                stood_for = stood_for or bool(placeholders)
                unusable = list(dict.fromkeys(top_field(e.path) for e in placeholders))
                nudge = bad_args_nudge(
                    spec,
                    problems,
                    args=args,
                    unusable=unusable,
                    ignored=dropped,
                    given=self._given(spec, args, unusable),
                )
                errors.append(call_nudge(call, nudge))
                checked.append(call)
                continue
            runnable = msgspec.structs.replace(call, args=valid)
            if call_key(runnable) in ran:
                collapsed += 1  # the same call once its ignored arguments are gone
                continue
            ran.add(call_key(runnable))
            if unknown:
                log.info("guardrails.ignored_args", tool=call.tool, ignored=list(unknown))
                ignored[call.call_id] = unknown
            checked.append(runnable)
        return ValidationResult(
            calls=checked,
            errors=errors,
            needs_retry=False,
            placeholders=stood_for,
            ignored=ignored,
            dialects=dialects,
            collapsed=collapsed,
            raw=raw,
            text=text,
            reasoning=reasoning,
            rescued=rescued,
        )


def _unpack(response: Reply) -> tuple[str, str | None, list[ToolCall]]:
    """The reply's raw text, its reasoning, and its native calls (empty for a text reply)."""
    if isinstance(response, str):
        return response, None, []
    if isinstance(response, TextResponse):
        return response.content, response.reasoning, []
    if isinstance(response, list):
        return "", _call_reasoning(response), list(response)
    result = response.result
    if isinstance(result, TextResponse):
        text = response.raw_text or result.content
        return text, result.reasoning, []
    return response.raw_text, _call_reasoning(result), list(result)


def _call_reasoning(calls: Sequence[ToolCall]) -> str | None:
    return next((c.reasoning for c in calls if c.reasoning), None)


def _retry_cause(
    raw: str, echoes: EchoCorpus | None, markers: re.Pattern[str] | None
) -> RetryCause:
    """Why a reply with no call needs a retry: empty, an echo (of chat markup, of a correction
    the model was shown, or of the text ``markers`` marks as the caller's guardrails'), a call
    that could not be read, or prose."""
    text = raw.strip()
    if not text:
        return RetryCause.EMPTY
    shown = echoes is not None and echoes.copies(normalise(text))
    marked = markers is not None and markers.search(text) is not None
    if has_echo_markup(text) or shown or marked:
        return RetryCause.ECHO
    if _CALL_LIKE.search(text):
        return RetryCause.BROKEN_CALL
    return RetryCause.PROSE


def _closed_string(raw: str) -> str:
    """``raw``, cut inside a JSON string, with that string closed (a dangling escape dropped);
    the lenient reader closes the brackets."""
    text = raw.rstrip()
    trailing = len(text) - len(text.rstrip("\\"))
    if trailing % 2:
        text = text[:-1]
    return text + '"'


def _salvaged_text(raw: str, cut: RetryCause) -> str | None:
    """The part of a reply stopped before its end that holds a whole call, if one does: cut
    where a string value goes on into a copied ``[Note]`` (the result copied before the note
    is the value), or, for a reply stopped for repeating itself, after the first copy of the
    sentences it went on writing (the value it wrote, once)."""
    kept = before_copied_note(raw)
    if kept is None and cut is RetryCause.REPEATED:
        kept = before_the_loop(raw)
    return kept
