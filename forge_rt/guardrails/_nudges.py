"""Corrective messages sent to the model, and the :class:`Nudge` that carries one.

Small local models repeat a rejected format unchanged when told only *that* it was wrong, so every
correction here says what was wrong, where, and shows a concrete valid call to copy. Nudges that
repeat (retries, premature terminal calls, unmet prerequisites) escalate in tiers: 1 is polite,
2 direct, 3 insistent. The builders return plain text; the validator and the step enforcer wrap it
in a :class:`Nudge` that knows its channel and the call it answers.
"""

from __future__ import annotations

import difflib
import enum
import json
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

__all__ = [
    "MAX_TIER",
    "Nudge",
    "RetryCause",
    "bad_args_nudge",
    "example_call",
    "held_back",
    "held_back_nudge",
    "loop_nudge",
    "premature_terminal_nudge",
    "prerequisite_nudge",
    "resolution_text",
    "retry_nudge",
    "tool_error_text",
    "unknown_tool_nudge",
]

MAX_TIER = 3


class RetryCause(enum.StrEnum):
    """Why a reply held no usable tool call; the retry nudge names it so the model can fix it."""

    EMPTY = "empty reply"
    PROSE = "text instead of a tool call"
    ECHO = "echoed a tool result or a correction instead of calling a tool"
    BROKEN_CALL = "a tool call that could not be parsed"
    TRUNCATED = "cut off at the token limit without a complete tool call"


class Nudge(msgspec.Struct, frozen=True, kw_only=True):
    """One corrective message: its compaction tag, its channel, its text.

    A nudge on the tool channel (``role=Role.TOOL``) answers the call named by ``call_id`` (and
    ``tool``); a nudge on the user channel stands alone. ``tier`` is how insistent it is (1..3).
    """

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
}


_MAX_QUOTE = 200


def retry_nudge(
    tier: int,
    tools: Sequence[ToolSpec],
    *,
    cause: RetryCause | None = None,
    fragment: str | None = None,
) -> str:
    """The user-channel nudge after a reply with no usable tool call, escalating with ``tier``.

    ``cause`` opens the nudge with what was wrong; ``fragment`` (a call-like piece of the reply
    that could not be read) is quoted so the model sees exactly which part to fix.
    """
    if not tools:
        raise ValueError("retry_nudge needs at least one tool to point the model at")
    level = _tier(tier)
    example = example_call(_example_tool(tools))
    names = _names([t.name for t in tools])
    hint = f"{_CAUSE_HINT[cause]} " if cause is not None else ""
    if fragment is not None:
        quoted = fragment if len(fragment) <= _MAX_QUOTE else fragment[:_MAX_QUOTE] + "..."
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


def unknown_tool_nudge(name: str, tools: Sequence[ToolSpec]) -> str:
    """The tool-channel error for a call of a tool that does not exist, listing the real ones."""
    names = [t.name for t in tools]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    guess = f" Did you mean `{close[0]}`?" if close else ""
    return (
        f"[ToolError] Unknown tool `{name}`.{guess} Available tools: {_names(names)}. "
        "Call one of them by its exact name."
    )


def bad_args_nudge(spec: ToolSpec, errors: Sequence[ArgumentError]) -> str:
    """The tool-channel error for arguments that fail ``spec``'s schema, with a valid example."""
    if not errors:
        raise ValueError("bad_args_nudge needs at least one argument error to report")
    lines = "\n".join(f"- {e.render()}" for e in errors)
    return (
        f"[ArgumentError] Invalid arguments for `{spec.name}`:\n{lines}\n"
        f"Send argument values only, in this shape: {example_call(spec)}"
    )


def premature_terminal_nudge(tier: int, terminal: str, pending: Sequence[str]) -> str:
    """The tool-channel error for a terminal tool called before the required steps are done."""
    if not pending:
        raise ValueError("premature_terminal_nudge needs the pending steps to name")
    level = _tier(tier)
    steps = _names(pending)
    first = pending[0]
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
) -> str:
    """The tool-channel error for a call whose prerequisite tool has not succeeded yet.

    With ``args`` (the blocked call's arguments) an argument-matched prerequisite is shown with
    the concrete value it needs.
    """
    if not missing:
        raise ValueError("prerequisite_nudge needs the missing prerequisites to name")
    level = _tier(tier)
    call_args = args or {}
    needs = ", ".join(_describe_prerequisite(p, call_args) for p in missing)
    first = _describe_prerequisite(missing[0], call_args)
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


def loop_nudge(tool: str, args: Mapping[str, Any], repeats: int, next_step: str = "") -> str:
    """The tool-channel error for the same call repeated ``repeats`` times in a row.

    ``next_step`` (from :meth:`Guardrails.next_step`) names the call that moves the task on:
    small models follow a concrete next call far better than "do something else".
    """
    text = (
        f"[LoopError] You called `{tool}` with {_json(dict(args))} {repeats} times in a row; "
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


def next_step_text(spec: ToolSpec, *, finish: bool) -> str:
    """ "Next, call X" (or "Now finish with X") with a complete example call to copy."""
    if spec.name == RESPOND_TOOL_NAME:
        return (
            "Now answer the user with the facts from the results above: call `respond`, e.g. "
            f"{example_call(spec)}"
        )
    lead = "Now finish with" if finish else "Next, call"
    return f"{lead} `{spec.name}`, e.g. {example_call(spec)}"


def held_back_nudge(tool: str, blocked: Sequence[str]) -> str:
    """The tool-channel note for a valid call not run because another call in its reply failed.

    A reply is accepted or rejected as a whole, so the model re-sends the batch once it is fixed.
    """
    return (
        f"[NotExecuted] `{tool}` was not run because the call to {_names(blocked)} in the same "
        f"reply was rejected (see its error). Send `{tool}` again, without the rejected call or "
        "with it fixed."
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


def tool_error_text(tool: str, error: BaseException) -> str:
    """The tool result fed back when ``tool`` raised ``error`` while executing."""
    detail = str(error).rstrip(".") or "(no message)"
    return (
        f"[ToolError] `{tool}` failed: {type(error).__name__}: {detail}. Check the arguments "
        "or try a different approach."
    )


def resolution_text(tool: str, error: BaseException) -> str:
    """The tool result fed back when ``tool`` raised ToolResolutionError ("called wrong")."""
    return f"[ToolResolutionError] `{tool}`: {error}"
