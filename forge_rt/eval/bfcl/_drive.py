"""Send a BFCL case as a client would: chat-completion requests over HTTP to the proxy.

Single-turn: the case's messages and tools in one request; the calls in the answer are the
case's output. Multi-turn: BFCL's own loop, client side -- each user turn is sent, every call
the answer holds is run on the case's executable API instances (BFCL's ``execute`` function,
its classes), the results go back as tool messages, and the turn ends when an answer holds no
call or after :data:`MAX_STEPS` answers (BFCL's step limit), which ends the run there
("force-terminated", as BFCL counts it).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec

from forge_rt.eval.bfcl._cases import BfclCase
from forge_rt.eval.bfcl._check import Call, execute_on_instances
from forge_rt.proxy import RequestWork

__all__ = ["MAX_STEPS", "Exchange", "Reply", "ask", "run_multi_turn"]

MAX_STEPS = 20
"""Answers one user turn may take before the run is cut off (BFCL's own limit)."""


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """One answer as the client received it.

    ``content``: the text; ``calls``: the tool calls under their BFCL names (a name the case
    does not define is kept as the model wrote it); ``message``: the answer's message object as
    sent (the raw reply a client sees); ``work``: what the proxy's ``x-forge-*`` headers say
    its guardrails did (one inference and nothing else where there are none: the backend's own
    answer); the tokens: the answer's ``usage`` (every attempt's, as the proxy counts them).
    """

    content: str
    calls: tuple[Call, ...]
    message: dict[str, Any]
    work: RequestWork = msgspec.field(default_factory=RequestWork)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Exchange(msgspec.Struct, kw_only=True):
    """What a multi-turn run produced: per turn, each answer's calls; every answer as sent."""

    steps_per_turn: list[list[list[Call]]] = msgspec.field(default_factory=list)
    replies: list[Reply] = msgspec.field(default_factory=list)
    cut_off: bool = False


def _arguments(text: str) -> dict[str, Any]:
    decoded = json.loads(text) if text.strip() else {}
    if not isinstance(decoded, dict):
        raise ValueError(f"tool-call arguments are not a JSON object: {text[:200]!r}")
    return decoded


async def ask(
    http: httpx.AsyncClient,
    case: BfclCase,
    messages: list[dict[str, Any]],
    *,
    model: str,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> Reply:
    """One chat-completion request with the case's tools; raises on an HTTP error status."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "tools": list(case.tools),
        "temperature": temperature,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    response = await http.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    body = response.json()
    message = body["choices"][0]["message"]
    usage = body.get("usage") or {}
    calls = tuple(
        Call(
            name=case.names.get(c["function"]["name"], c["function"]["name"]),
            arguments=_arguments(c["function"].get("arguments") or ""),
        )
        for c in message.get("tool_calls") or ()
    )
    return Reply(
        content=message.get("content") or "",
        calls=calls,
        message=message,
        work=RequestWork.from_headers(response.headers) or RequestWork(),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )


async def run_multi_turn(
    http: httpx.AsyncClient,
    case: BfclCase,
    *,
    model: str,
    instance_prefix: str,
    max_tokens: int | None = None,
) -> Exchange:
    """Play every user turn of a multi-turn case, running the calls on BFCL's API classes.

    ``instance_prefix`` names this run's API instances in BFCL's registry (see
    :func:`~forge_rt.eval.bfcl._check.executed_instances`, which the caller wraps this in).
    """
    exchange = Exchange()
    history: list[dict[str, Any]] = []
    for turn in case.turns:
        history.extend(turn)
        steps: list[list[Call]] = []
        exchange.steps_per_turn.append(steps)
        for _ in range(MAX_STEPS):
            reply = await ask(http, case, history, model=model, max_tokens=max_tokens)
            exchange.replies.append(reply)
            steps.append(list(reply.calls))
            if not reply.calls:
                history.append({"role": "assistant", "content": reply.content})
                break
            results = execute_on_instances(case, reply.calls, prefix=instance_prefix)
            history.append(reply.message)
            wire_calls = reply.message.get("tool_calls") or ()
            for wire, result in zip(wire_calls, results, strict=True):
                history.append({"role": "tool", "tool_call_id": wire["id"], "content": result})
        else:
            exchange.cut_off = True
            exchange.steps_per_turn.pop()
            return exchange
    return exchange
