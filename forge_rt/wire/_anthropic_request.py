"""An Anthropic Messages request, both ways: an :class:`InferenceRequest` written as a body
(what the clients send), and a client's body read into a :class:`WireRequest` (what a server
does).

The Messages API differs from chat completions in ways the conversion has to settle:

- The system prompt is a request field, not a turn: every system-role message is extracted, in
  order, and joined with blank lines.
- Turns alternate user/assistant: consecutive same-role messages merge into one turn; tool
  results travel as ``tool_result`` blocks at the front of the next user turn.
- Every ``tool_use`` must be answered in the next user turn. A call the history never answered
  gets an explicit error result (:data:`UNANSWERED_CALL_TEXT`) instead of a 400 from the API; a
  result whose call is not in the preceding assistant turn becomes plain text naming the call.
- Reasoning is not replayed: Anthropic thinking blocks need the server's signature, which a
  forge_rt history does not keep, so REASONING messages stay off this wire.
- ``tool_result.is_error`` has no place on :class:`~forge_rt.core.Message`; inbound, the error
  text is kept and the flag is not.

Inbound, a body is decoded once, against the strict schema (:class:`AnthropicRequest`), and
converted from those structs; every error is a located :class:`msgspec.ValidationError`.
Server tools (web search, code execution, ...) run on Anthropic's servers, which a local model
does not have: they are left out of the request's tools and named in
:attr:`WireRequest.dropped_tools`, so clients that always offer them (Claude Code) still work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from forge_rt.core import (
    InferenceRequest,
    Message,
    MessageType,
    Role,
    Sampling,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from forge_rt.errors import ForgeError, UnsupportedRequestError
from forge_rt.wire import _anthropic_schema as an
from forge_rt.wire._faults import invalid, relocated, required
from forge_rt.wire._request import (
    ToolMemo,
    WireRequest,
    WireTools,
    fold_reasoning,
    struct_tag,
    tools_once,
)

__all__ = [
    "UNANSWERED_CALL_TEXT",
    "anthropic_count_tokens_from_wire",
    "anthropic_messages_from_wire",
    "anthropic_messages_to_wire",
    "anthropic_request_from_wire",
    "anthropic_request_to_wire",
    "anthropic_tools_to_wire",
]

UNANSWERED_CALL_TEXT = (
    "Error: this tool call was never executed and has no result; "
    "call the tool again if you still need it."
)


# ---------------------------------------------------------------------------------------------
# Outbound: forge_rt -> wire (the clients)


def _result_block(message: Message) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}


def anthropic_messages_to_wire(
    messages: Sequence[Message],
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for a Messages request; see the module docstring for the rules."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message, _reasoning in fold_reasoning(messages):
        if message.role is Role.SYSTEM:
            system.append(message.content)
        elif message.role is Role.TOOL:
            add("user", [_result_block(message)])
        elif message.role is Role.USER:
            add("user", [{"type": "text", "text": message.content}] if message.content else [])
        else:
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {"type": "tool_use", "id": c.call_id, "name": c.tool, "input": c.args}
                for c in message.tool_calls or ()
            )
            add("assistant", blocks)
    _pair_tool_results(turns, messages)
    return ("\n\n".join(system) if system else None), turns


def _pair_tool_results(turns: list[dict[str, Any]], messages: Sequence[Message]) -> None:
    names = {c.call_id: c.tool for m in messages for c in m.tool_calls or ()}
    open_ids: list[str] = []
    i = 0
    while i < len(turns):
        turn = turns[i]
        if turn["role"] == "assistant":
            if open_ids:
                turns.insert(i, {"role": "user", "content": []})
                continue
            open_ids = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
            i += 1
            continue
        results, others = [], []
        for block in turn["content"]:
            if block["type"] != "tool_result":
                others.append(block)
            elif block["tool_use_id"] in open_ids:
                results.append(block)
            else:
                name = names.get(block["tool_use_id"], "a tool")
                others.append(
                    {
                        "type": "text",
                        "text": f"Result of {name} (call {block['tool_use_id']}):\n"
                        f"{block['content']}",
                    }
                )
        answered = {b["tool_use_id"] for b in results}
        missing = [
            {
                "type": "tool_result",
                "tool_use_id": cid,
                "content": UNANSWERED_CALL_TEXT,
                "is_error": True,
            }
            for cid in open_ids
            if cid not in answered
        ]
        turn["content"] = missing + results + others
        open_ids = []
        i += 1
    if open_ids:
        turns.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": cid,
                        "content": UNANSWERED_CALL_TEXT,
                        "is_error": True,
                    }
                    for cid in open_ids
                ],
            }
        )


def anthropic_tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Messages ``tools`` entries."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.json_schema()}
        for t in tools
    ]


def _tool_choice_to_wire(choice: ToolChoice) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def _sampling_to_wire(sampling: Sampling, default_max_tokens: int) -> dict[str, Any]:
    unsupported = {
        "min_p": sampling.min_p,
        "presence_penalty": sampling.presence_penalty,
        "frequency_penalty": sampling.frequency_penalty,
        "repeat_penalty": sampling.repeat_penalty,
        "seed": sampling.seed,
    }
    for name, value in unsupported.items():
        if value is not None:
            raise UnsupportedRequestError(
                f"the Anthropic Messages API has no {name} (got {value!r}); leave it unset",
                feature=name,
                api="anthropic",
            )
    out: dict[str, Any] = {
        "max_tokens": sampling.max_tokens if sampling.max_tokens is not None else default_max_tokens
    }
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(sampling, name)
        if value is not None:
            out[name] = value
    if sampling.stop is not None:
        out["stop_sequences"] = list(sampling.stop)
    return out


def anthropic_request_to_wire(
    request: InferenceRequest, *, model: str, stream: bool, default_max_tokens: int
) -> dict[str, Any]:
    """A complete ``/v1/messages`` body. ``max_tokens`` is required by the API: the request's
    value, else ``default_max_tokens``. Output constraints and prefill are not available here
    and raise :class:`~forge_rt.errors.UnsupportedRequestError`."""
    if request.constraint is not None:
        raise UnsupportedRequestError(
            "the Anthropic Messages API takes no JSON-schema or grammar constraint; "
            "check client.capabilities before asking for one",
            feature="constraint",
            api="anthropic",
        )
    if request.assistant_prefill is not None:
        raise UnsupportedRequestError(
            "AnthropicClient does not support assistant_prefill; check "
            "client.capabilities.assistant_prefill first",
            feature="assistant_prefill",
            api="anthropic",
        )
    system, messages = anthropic_messages_to_wire(request.messages)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if system is not None:
        body["system"] = system
    if request.tools:
        body["tools"] = anthropic_tools_to_wire(request.tools)
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice_to_wire(request.tool_choice)
    body.update(_sampling_to_wire(request.sampling, default_max_tokens))
    body["stream"] = stream
    return body


# ---------------------------------------------------------------------------------------------
# Inbound: wire -> forge_rt (a server reading a client's request)


def anthropic_request_from_wire(body: bytes, memo: ToolMemo | None = None) -> WireRequest:
    """A whole ``/v1/messages`` body as a :class:`WireRequest`, decoded once.

    Raises :class:`msgspec.DecodeError` for a body that is not JSON and
    :class:`msgspec.ValidationError` for one the schema or the conversion refuses; ``memo``
    keeps built tools by their exact JSON (see :func:`~forge_rt.wire.openai_request_from_wire`).
    """
    wire = an.request_decoder.decode(body)
    sampling = Sampling(
        temperature=wire.temperature,
        top_p=wire.top_p,
        top_k=wire.top_k,
        max_tokens=wire.max_tokens,
        stop=tuple(wire.stop_sequences) if wire.stop_sequences is not None else None,
    )
    return _request(wire, memo, sampling=sampling, stream=bool(wire.stream))


def anthropic_count_tokens_from_wire(body: bytes, memo: ToolMemo | None = None) -> WireRequest:
    """A ``/v1/messages/count_tokens`` body as a :class:`WireRequest`: the prompt and tools a
    Messages request with them would have (no ``max_tokens``, nothing to generate)."""
    wire = an.count_decoder.decode(body)
    return _request(wire, memo, sampling=Sampling(), stream=False)


def anthropic_messages_from_wire(
    messages: Sequence[Mapping[str, Any]], system: str | None = None
) -> list[Message]:
    """Messages ``messages`` (decoded JSON) and ``system`` as forge_rt messages, checked against
    the same schema as a whole request.

    Thinking blocks become REASONING messages; ``tool_result`` blocks become tool messages
    ahead of any text in the same user turn.
    """
    wire = msgspec.convert({"messages": list(messages)}, an.MessageList)
    return _messages_from(wire.messages, system)


def _request(
    wire: an.MessagesBase, memo: ToolMemo | None, *, sampling: Sampling, stream: bool
) -> WireRequest:
    if wire.mcp_servers:
        raise invalid("MCP servers are not supported", "$.mcp_servers")
    tools = _tools(wire.tools, memo)
    choice = wire.tool_choice
    disable = choice.disable_parallel_tool_use if choice is not None else None
    return WireRequest(
        model=wire.model,
        stream=stream,
        dropped_tools=tools.dropped,
        ignored_schema_keywords=tools.ignored_keywords,
        parallel_tool_calls=None if disable is None else not disable,
        request=InferenceRequest(
            messages=tuple(_messages_from(wire.messages, _system_text(wire.system))),
            tools=tools.specs,
            tool_choice=_tool_choice(wire.tool_choice),
            sampling=sampling,
            model=wire.model,
        ),
    )


def _tools(raw: msgspec.Raw, memo: ToolMemo | None) -> WireTools:
    if raw == an.NO_TOOLS:
        return WireTools()
    return tools_once(memo, b"anthropic" + bytes(raw), lambda: _build_tools(raw))


def _build_tools(raw: msgspec.Raw) -> WireTools:
    try:
        entries = an.tools_decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise relocated(exc, "$.tools") from exc
    specs: list[ToolSpec] = []
    dropped: list[str] = []
    ignored: set[str] = set()
    for i, entry in enumerate(entries):
        path = f"$.tools[{i}]"
        if entry.get("type") not in (None, "custom"):
            dropped.append(str(entry.get("name") or entry.get("type")))
            continue
        try:
            tool = msgspec.convert(entry, an.CustomTool)
        except msgspec.ValidationError as exc:
            raise relocated(exc, path) from exc
        try:
            spec = ToolSpec(
                name=tool.name, description=tool.description or "", parameters=tool.input_schema
            )
        except (ForgeError, ValueError) as exc:
            raise invalid(f"unusable tool definition: {exc}", path) from exc
        specs.append(spec)
        ignored.update(spec.ignored_keywords())
    return WireTools(
        specs=tuple(specs), dropped=tuple(dropped), ignored_keywords=tuple(sorted(ignored))
    )


def _result_text(content: str | Sequence[msgspec.Struct] | None, path: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts: list[str] = []
    for i, part in enumerate(content):
        if not isinstance(part, an.TextBlock):
            raise invalid(
                f"tool_result content of type {struct_tag(part)!r} is not supported (text only)",
                f"{path}[{i}].type",
            )
        texts.append(part.text)
    return "".join(texts)


def _messages_from(wire: Sequence[an.MessageParam], system: str | None) -> list[Message]:
    out: list[Message] = [Message.system(system)] if system else []
    names: dict[str, str] = {}  # call id -> tool name, for the results that answer them
    for i, m in enumerate(wire):
        path = f"$.messages[{i}]"
        if m.role not in ("user", "assistant"):
            raise invalid(f"role {m.role!r} is not user or assistant", f"{path}.role")
        assistant = m.role == "assistant"
        blocks = [an.TextBlock(text=m.content)] if isinstance(m.content, str) else m.content
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for j, block in enumerate(blocks):
            bpath = f"{path}.content[{j}]"
            if isinstance(block, an.TextBlock):
                texts.append(block.text)
            elif assistant and isinstance(block, an.ThinkingBlock):
                if block.thinking:
                    thinking.append(block.thinking)
            elif assistant and isinstance(block, an.RedactedThinkingBlock):
                continue  # encrypted by the API: nothing a local model could read
            elif assistant and isinstance(block, an.ToolUseBlock):
                if not block.id or not block.name:
                    raise invalid("a tool_use block needs id and name", bpath)
                names[block.id] = block.name
                calls.append(ToolCall(tool=block.name, args=block.input, call_id=block.id))
            elif not assistant and isinstance(block, an.ToolResultBlock):
                call_id = required(
                    block.tool_use_id,
                    "tool_use_id",
                    "a tool_result block needs tool_use_id, the id of the tool_use it answers",
                    f"{bpath}.tool_use_id",
                )
                out.append(
                    Message(
                        role=Role.TOOL,
                        content=_result_text(block.content, f"{bpath}.content"),
                        type=MessageType.TOOL_RESULT,
                        tool_call_id=call_id,
                        tool_name=names.get(call_id),
                    )
                )
            else:
                raise invalid(
                    f"a {struct_tag(block)!r} block is not supported in a {m.role} message",
                    f"{bpath}.type",
                )
        text = "".join(texts)
        if not assistant:
            if texts:
                out.append(Message.user(text))
            continue
        if thinking:
            out.append(
                Message(role=Role.ASSISTANT, content="".join(thinking), type=MessageType.REASONING)
            )
        if calls:
            out.append(Message.assistant_calls(calls, content=text))
        elif texts or not thinking:
            out.append(Message.assistant_text(text))
    return out


def _system_text(system: str | list[an.TextBlock] | None) -> str | None:
    if system is None or isinstance(system, str):
        return system
    return "\n\n".join(b.text for b in system)


def _tool_choice(choice: an.ToolChoiceParam | None) -> ToolChoice | None:
    if choice is None:
        return None
    if choice.type == "tool":
        if not choice.name:
            raise invalid("a tool_choice of type tool needs a name", "$.tool_choice.name")
        return choice.name
    kinds: dict[str, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}
    if choice.type not in kinds:
        raise invalid(
            f"tool_choice type {choice.type!r} is not auto, any, none or tool",
            "$.tool_choice.type",
        )
    return kinds[choice.type]
