"""Corrective messages sent to the model, and the :class:`Nudge` that carries one.

Small local models repeat a rejected format unchanged when told only *that* it was wrong, so every
correction here says what was wrong, where, and shows a concrete valid call to copy -- built from
the model's own arguments, its valid values kept and its wrong ones corrected; a field no value
can be inferred for is described in words, never shown as a placeholder (``<city>``) the model
would copy back; a wrong value is never repeated (a model reads a value in a correction as one
to send). No text here is empty or ends in a bare colon: the first line of each is also what an
exception or a log says about it. Nudges that repeat (retries, premature terminal calls, unmet
prerequisites) escalate in tiers: 1 is polite, 2 direct, 3 insistent. The builders return plain
text; the validator and the step enforcer wrap it in a :class:`Nudge`.
"""

from __future__ import annotations

import difflib
import enum
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from forge_rt.core import (
    RESPOND_TOOL_NAME,
    ArgumentError,
    Message,
    MessageType,
    Prerequisite,
    Role,
    ToolCall,
    ToolSpec,
)
from forge_rt.core._jsonschema import deref
from forge_rt.errors import RestoredToolError
from forge_rt.guardrails._coverage import REQUEST
from forge_rt.guardrails._rescue_args import SCHEMA_KEYWORDS, repair_args, schema_of
from forge_rt.guardrails._respond import respond_spec

__all__ = [
    "MAX_TIER",
    "Nudge",
    "RetryCause",
    "again_note",
    "bad_args_nudge",
    "call_nudge",
    "declined_text",
    "describe_field",
    "error_detail",
    "example_call",
    "guessed_argument_nudge",
    "held_back",
    "held_back_nudge",
    "ignored_args_note",
    "interrupted_text",
    "loop_nudge",
    "lost_number_nudge",
    "markup_answer_nudge",
    "other_item_nudge",
    "premature_terminal_nudge",
    "prerequisite_nudge",
    "resolution_text",
    "retry_nudge",
    "shown_note",
    "superseded_answer_nudge",
    "tool_error_text",
    "ungrounded_answer_nudge",
    "unknown_tool_nudge",
    "unlisted_item_nudge",
    "withheld_tool_nudge",
]

MAX_TIER = 3


class RetryCause(enum.StrEnum):
    """Why a reply held no usable tool call; the retry nudge names it so the model can fix it."""

    EMPTY = "empty reply"
    PROSE = "text instead of a tool call"
    ECHO = "echoed a tool result or a correction instead of calling a tool"
    BROKEN_CALL = "a tool call that could not be parsed"
    TRUNCATED = "cut off at the token limit without a complete tool call"
    REPEATED = "stopped for repeating itself before its tool call was complete"


class Nudge(msgspec.Struct, frozen=True, kw_only=True):
    """One corrective message: its compaction tag, its channel, its text. A tool-channel nudge
    (``role=Role.TOOL``) answers the call named by ``call_id`` (and ``tool``); a user-channel
    one stands alone. ``tier`` is how insistent it is (1..3)."""

    kind: MessageType
    role: Role
    content: str
    call_id: str | None = None
    tool: str | None = None
    tier: int = 1

    def __post_init__(self) -> None:
        if self.role is Role.TOOL and not self.call_id:
            raise ValueError("a tool-channel nudge must name the call it answers (call_id)")
        if not 1 <= self.tier <= MAX_TIER:
            raise ValueError(f"nudge tier must be 1..{MAX_TIER}, got {self.tier}")

    def message(self) -> Message:
        """The transient message to append to the history for this nudge."""
        return Message(
            role=self.role,
            content=self.content,
            type=self.kind,
            tool_call_id=self.call_id if self.role is Role.TOOL else None,
            tool_name=self.tool if self.role is Role.TOOL else None,
            transient=True,
        )


def _tier(tier: int) -> int:
    if tier < 1:
        raise ValueError(f"nudge tier starts at 1, got {tier}")
    return min(tier, MAX_TIER)


def _json(value: Any) -> str:
    # Spaced like the calls models are trained on; non-ASCII kept readable.
    return json.dumps(value, ensure_ascii=False)


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def example_call(spec: ToolSpec, args: Mapping[str, Any] | None = None) -> str:
    """A complete call of ``spec`` in the JSON shape the rescue parser reads, ready to copy."""
    shown = dict(args) if args is not None else spec.example_args()
    return _json({"name": spec.name, "arguments": shown})


def _example_tool(tools: Sequence[ToolSpec]) -> ToolSpec:
    ordinary = [t for t in tools if t.name != RESPOND_TOOL_NAME]
    return (ordinary or list(tools))[0]


_CAUSE_HINT = {
    RetryCause.EMPTY: "Your reply was empty.",
    RetryCause.PROSE: "Your reply was text, not a tool call.",
    RetryCause.ECHO: (
        "Do not write <tool_response> blocks or repeat corrections: tool results come from the "
        "system after you call a tool."
    ),
    RetryCause.BROKEN_CALL: "Your tool call could not be parsed: it must be valid JSON.",
    RetryCause.TRUNCATED: (
        "Your reply was cut off at the length limit. Keep it short: send the tool call once, "
        "with no other text."
    ),
    RetryCause.REPEATED: (
        "Your reply was stopped because it kept writing the same lines over and over. Send the "
        "tool call once, and write each fact in it once."
    ),
}


_MAX_QUOTE = 200


def retry_nudge(
    tier: int,
    tools: Sequence[ToolSpec],
    *,
    cause: RetryCause | None = None,
    fragment: str | None = None,
) -> str:
    """The user-channel nudge after a reply with no usable tool call, escalating with ``tier``;
    ``cause`` opens it with what was wrong; ``fragment`` (a call-like piece of the reply that
    could not be read) is quoted so the model sees exactly which part to fix."""
    if not tools:
        raise ValueError("retry_nudge needs at least one tool to point the model at")
    level = _tier(tier)
    example = example_call(_example_tool(tools))
    names = _names([t.name for t in tools])
    hint = f"{_CAUSE_HINT[cause]} " if cause is not None else ""
    piece = " ".join(fragment.split()) if fragment is not None else ""
    if piece:
        quoted = piece if len(piece) <= _MAX_QUOTE else piece[:_MAX_QUOTE] + "..."
        hint += f"This part could not be read: {quoted} "
    respond = (
        f" To answer the user, call `{RESPOND_TOOL_NAME}` with your message."
        if any(t.name == RESPOND_TOOL_NAME for t in tools)
        else ""
    )
    if level == 1:
        return (
            f"{hint}Please call one of the tools: {names}.{respond} "
            f"Reply with the call only, for example: {example}"
        )
    if level == 2:
        return (
            f"{hint}Your next reply must be exactly one tool call, in this shape: "
            f"{example}{respond} Tools: {names}."
        )
    return (
        f"{hint}STILL NO TOOL CALL - this is the last attempt before the task fails. Reply with "
        f"ONLY a JSON tool call and no other text: {example}{respond}"
    )


def _printable(text: str) -> str:
    """``text`` with control and line-separator characters escaped (a model-invented name may
    hold them; a correction must stay one readable line)."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def unknown_tool_nudge(name: str, tools: Sequence[ToolSpec]) -> str:
    """The tool-channel error for a call of a tool that does not exist, listing the real ones."""
    if not tools:
        raise ValueError("unknown_tool_nudge needs the real tools to list")
    names = [t.name for t in tools]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    guess = f" Did you mean `{close[0]}`?" if close else ""
    return (
        f"[ToolError] Unknown tool `{_printable(name)}`.{guess} Available tools: "
        f"{_names(names)}. "
        "Call one of them by its exact name."
    )


def withheld_tool_nudge(name: str, reason: str, tools: Sequence[ToolSpec]) -> str:
    """The tool-channel error for a call of a tool the policy withholds: it exists, but may
    not be used here, and why -- so the model stops asking for it and does without."""
    if not tools:
        raise ValueError("withheld_tool_nudge needs the real tools to list")
    return (
        f"[ToolError] Tool `{_printable(name)}` is not available: the policy denies it "
        f"({reason}). It was not run. Available tools: {_names([t.name for t in tools])}. "
        "Do the task with these, or tell the user it cannot be done here."
    )


def declined_text(tool: str, reason: str) -> str:
    """The tool result fed back when a call of ``tool`` was declined (the approver said no,
    or the policy now denies it); ``reason`` says who declined and why."""
    said = reason.strip() or "no reason given"
    return (
        f"[Declined] The call of `{tool}` was declined: {said}. It was not run. Do not call "
        "it again for this request unless the user asks; answer or continue without it."
    )


def _field_of(error: ArgumentError) -> str:
    """The argument an error is about: ``year`` at ``$.year``, the field a "missing required
    field `x`" error names at ``$``."""
    if error.path.startswith("$."):
        return error.path[2:]
    named = re.search(r"`([^`]+)`", error.message)
    return named.group(1) if named else "arguments"


_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _kind(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """What a value of ``schema`` is, in words: "an integer", "one of "c", "f"", ..."""
    schema = deref(schema, root)
    if not isinstance(schema, Mapping):
        return "any value"
    chosen = _chosen_kind(schema, root)
    if chosen is not None:
        return chosen
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        return " or ".join(_KINDS.get(k, str(k)) for k in kind)
    if kind is None:
        return "any value"
    words = [_KINDS.get(kind, str(kind)), *_range_words(schema), *_size_words(schema, kind)]
    if "pattern" in schema:
        words.append(f"matching the regex {schema['pattern']!r}")
    return " ".join(words)


def _chosen_kind(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str | None:
    """``schema`` in words when it picks among values or schemas: a ``const``, an ``enum``,
    a union (its branches' words, each once) or a one-part ``allOf``; None otherwise."""
    if "const" in schema:
        return f"exactly {_json(schema['const'])}"
    if schema.get("enum"):
        return "one of " + ", ".join(_json(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return " or ".join(dict.fromkeys(_kind(o, root) for o in schema[key]))
    if isinstance(schema.get("allOf"), list) and len(schema["allOf"]) == 1:
        return _kind(schema["allOf"][0], root)
    return None


def _range_words(schema: Mapping[str, Any]) -> list[str]:
    """A number's bounds in words: "from 1 to 5", ">= 2000", "< 100"."""
    words = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        words.append(f"from {low} to {high}")
    elif low is not None:
        words.append(f">= {low}")
    elif high is not None:
        words.append(f"<= {high}")
    if "exclusiveMinimum" in schema:
        words.append(f"> {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema:
        words.append(f"< {schema['exclusiveMaximum']}")
    return words


def _size_words(schema: Mapping[str, Any], kind: str) -> list[str]:
    """A string's length bounds, or another value's item bounds, in words: "of at least 3
    characters", "of at most 10 items"."""
    unit = "characters" if kind == "string" else "items"
    low, high = (
        (schema.get("minLength"), schema.get("maxLength"))
        if kind == "string"
        else (schema.get("minItems"), schema.get("maxItems"))
    )
    words = []
    if low is not None:
        words.append(f"of at least {low} {unit}")
    if high is not None:
        words.append(f"of at most {high} {unit}")
    return words


def describe_field(spec: ToolSpec, name: str) -> str:
    """``name`` of ``spec`` in words, its type and limits, then its description ("an integer
    >= 2000 (Four-digit year)"): for a field the model must fill from the task."""
    schema = schema_of(spec)
    props: Mapping[str, Any] = schema.get("properties") or {}
    if name not in props:
        return "an argument the schema does not list"
    sub = deref(props[name], schema)
    kind = _kind(sub, schema)
    about = sub.get("description") if isinstance(sub, Mapping) else None
    said = " ".join(str(about).split()).rstrip(".:") if about else ""
    return f"{kind} ({said})" if said else kind


def _ignored_line(spec: ToolSpec, name: str, renamed: Mapping[str, str]) -> str:
    as_field = next((f for f, n in renamed.items() if n == name), None)
    if name in SCHEMA_KEYWORDS and name not in spec.property_names():
        what = "a JSON-schema keyword copied from the tool definition, not an argument"
    else:
        what = f"not an argument of `{spec.name}`"
    tail = f"read as `{as_field}`" if as_field else "ignored"
    return f"`{name}` is {what} - at `$.{name}` ({tail})"


def bad_args_nudge(
    spec: ToolSpec,
    errors: Sequence[ArgumentError],
    *,
    args: Mapping[str, Any] | None = None,
    unusable: Sequence[str] = (),
    ignored: Mapping[str, Any] | None = None,
    given: Mapping[str, Any] | None = None,
) -> str:
    """The tool-channel error for arguments that fail ``spec``'s schema, with the fixed call.

    ``args``: the schema-known arguments as sent; ``unusable``: fields whose value is a
    placeholder or an echo; ``ignored``: the arguments dropped as not in the schema, with their
    values (one may be a required field misnamed); ``given``: values the task gave for unusable
    fields, put in the call to send. Every error is listed, expected against got; the call to
    send is built by :func:`~forge_rt.guardrails._rescue_args.repair_args`, and each field it
    could not fill is described.
    """
    if not errors:
        raise ValueError("bad_args_nudge needs at least one argument error to report")
    dropped = dict(ignored or {})
    repair = repair_args(spec, dict(args or {}), unusable=unusable, unknown=dropped)
    filled = {k: v for k, v in (given or {}).items() if k in repair.missing}
    repair = msgspec.structs.replace(
        repair,
        args={**repair.args, **filled},
        missing=tuple(f for f in repair.missing if f not in filled),
    )
    fields = list(dict.fromkeys(_field_of(e) for e in errors))
    lines = [f"[ArgumentError] `{spec.name}` was not run: fix {_names(fields)}."]
    lines += [f"- {_printable(e.render())}" for e in errors]
    lines += [f"- {_ignored_line(spec, name, repair.renamed)}" for name in dropped]
    sent = dict(args or {})
    lines += [
        f"- `{field}`: {_json(sent[field])} is read as {_json(repair.args[field])}"
        for field in repair.corrected
        if field in sent
    ]
    lines += [
        f"- `{field}` needs a real value: {describe_field(spec, field)}."
        for field in repair.missing
    ]
    example = example_call(spec, repair.args)
    if filled:
        lines.append(f"Send the call with the value the task gave: {example}")
    elif repair.missing and repair.args:
        lines.append(
            f"Send the call again with a real value for {_names(repair.missing)}, the rest as "
            f"shown: {example}"
        )
    elif repair.missing:
        # Nothing is left to keep: an example would be a call its tool refuses, and be copied.
        lines.append(f"Send the call again with a real value for {_names(repair.missing)}.")
    else:
        lines.append(f"Send this corrected call: {example}")
    return "\n".join(lines)


def ignored_args_note(spec: ToolSpec, ignored: Sequence[str]) -> str:
    """Appended to the result of a call that ran without arguments its schema does not have."""
    if not ignored:
        raise ValueError("ignored_args_note needs the ignored argument names")
    keywords = [n for n in ignored if n in SCHEMA_KEYWORDS]
    others = [n for n in ignored if n not in SCHEMA_KEYWORDS]
    parts = []
    if others:
        verb = "is not an argument" if len(others) == 1 else "are not arguments"
        parts.append(f"{_names(others)} {verb} of `{spec.name}`")
    if keywords:
        verb = "is a JSON-schema keyword" if len(keywords) == 1 else "are JSON-schema keywords"
        parts.append(f"{_names(keywords)} {verb} copied from the tool definition")
    takes = spec.property_names()
    known = f"Its arguments are {_names(takes)}." if takes else "It takes no arguments."
    return (
        f"\n[Note] {'; '.join(parts)}: ignored, and the call ran without "
        f"{'it' if len(ignored) == 1 else 'them'}. {known}"
    )


def _running(running: Sequence[str]) -> str:
    names = list(dict.fromkeys(running))
    verb = "runs" if len(names) == 1 else "run"
    return f"{_names(names)} from the same reply {verb} now (results follow)"


def premature_terminal_nudge(
    tier: int, terminal: str, pending: Sequence[str], *, running: Sequence[str] = ()
) -> str:
    """The tool-channel error for a terminal tool called before the required steps are done;
    ``running`` names the tools of the same reply that run anyway: the nudge says so and names
    what is left after them, so the model calls the terminal tool once, at the end."""
    if not pending:
        raise ValueError("premature_terminal_nudge needs the pending steps to name")
    level = _tier(tier)
    steps = _names(pending)
    first = pending[0]
    if running:
        after = [p for p in pending if p not in running]
        then = (
            f"then call {_names(after)}, and `{terminal}` last"
            if after
            else f"call `{terminal}` again once their results are in"
        )
        return (
            f"[StepEnforcementError] `{terminal}` cannot run yet, so it was not run: these "
            f"steps are not done: {steps}. {_running(running)}; {then}."
        )
    if level == 1:
        return (
            f"[StepEnforcementError] `{terminal}` cannot run yet: these steps are not done: "
            f"{steps}. Please call `{first}` first."
        )
    if level == 2:
        return (
            f"[StepEnforcementError] `{terminal}` was rejected again. Required steps still "
            f"pending: {steps}. Call `{first}` now; do not call `{terminal}` until all are done."
        )
    return (
        f"[StepEnforcementError] STOP calling `{terminal}`. It will keep failing until you call "
        f"{steps}. Your next call MUST be `{first}`."
    )


def _describe_prerequisite(prereq: Prerequisite, args: Mapping[str, Any]) -> str:
    if prereq.match_arg is None:
        return f"`{prereq.tool}`"
    if prereq.match_arg in args:
        return f"`{prereq.tool}` with {prereq.other_arg}={_json(args[prereq.match_arg])}"
    return f"`{prereq.tool}` with the same {prereq.other_arg}"


def prerequisite_nudge(
    tier: int,
    tool: str,
    missing: Sequence[Prerequisite],
    *,
    args: Mapping[str, Any] | None = None,
    running: Sequence[str] = (),
) -> str:
    """The tool-channel error for a call whose prerequisite tool has not succeeded yet. With
    ``args`` (the blocked call's), an argument-matched prerequisite is shown with the value it
    needs; ``running`` as for :func:`premature_terminal_nudge`."""
    if not missing:
        raise ValueError("prerequisite_nudge needs the missing prerequisites to name")
    level = _tier(tier)
    call_args = args or {}
    needs = ", ".join(_describe_prerequisite(p, call_args) for p in missing)
    first = _describe_prerequisite(missing[0], call_args)
    if running:
        then = (
            f"call `{tool}` again once {first} succeeded"
            if any(p.tool in running for p in missing)
            else f"call {first} on its own, then `{tool}`"
        )
        return (
            f"[PrereqError] `{tool}` was not run: it needs {needs} to succeed first. "
            f"{_running(running)}; {then}."
        )
    if level == 1:
        return (
            f"[PrereqError] `{tool}` needs {needs} to succeed first. Please call {first} on "
            f"its own, then call `{tool}` again."
        )
    if level == 2:
        return (
            f"[PrereqError] `{tool}` was rejected again: {needs} has not succeeded yet. Call "
            f"{first} now, alone, and wait for its result."
        )
    return (
        f"[PrereqError] STOP calling `{tool}`. It will keep failing until {needs} succeeds. Your "
        f"next call MUST be {first}."
    )


def loop_nudge(
    tool: str,
    args: Mapping[str, Any],
    repeats: int,
    next_step: str = "",
    *,
    failed_with: str | None = None,
) -> str:
    """The tool-channel error for the same call repeated ``repeats`` times in a row.

    ``next_step`` (from :meth:`Guardrails.next_step`) names the call that moves the task on:
    small models follow a concrete next call far better than "do something else". With
    ``failed_with`` (the error this exact call last failed with) the reason is shown again
    instead, with no next step: the failing tool is usually the step still to do.
    """
    sent = _json(dict(args))
    if failed_with is not None:
        return (
            f"[LoopError] You called `{tool}` with {sent} {repeats} times in a row and it failed "
            f"every time: {failed_with}. The same call fails the same way: change the arguments "
            "as that error says. Sending this exact call again ends the task."
        )
    text = (
        f"[LoopError] You called `{tool}` with {sent} {repeats} times in a row; "
        "repeating it will not give a different result. Use the result you already have, call a "
        "different tool, or change the arguments. Sending this exact call again ends the task."
    )
    return f"{text} {next_step}" if next_step else text


def repeat_note(tool: str, next_step: str) -> str:
    """Appended to the result of a call identical to one that already succeeded in this task."""
    return (
        f"\n[Note] You already called `{tool}` with these arguments; the result is the same as "
        f"before. {next_step}"
    )


def shown_note(terminal: Sequence[str], next_step: str) -> str:
    """Appended to a ``respond`` message in a workflow that ``respond`` does not end: the
    message reached the user, the task is still open (see ``Guardrails.record``)."""
    return (
        f"\n[Note] This message was shown to the user, but the task is not finished: it ends "
        f"with {_names(terminal)}. {next_step}"
    )


def again_note(tool: str, next_step: str, *, pending: Sequence[str] = ()) -> str:
    """Appended to the result of ``tool`` run again right after it succeeded: with every
    required step done the task may be finished; otherwise the step still missing is named."""
    if pending:
        return f"\n[Note] `{tool}` ran again; still required: {_names(pending)}. {next_step}"
    return (
        f"\n[Note] `{tool}` ran again; every required step is done. If the results above "
        f"answer the request, stop calling tools. {next_step}"
    )


def next_step_text(spec: ToolSpec, *, finish: bool) -> str:
    """ "Next, call X" (or "Now finish with X"), saying what each required argument is, with no
    example values: the model must take them from the task and the results so far."""
    required = [n for n in spec.json_schema().get("required", []) if isinstance(n, str)]
    if spec.name == RESPOND_TOOL_NAME and len(required) == 1:
        # The tool's own field: a caller's own ``respond`` need not take a ``message``.
        return (
            f"Now answer the user with the facts from the results above: call `{spec.name}` "
            f"with your answer in `{required[0]}`."
        )
    lead = "Now finish with" if finish else "Next, call"
    if not required:
        return f"{lead} `{spec.name}`."
    what = "; ".join(f"`{name}`: {describe_field(spec, name)}" for name in required)
    return f"{lead} `{spec.name}` with {what}."


def held_back_nudge(tool: str, blocked: Sequence[str]) -> str:
    """The tool-channel note for a valid call not run because another call in its reply failed:
    the model re-sends the fixed batch, so the valid calls are held back rather than run twice."""
    if not blocked:
        raise ValueError("held_back_nudge needs the rejected call(s) to name")
    return (
        f"[NotExecuted] `{tool}` was not run because the call to {_names(blocked)} in the same "
        f"reply was rejected (see its error). Send `{tool}` again, without the rejected call or "
        "with it fixed."
    )


def call_nudge(call: ToolCall, content: str) -> Nudge:
    """A correction of ``call`` on the tool channel (paired with it by ``call_id``), asking
    for the reply again: how a refused call is answered."""
    return Nudge(
        kind=MessageType.RETRY_NUDGE,
        role=Role.TOOL,
        content=content,
        call_id=call.call_id,
        tool=call.tool,
    )


def held_back(
    calls: Sequence[ToolCall], errors: Sequence[Nudge], *, kind: MessageType, tier: int = 1
) -> list[Nudge]:
    """A ``[NotExecuted]`` nudge for every call of ``calls`` that ``errors`` does not answer."""
    failed = {e.call_id for e in errors}
    blocked = list(dict.fromkeys(c.tool for c in calls if c.call_id in failed))
    return [
        Nudge(
            kind=kind,
            role=Role.TOOL,
            content=held_back_nudge(c.tool, blocked),
            call_id=c.call_id,
            tool=c.tool,
            tier=tier,
        )
        for c in calls
        if c.call_id not in failed
    ]


def _detail(error: BaseException) -> str:
    """A tool's error message on one line, without the punctuation our sentence adds."""
    return " ".join(str(error).split()).rstrip(".:;, ")


def error_detail(error: BaseException) -> str:
    """``error`` as a loop nudge quotes it: its type and its message on one line."""
    kind = error.type_name if isinstance(error, RestoredToolError) else type(error).__name__
    return f"{kind}: {_detail(error) or '(no message)'}"


def tool_error_text(tool: str, error: BaseException) -> str:
    """The tool result fed back when ``tool`` raised ``error`` while executing."""
    return (
        f"[ToolError] `{tool}` failed: {error_detail(error)}. Check the arguments "
        "or try a different approach."
    )


_RESULTS_SHOWN = 160  # characters of the turn's results an ungrounded-answer correction quotes


def _shown_results(results: str) -> str:
    """``results`` as a correction quotes them: the first :data:`_RESULTS_SHOWN` characters."""
    return results if len(results) <= _RESULTS_SHOWN else results[:_RESULTS_SHOWN] + "..."


def guessed_argument_nudge(
    spec: ToolSpec, field: str, *, fixed: Mapping[str, Any] | None, source: ToolSpec | None
) -> str:
    """The tool-channel correction for a call whose ``field`` holds a value found nowhere (see
    :mod:`forge_rt.guardrails._guesses`): the call ``fixed`` with a value the run has seen,
    ready to send, else the pending step ``source`` that finds the value."""
    lead = (
        f"[ArgumentError] `{spec.name}` was not run: `{field}` is in neither the request nor "
        "any tool result, so it is a guess."
    )
    if fixed is not None:
        return f"{lead} Use a value you were given, for example: {example_call(spec, fixed)}"
    if source is None:
        raise ValueError("guessed_argument_nudge needs a corrected call or a step to point at")
    return f"{lead} {next_step_text(source, finish=False)} Take `{field}` from its result."


def ungrounded_answer_nudge(results: str) -> str:
    """The tool-channel correction for an answer that uses nothing the tools returned: a call
    to copy whose message is the results themselves, as JSON, which the echo check leaves to the
    model (see :func:`~forge_rt.guardrails._placeholders.prose`)."""
    return (
        "[AnswerError] Your answer uses nothing the tools returned. Answer from the results, "
        f"for example: {example_call(respond_spec(), {'message': _shown_results(results)})}"
    )


def markup_answer_nudge(results: str) -> str:
    """The correction for a ``respond`` whose message is tool-result markup instead of an
    answer: the model meant to relay the result, so it shows the call that does, with the
    turn's ``results`` (only inside the call, and without the markup, which it would copy)."""
    return (
        "[ArgumentError] `respond` was not run: its `message` is the chat's tool-result markup, "
        "not an answer. Write the answer itself, from the results, for example: "
        f"{example_call(respond_spec(), {'message': _shown_results(results)})}"
    )


def superseded_answer_nudge(
    tools: Sequence[str],
    results: Sequence[str],
    spec: ToolSpec,
    args: Mapping[str, Any],
    field: str,
) -> str:
    """The correction for an answer that leaves out what the ends of the turn's lookup chains
    found (see :mod:`forge_rt.guardrails._chains`): ``tools`` returned ``results`` last, and
    the call to copy is the model's own (``spec``, ``args``) with those results as its text
    ``field`` (only there: quoted in the prose, a copy of them would read as an echo)."""
    shown = _shown_results(" | ".join(results))
    return (
        f"[AnswerError] Your answer leaves out what {_names(tools)} found at the end of your "
        f"lookups. Answer with it, for example: {example_call(spec, {**args, field: shown})}"
    )


def uncovered_item_nudge(
    source: str, covered: str, item: str, tool: str, call: ToolSpec, args: Mapping[str, Any]
) -> str:
    """The correction for a terminal call made before a listed fan-out was done: ``source``
    (``your request`` or a tool's name) listed ``covered`` and ``item``, and ``tool`` ran for
    ``covered`` only. It shows the call for ``item``, built from the model's own arguments."""
    where = "Your request names" if source == REQUEST else f"`{source}` returned"
    return (
        f"[CoverageError] {where} {covered!r} and {item!r}, but `{tool}` has run for "
        f"{covered!r} only. Call it for {item!r} before you answer: {example_call(call, args)}"
    )


def other_item_nudge(
    spec: ToolSpec, args: Mapping[str, Any], *, field: str, picked: str, named: str, source: str
) -> str:
    """The correction for a call that picked an item of ``source``'s listing the request does
    not name (``picked``) while it names another (``named``): the call with that item's id."""
    return (
        f"[ArgumentError] `{spec.name}` was not run: the `{field}` you sent is {picked!r} in "
        f"`{source}`'s result, which your request does not mention; it names {named!r}. "
        f"For example: {example_call(spec, args)}"
    )


def unlisted_item_nudge(
    spec: ToolSpec, args: Mapping[str, Any], *, field: str, named: str, source: str
) -> str:
    """The correction for a call whose ``field`` holds an identifier no result gave, while
    ``source``'s listing has one row the request names (``named``): the call with its id."""
    return (
        f"[ArgumentError] `{spec.name}` was not run: the `{field}` you sent is in no tool "
        f"result. `{source}` listed the one your request names: {named!r}. "
        f"For example: {example_call(spec, args)}"
    )


def lost_number_nudge(number: float, call: ToolSpec, args: Mapping[str, Any]) -> str:
    """The correction for a terminal call made while a number the request gives reached no
    tool (see :mod:`forge_rt.guardrails._quantities`): it shows the call with the number in."""
    shown = int(number) if number.is_integer() else number
    return (
        f"[CoverageError] Your request gives {shown}, but no call used it. Call this before you "
        f"answer: {example_call(call, args)}"
    )


def interrupted_text(tool: str, error: BaseException) -> str:
    """The tool result fed back for a call of ``tool`` a cancellation cut off, not run again."""
    return (
        f"[Interrupted] `{tool}` was running when the task was interrupted, and it is not safe "
        f"to run it twice, so it was not run again; it may or may not have taken effect "
        f"({_detail(error) or 'no detail'}). Check before calling it again."
    )


def resolution_text(tool: str, error: BaseException, *, corrected: str | None = None) -> str:
    """The tool result fed back when ``tool`` raised ToolResolutionError ("called wrong");
    ``corrected``: the call with the value the message lists put in, shown ready to send."""
    detail = _detail(error)
    text = (
        f"[ToolResolutionError] `{tool}`: {detail}"
        if detail
        else f"[ToolResolutionError] `{tool}` was called wrong (it gave no reason); check the "
        "arguments against its schema."
    )
    return f"{text}\nCorrected call: {corrected}" if corrected is not None else text
