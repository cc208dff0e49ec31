"""What the request codecs share: the history folded for the wire, and a request read from it.

Outbound, :func:`fold_reasoning` pairs each message with the reasoning the formats carry as a
field of the next assistant message. Inbound, a server reads a client's body into a
:class:`WireRequest`; the tools in it come as :class:`WireTools`, built once per distinct tool
list when the server passes a :class:`ToolMemo` (compiling a tool's validator costs more than
everything else a request needs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import msgspec

from actors import quiet_logger
from forge_rt.core import InferenceRequest, Message, MessageType, Role, ToolSpec

__all__ = [
    "ToolMemo",
    "WireRequest",
    "WireTools",
    "fold_reasoning",
    "struct_tag",
    "tools_once",
]

log = quiet_logger(__name__)


class WireTools(msgspec.Struct, frozen=True, kw_only=True):
    """A request's tool list in forge_rt's terms.

    ``specs`` are the tools the model is offered; ``dropped`` names the ones left out because
    they run on the API vendor's servers (Anthropic's web search, code execution, ...), which a
    local model does not have. ``ignored_keywords`` names the parameter-schema keywords that
    argument validation ignores (forge_rt does not know or enforce them; see
    :func:`~forge_rt.core._schema.ignored_keywords`): the tools are accepted, only validated
    less strictly than their schemas say.
    """

    specs: tuple[ToolSpec, ...] = ()
    dropped: tuple[str, ...] = ()
    ignored_keywords: tuple[str, ...] = ()


class WireRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A chat request received on a server wire (OpenAI or Anthropic), in forge_rt's terms.

    ``model`` and ``stream`` are what the caller asked for; ``include_usage`` is OpenAI's
    ``stream_options.include_usage``; ``dropped_tools`` names the server tools left out of
    ``request.tools`` and ``ignored_schema_keywords`` the tool-schema keywords validation
    ignores (see :class:`WireTools`), for the server to tell its client.
    ``parallel_tool_calls`` is whether the client allows several calls in one reply: OpenAI's
    ``parallel_tool_calls``, Anthropic's ``tool_choice.disable_parallel_tool_use`` negated;
    ``None`` when the client did not say (both APIs then allow them).
    """

    model: str | None
    stream: bool
    request: InferenceRequest
    include_usage: bool = False
    dropped_tools: tuple[str, ...] = ()
    ignored_schema_keywords: tuple[str, ...] = ()
    parallel_tool_calls: bool | None = None


class ToolMemo(Protocol):
    """Where a server keeps the tools it built from a request, between requests (the proxy's
    tool cache is one).

    ``key`` is the tool list's exact JSON with the API's name in front, so one memo serves both
    APIs; ``get`` returns what ``build`` made for that key before, or calls it now. An error
    from ``build`` propagates and is not remembered.
    """

    def get(self, key: bytes, build: Callable[[], WireTools]) -> WireTools: ...


def tools_once(memo: ToolMemo | None, key: bytes, build: Callable[[], WireTools]) -> WireTools:
    """The tools for ``key``: from ``memo`` when there is one, else built now."""
    return build() if memo is None else memo.get(key, build)


def struct_tag(value: msgspec.Struct) -> str:
    """The tag a tagged-union struct was decoded by (its ``type`` or ``role``), for messages
    that name what was refused."""
    return str(value.__struct_config__.tag)


def fold_reasoning(messages: Iterable[Message]) -> list[tuple[Message, str | None]]:
    """Pair each wire-bound message with the reasoning that preceded it.

    A REASONING message is folded into the next assistant message (tool call or text); the
    formats carry it as a field of that message, never as a turn of its own. Reasoning with no
    assistant message after it (the reply that followed was dropped) has nowhere to go on the
    wire and is left out.
    """
    out: list[tuple[Message, str | None]] = []
    pending: list[str] = []
    for message in messages:
        if message.type is MessageType.REASONING:
            pending.append(message.content)
            continue
        if message.role is Role.ASSISTANT:
            out.append((message, "\n".join(pending) if pending else None))
            pending = []
            continue
        if pending:
            log.debug("reasoning_dropped_from_wire", reason="no assistant message follows it")
            pending = []
        out.append((message, None))
    if pending:
        log.debug("reasoning_dropped_from_wire", reason="it ends the history")
    return out
