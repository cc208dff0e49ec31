"""What of an accepted reply may be returned: guardrail text is cut away.

The guardrails judge every reply (one pipeline, :mod:`forge_rt.guardrails`); the proxy hands
them its markers (:data:`~forge_rt.proxy._leaks.GUARDRAIL_MARKERS`), so an argument that is a
copied correction is refused like any placeholder, and the history the client sent, so a call
the client already ran is answered from it (the rule ``answered_calls``). What is left here is
output, not judgement: the corrections the proxy wrote into its private history may come back at
the end of text that is otherwise the model's own -- a ``respond`` message, prose beside calls, a
text answer -- and none of it may reach the client as content (an agent framework would show it,
or act on it, as the model's answer). :func:`without_guardrail_text` keeps what such text says
before the first marker.
"""

from __future__ import annotations

import msgspec

from actors import quiet_logger
from forge_rt.core import RESPOND_TOOL_NAME, ToolCall
from forge_rt.guardrails import TextAnswer
from forge_rt.proxy._leaks import cut
from forge_rt.runtime import Accepted

__all__ = ["without_guardrail_text"]

log = quiet_logger(__name__)


def without_guardrail_text(accepted: Accepted, *, respond: bool) -> Accepted:
    """``accepted`` with its text cut before the first guardrail marker: a text answer, the
    prose beside calls and, where the synthetic ``respond`` tool is offered (``respond``), its
    message (the guardrails refused one that is nothing but guardrail text)."""
    action = accepted.action
    if isinstance(action, TextAnswer):
        text, leaked = cut(action.text)
        if not leaked:
            return accepted
        log.info("proxy.guardrail_text_cut", kept_chars=len(text), where="answer")
        return Accepted(
            action=msgspec.structs.replace(action, text=text), response=accepted.response
        )
    calls: list[ToolCall] = []
    for call in action.calls:
        if respond and call.tool == RESPOND_TOOL_NAME:
            message, leaked = cut(call.args["message"])
            if leaked:
                log.info("proxy.guardrail_text_cut", kept_chars=len(message), where="respond")
                call = msgspec.structs.replace(call, args={**call.args, "message": message})
        calls.append(call)
    text, leaked = cut(action.text)
    if leaked:
        log.info("proxy.guardrail_text_cut", kept_chars=len(text), where="prose")
    kept = msgspec.structs.replace(action, calls=calls, text=text)
    return Accepted(action=kept, response=accepted.response)
