"""The synthetic ``respond`` tool: the model answers the user by calling it.

Small models offered tools must choose between calling one and writing text, and they choose
badly. With ``respond(message)`` among the tools every turn is a tool call -- a structured choice
("which tool?") instead of an open one ("tool or text?") -- and conversational turns cost no
retries. The caller never sees the tool: :func:`split_respond` turns the call back into text.
A workflow opts out with ``Workflow(respond_tool=False)``. A caller with a tool of its own named
``respond`` keeps it: the synthetic one is not added, and calls of that name are the caller's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from forge_rt.core import RESPOND_TOOL_NAME, ToolCall, ToolSpec, Workflow

__all__ = [
    "respond_spec",
    "split_respond",
    "with_respond",
    "workflow_tool_specs",
    "workflow_writes",
]

_DESCRIPTION = (
    "Answer the user. Call this tool whenever you reply to the user -- to give the final "
    "answer, to report what you found, or to ask a question -- and put your whole reply in "
    "`message`. Do not write the reply as plain text outside a tool call."
)


RESPOND_MAX_CHARS = 6000
"""How long a ``respond`` message may be: a full answer (a few screens of text, a code listing);
the reply budget caps the tokens spent on it (``MAX_REPLY_TOKENS``)."""


@functools.cache
def respond_spec() -> ToolSpec:
    """The ``respond`` tool: one required string parameter, ``message``."""
    return ToolSpec(
        name=RESPOND_TOOL_NAME,
        description=_DESCRIPTION,
        parameters={
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "description": "Your complete reply to the user, in plain text.",
                    # The answer itself, not an argument: room for a full reply (the default
                    # bound injected into constraints, 512 characters, would cut it off).
                    "maxLength": RESPOND_MAX_CHARS,
                }
            },
            "required": ["message"],
            "additionalProperties": False,
        },
    )


def with_respond(tools: Sequence[ToolSpec], *, enabled: bool = True) -> tuple[ToolSpec, ...]:
    """``respond`` followed by ``tools`` when there are tools and ``enabled``; else ``tools``
    unchanged (a request without tools is plain chat; a tool already named ``respond`` is kept).

    ``respond`` comes first: the tools are written into the prompt in order, so requests whose
    tools differ still share the prompt's opening up to the end of ``respond``, which a server
    that caches the previous prompt does not read again.
    """
    if not enabled or not tools or any(spec.name == RESPOND_TOOL_NAME for spec in tools):
        return tuple(tools)
    return (respond_spec(), *tools)


def workflow_tool_specs(workflow: Workflow) -> tuple[ToolSpec, ...]:
    """What the model is offered for ``workflow``: its tools, plus ``respond`` unless opted out."""
    specs = tuple(tool.spec for tool in workflow.tools.values())
    return with_respond(specs, enabled=workflow.respond_tool)


def workflow_writes(workflow: Workflow) -> frozenset[str]:
    """The tools of ``workflow`` that are not idempotent: they book, send or delete."""
    return frozenset(name for name, tool in workflow.tools.items() if not tool.idempotent)


def split_respond(calls: Sequence[ToolCall]) -> tuple[str | None, list[ToolCall]]:
    """``(text for the user, the other calls)``: the text is the ``message`` of the respond
    call (several are joined by blank lines), or None when the model did not call respond. Pass
    validated calls: a respond call whose ``message`` is not a string raises :class:`ValueError`.
    """
    messages: list[str] = []
    others: list[ToolCall] = []
    for call in calls:
        if call.tool != RESPOND_TOOL_NAME:
            others.append(call)
            continue
        message = call.args.get("message")
        if not isinstance(message, str):
            raise ValueError(
                f"respond call {call.call_id} has no string 'message' (args: {call.args!r}); "
                "validate calls against respond_spec() before splitting them"
            )
        messages.append(message)
    return ("\n\n".join(messages) if messages else None), others
