"""Real-shaped conversation histories for the context tests, built by hand and by hypothesis.

Independent re-statements of the invariants live here too (the iteration split, the pairing of
calls with results), so the properties do not check the library with its own helpers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hypothesis import strategies as st

from forge_rt.core import Message, MessageType, Role, ToolCall

WEATHER_JSON = json.dumps(
    {
        "city": "Paris",
        "days": [
            {"day": d, "high_c": 14 + d, "low_c": 6 + d, "conditions": "light rain, clearing later"}
            for d in range(12)
        ],
    }
)


def call(tool: str, call_id: str, **args: object) -> ToolCall:
    """A tool call with a fixed id, so histories are reproducible."""
    return ToolCall(tool=tool, args=dict(args), call_id=call_id)


def reasoning(text: str) -> Message:
    """A standalone reasoning message (thinking models)."""
    return Message(role=Role.ASSISTANT, content=text, type=MessageType.REASONING)


def retry_nudge(
    text: str = "Please answer with a valid tool call; plain text is not accepted.",
) -> Message:
    """The user-role nudge that follows a bare-text reply."""
    return Message(role=Role.USER, content=text, type=MessageType.RETRY_NUDGE)


def tool_nudge(kind: MessageType, c: ToolCall, text: str) -> Message:
    """A step or prerequisite nudge answering a blocked call on the tool channel."""
    return Message(
        role=Role.TOOL, content=text, type=kind, tool_call_id=c.call_id, tool_name=c.tool
    )


def iteration_starts(messages: Sequence[Message]) -> list[int]:
    """Indexes where an assistant turn begins (consecutive assistant messages are one turn)."""
    return [
        i
        for i, m in enumerate(messages)
        if m.role is Role.ASSISTANT and (i == 0 or messages[i - 1].role is not Role.ASSISTANT)
    ]


def protected_window(messages: Sequence[Message], keep_recent: int) -> list[Message]:
    """The last ``keep_recent`` iterations, by the definition, not the library's helper."""
    starts = iteration_starts(messages)
    if keep_recent == 0 or not starts:
        return []
    return list(messages[starts[-min(keep_recent, len(starts))] :])


def orphaned_calls(messages: Sequence[Message]) -> list[str]:
    """Call ids without a tool message after their assistant message and before the next one."""
    orphans = []
    for i, m in enumerate(messages):
        for c in m.tool_calls or ():
            answered = False
            for later in messages[i + 1 :]:
                if later.role is Role.ASSISTANT:
                    break
                if later.role is Role.TOOL and later.tool_call_id == c.call_id:
                    answered = True
            if not answered:
                orphans.append(c.call_id)
    return orphans


def orphaned_results(messages: Sequence[Message]) -> list[str]:
    """Tool messages whose call does not appear earlier in the history."""
    seen: set[str] = set()
    orphans = []
    for m in messages:
        seen.update(c.call_id for c in m.tool_calls or ())
        if m.role is Role.TOOL and m.tool_call_id not in seen:
            orphans.append(str(m.tool_call_id))
    return orphans


# --- hypothesis: well-formed histories -------------------------------------------------------

_TOOLS = ("get_weather", "get_forecast", "fetch_sales", "report")
_text = st.text(
    alphabet=st.sampled_from(
        [*'abcdefghij klmnop QRST 0123456789 {}[]":, .\n', "é", "東", "京", "😀"]
    ),
    max_size=600,
)
_short = st.text(alphabet=st.sampled_from(list("abc xyz 012.")), max_size=40)
_args = st.dictionaries(
    st.sampled_from(["city", "days", "region", "year", "q"]),
    st.one_of(st.integers(-1000, 100000), _short),
    max_size=3,
)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """A history a strict chat template accepts: every call answered before the next turn."""
    counter = iter(range(10_000))
    messages = [
        Message.system(draw(_text) or "You are helpful."),
        Message.user(draw(_text) or "hi"),
    ]
    if draw(st.booleans()):
        messages.append(Message(role=Role.SYSTEM, content=draw(_text), type=MessageType.SUMMARY))
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["calls", "calls", "calls", "text_retry", "answer_user"]))
        if kind == "calls":
            if draw(st.booleans()):
                messages.append(reasoning(draw(_text)))
            calls = [
                call(draw(st.sampled_from(_TOOLS)), f"c{next(counter)}", **draw(_args))
                for _ in range(draw(st.integers(1, 3)))
            ]
            messages.append(Message.assistant_calls(calls, content=draw(_short)))
            for c in calls:
                answer = draw(st.sampled_from(["result", "result", "result", "step", "prereq"]))
                if answer == "result":
                    messages.append(Message.tool_result(c, draw(_text)))
                else:
                    kind_ = (
                        MessageType.STEP_NUDGE
                        if answer == "step"
                        else MessageType.PREREQUISITE_NUDGE
                    )
                    messages.append(tool_nudge(kind_, c, draw(_text)))
            if draw(st.integers(0, 5)) == 0:
                messages.append(
                    Message(role=Role.USER, content=draw(_text), type=MessageType.CONTEXT_WARNING)
                )
        elif kind == "text_retry":
            messages.append(Message.assistant_text(draw(_text)))
            messages.append(retry_nudge(draw(_text)))
        else:
            messages.append(Message.assistant_text(draw(_text)))
            messages.append(Message.user(draw(_text) or "and then?"))
    return messages
