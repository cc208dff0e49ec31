"""The Anthropic Messages wire format, in both directions.

Forward: :func:`anthropic_messages_to_wire`, :func:`anthropic_tools_to_wire`,
:func:`anthropic_request_to_wire`, :func:`anthropic_response_from_wire`,
:class:`AnthropicStreamDecoder`. Inverse (for the proxy): :func:`anthropic_request_from_wire`,
:func:`anthropic_messages_from_wire`, :func:`anthropic_tools_from_wire`,
:func:`anthropic_response_to_wire`, :class:`AnthropicStreamEncoder`.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from forge_rt.clients._faults import in_band_error, malformed_error
from forge_rt.clients._sse import encode_sse
from forge_rt.clients._wire_common import (
    NO_TIMINGS,
    RawCall,
    ReplyAssembler,
    WireRequest,
    fold_reasoning,
    invalid,
    reply_result,
    result_reasoning,
    retraction_refused,
    stream_decode_error,
)
from forge_rt.core import (
    FinalChunk,
    InferenceRequest,
    LLMResponse,
    Message,
    MessageType,
    ReasoningDeltaChunk,
    ResetChunk,
    Role,
    Sampling,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
    ToolChoice,
    ToolSpec,
    Usage,
)
from forge_rt.errors import BackendError, ForgeError, StreamError

__all__ = [
    "UNANSWERED_CALL_TEXT",
    "AnthropicStreamDecoder",
    "AnthropicStreamEncoder",
    "anthropic_messages_from_wire",
    "anthropic_messages_to_wire",
    "anthropic_request_from_wire",
    "anthropic_request_to_wire",
    "anthropic_response_from_wire",
    "anthropic_response_to_wire",
    "anthropic_tools_from_wire",
    "anthropic_tools_to_wire",
]

UNANSWERED_CALL_TEXT = (
    "Error: this tool call was never executed and has no result; "
    "call the tool again if you still need it."
)


# ---------------------------------------------------------------------------------------------
# Forward: forge_rt -> wire


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
            raise ValueError(
                f"the Anthropic Messages API has no {name} (got {value!r}); leave it unset"
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
    and raise ``ValueError``."""
    if request.constraint is not None:
        raise ValueError(
            "the Anthropic Messages API takes no JSON-schema or grammar constraint; "
            "check client.capabilities before asking for one"
        )
    if request.assistant_prefill is not None:
        raise ValueError(
            "AnthropicClient does not support assistant_prefill; check "
            "client.capabilities.assistant_prefill first"
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
# Forward: wire -> forge_rt


class _ResultPart(msgspec.Struct, kw_only=True):
    type: str
    text: str | None = None


class _Block(msgspec.Struct, kw_only=True):
    type: str
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[_ResultPart] | None = None
    is_error: bool | None = None


class _UsageWire(msgspec.Struct, kw_only=True):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _ErrorWire(msgspec.Struct, kw_only=True):
    type: str = ""
    message: str = ""


class _MessageWire(msgspec.Struct, kw_only=True):
    type: str | None = None
    model: str | None = None
    content: list[_Block] = msgspec.field(default_factory=list)
    stop_reason: str | None = None
    usage: _UsageWire | None = None
    error: _ErrorWire | None = None


class _Delta(msgspec.Struct, kw_only=True):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class _Event(msgspec.Struct, kw_only=True):
    type: str
    index: int | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    message: _MessageWire | None = None
    usage: _UsageWire | None = None
    error: _ErrorWire | None = None


_message_decoder = msgspec.json.Decoder(_MessageWire)
_event_decoder = msgspec.json.Decoder(_Event)


def _usage(usage: _UsageWire | None, output_tokens: int | None = None) -> Usage:
    """Anthropic's ``input_tokens`` excludes cache reads and writes; ``prompt_tokens`` is the
    whole prompt, so they are added back."""
    if usage is None:
        return Usage(completion_tokens=output_tokens)
    prompt = None
    if usage.input_tokens is not None:
        prompt = (
            usage.input_tokens
            + (usage.cache_read_input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
        )
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=output_tokens if output_tokens is not None else usage.output_tokens,
        cached_tokens=usage.cache_read_input_tokens,
    )


def _error(error: _ErrorWire, *, url: str | None, retry_safe: bool) -> BackendError:
    return in_band_error(
        f"the backend reported a {error.type or 'unnamed'} error inside its reply",
        url=url,
        body=error.message,
        retry_safe=retry_safe,
    )


def anthropic_response_from_wire(
    body: bytes, *, timings: Timings = NO_TIMINGS, url: str | None = None
) -> LLMResponse:
    """Parse a non-streamed Messages reply (``BackendError`` on an error or a foreign shape)."""
    try:
        wire = _message_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise malformed_error(str(exc), url=url, body=body) from exc
    if wire.error is not None:
        raise _error(wire.error, url=url, retry_safe=True)
    if wire.type != "message":
        raise malformed_error(f"its type is {wire.type!r}, not 'message'", url=url, body=body)
    raw = "".join(b.text or "" for b in wire.content if b.type == "text")
    thinking = "".join(b.thinking or "" for b in wire.content if b.type == "thinking")
    calls = [
        RawCall(call_id=b.id, name=b.name or "", arguments=b.input or {})
        for b in wire.content
        if b.type == "tool_use"
    ]
    return LLMResponse(
        result=reply_result(raw, thinking, calls),
        usage=_usage(wire.usage),
        timings=timings,
        finish_reason=wire.stop_reason,
        raw_text=raw,
        model=wire.model,
    )


class AnthropicStreamDecoder:
    """Consumes Messages stream events (their JSON data), yielding typed chunks.

    Tool-use blocks are numbered 0, 1, ... in order of appearance, whatever their content-block
    index, so tool-call deltas match the chat-completions convention. :attr:`complete` turns
    true at ``message_stop``.
    """

    def __init__(self, *, url: str | None = None) -> None:
        self._url = url
        self._reply = ReplyAssembler()
        self._call_index: dict[int, int] = {}
        self._usage: _UsageWire | None = None
        self._output_tokens: int | None = None
        self._stop: str | None = None
        self._model: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    @property
    def partial_text(self) -> str:
        return self._reply.raw_text

    def feed(self, data: str, *, delivered: bool = False) -> list[StreamChunk]:
        """One event's data; raises :class:`StreamError` if it is not an event."""
        try:
            event = _event_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise stream_decode_error(
                "event", "a valid Messages event", data, exc, partial=self.partial_text
            ) from exc
        kind = event.type
        if kind == "error":
            raise _error(event.error or _ErrorWire(), url=self._url, retry_safe=not delivered)
        if kind == "message_start" and event.message is not None:
            self._usage = event.message.usage
            self._model = event.message.model
        elif kind == "message_delta":
            if event.delta is not None and event.delta.stop_reason is not None:
                self._stop = event.delta.stop_reason
            if event.usage is not None and event.usage.output_tokens is not None:
                self._output_tokens = event.usage.output_tokens
        elif kind == "message_stop":
            self._done = True
        elif kind == "content_block_start" and event.content_block is not None:
            return self._block_start(event.index, event.content_block)
        elif kind == "content_block_delta" and event.delta is not None:
            return self._block_delta(event.index, event.delta)
        return []

    def _block_start(self, index: int | None, block: _Block) -> list[StreamChunk]:
        if block.type == "tool_use":
            call = len(self._call_index)
            self._call_index[index if index is not None else -1 - call] = call
            args = msgspec.json.encode(block.input).decode() if block.input else None
            return self._reply.call(call, block.id, block.name, args)
        if block.type == "text" and block.text:
            return self._reply.text(block.text)
        if block.type == "thinking" and block.thinking:
            return self._reply.reasoning(block.thinking)
        return []

    def _block_delta(self, index: int | None, delta: _Delta) -> list[StreamChunk]:
        if delta.type == "text_delta" and delta.text:
            return self._reply.text(delta.text)
        if delta.type == "thinking_delta" and delta.thinking:
            return self._reply.reasoning(delta.thinking)
        if delta.type == "input_json_delta" and delta.partial_json:
            if index not in self._call_index:
                raise StreamError(
                    f"an input_json_delta arrived for content block {index}, which is not an "
                    "open tool_use block",
                    partial=self.partial_text,
                )
            return self._reply.call(self._call_index[index], None, None, delta.partial_json)
        return []

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]:
        """The stream ended: the last held-back text, and the assembled response."""
        tail, result = self._reply.finish()
        return tail, LLMResponse(
            result=result,
            usage=_usage(self._usage, self._output_tokens),
            timings=timings,
            finish_reason=self._stop,
            raw_text=self.partial_text,
            model=self._model,
        )


# ---------------------------------------------------------------------------------------------
# Inverse: wire -> forge_rt (the proxy reading a client's request)


class _InMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[_Block]


class _ToolWire(msgspec.Struct, kw_only=True):
    name: str
    description: str = ""
    input_schema: dict[str, Any] | None = None
    type: str | None = None


class _ToolChoiceWire(msgspec.Struct, kw_only=True):
    type: str
    name: str | None = None


class _SystemBlock(msgspec.Struct, kw_only=True):
    type: str
    text: str = ""


class _RequestWire(msgspec.Struct, kw_only=True):
    model: str | None = None
    messages: list[_InMessage]
    system: str | list[_SystemBlock] | None = None
    max_tokens: int | None = None
    tools: list[_ToolWire] | None = None
    tool_choice: _ToolChoiceWire | None = None
    stream: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: list[str] | None = None


_request_decoder = msgspec.json.Decoder(_RequestWire)


def _result_text(content: str | list[_ResultPart] | None, path: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    for i, part in enumerate(content):
        if part.type != "text":
            raise invalid(
                f"tool_result content of type {part.type!r} is not supported (text only)",
                f"{path}[{i}].type",
            )
    return "".join(p.text or "" for p in content)


def _messages_from(wire: Sequence[_InMessage], system: str | None) -> list[Message]:
    out: list[Message] = [Message.system(system)] if system else []
    names: dict[str, str] = {}
    for i, m in enumerate(wire):
        path = f"$.messages[{i}]"
        blocks = [_Block(type="text", text=m.content)] if isinstance(m.content, str) else m.content
        if m.role not in ("user", "assistant"):
            raise invalid(f"role {m.role!r} is not user or assistant", f"{path}.role")
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for j, block in enumerate(blocks):
            bpath = f"{path}.content[{j}]"
            if block.type == "text":
                texts.append(block.text or "")
            elif block.type in ("thinking", "redacted_thinking") and m.role == "assistant":
                if block.thinking:
                    thinking.append(block.thinking)
            elif block.type == "tool_use" and m.role == "assistant":
                if not block.id or not block.name:
                    raise invalid("a tool_use block needs id and name", bpath)
                names[block.id] = block.name
                calls.append(ToolCall(tool=block.name, args=block.input or {}, call_id=block.id))
            elif block.type == "tool_result" and m.role == "user":
                if not block.tool_use_id:
                    raise invalid("a tool_result block needs tool_use_id", bpath)
                out.append(
                    Message(
                        role=Role.TOOL,
                        content=_result_text(block.content, f"{bpath}.content"),
                        type=MessageType.TOOL_RESULT,
                        tool_call_id=block.tool_use_id,
                        tool_name=names.get(block.tool_use_id),
                    )
                )
            else:
                raise invalid(
                    f"a {block.type!r} block is not supported in a {m.role} message",
                    f"{bpath}.type",
                )
        text = "".join(texts)
        if m.role == "user":
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


def _system_text(system: str | list[_SystemBlock] | None) -> str | None:
    if system is None or isinstance(system, str):
        return system
    return "\n\n".join(b.text for b in system if b.type == "text")


def anthropic_messages_from_wire(
    messages: Sequence[Mapping[str, Any]], system: str | None = None
) -> list[Message]:
    """Messages ``messages`` (decoded JSON) and ``system`` as forge_rt messages.

    Thinking blocks become REASONING messages; ``tool_result`` blocks become tool messages
    ahead of any text in the same user turn.
    """
    return _messages_from(msgspec.convert(messages, list[_InMessage]), system)


def _tools_from(tools: Sequence[_ToolWire]) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for i, t in enumerate(tools):
        path = f"$.tools[{i}]"
        if t.input_schema is None:
            raise invalid(
                f"tool {t.name!r} has no input_schema; server tools ({t.type}) are not supported",
                path,
            )
        try:
            out.append(ToolSpec(name=t.name, description=t.description, parameters=t.input_schema))
        except (ForgeError, ValueError) as exc:
            raise invalid(f"unusable tool definition: {exc}", path) from exc
    return out


def anthropic_tools_from_wire(tools: Sequence[Mapping[str, Any]]) -> list[ToolSpec]:
    """Messages ``tools`` (decoded JSON) as tool specs."""
    return _tools_from(msgspec.convert(tools, list[_ToolWire]))


def anthropic_request_from_wire(body: bytes) -> WireRequest:
    """A whole ``/v1/messages`` request body as a :class:`WireRequest`."""
    wire = _request_decoder.decode(body)
    choice: ToolChoice | None = None
    if wire.tool_choice is not None:
        kinds = {"auto": "auto", "any": "required", "none": "none"}
        if wire.tool_choice.type == "tool":
            if not wire.tool_choice.name:
                raise invalid("a tool_choice of type tool needs a name", "$.tool_choice.name")
            choice = wire.tool_choice.name
        elif wire.tool_choice.type in kinds:
            choice = kinds[wire.tool_choice.type]
        else:
            raise invalid(
                f"tool_choice type {wire.tool_choice.type!r} is not auto, any, none or tool",
                "$.tool_choice.type",
            )
    return WireRequest(
        model=wire.model,
        stream=wire.stream,
        request=InferenceRequest(
            messages=tuple(_messages_from(wire.messages, _system_text(wire.system))),
            tools=tuple(_tools_from(wire.tools or ())),
            tool_choice=choice,
            sampling=Sampling(
                temperature=wire.temperature,
                top_p=wire.top_p,
                top_k=wire.top_k,
                max_tokens=wire.max_tokens,
                stop=tuple(wire.stop_sequences) if wire.stop_sequences is not None else None,
            ),
        ),
    )


# ---------------------------------------------------------------------------------------------
# Inverse: forge_rt -> wire (the proxy answering a client)


def _stop_reason(response: LLMResponse) -> str:
    if response.tool_calls:
        return "tool_use"
    if response.finish_reason in ("length", "max_tokens"):
        return "max_tokens"
    if response.finish_reason == "stop_sequence":
        return "stop_sequence"
    return "end_turn"


def _usage_to_wire(usage: Usage) -> dict[str, int]:
    cached = usage.cached_tokens or 0
    out = {
        "input_tokens": max((usage.prompt_tokens or 0) - cached, 0),
        "output_tokens": usage.completion_tokens or 0,
    }
    if usage.cached_tokens is not None:
        out["cache_read_input_tokens"] = usage.cached_tokens
    return out


def anthropic_response_to_wire(
    response: LLMResponse, *, model: str, message_id: str
) -> dict[str, Any]:
    """A Messages reply body for ``response``; unknown token counts are reported as 0."""
    content: list[dict[str, Any]] = []
    if isinstance(response.result, TextResponse):
        text = response.result.content
        calls: list[ToolCall] = []
    else:
        calls = response.result
        text = ""
    reasoning = result_reasoning(response.result)
    if reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    if text:
        content.append({"type": "text", "text": text})
    content.extend(
        {"type": "tool_use", "id": c.call_id, "name": c.tool, "input": c.args} for c in calls
    )
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(response),
        "stop_sequence": None,
        "usage": _usage_to_wire(response.usage),
    }


class AnthropicStreamEncoder:
    """Turns stream chunks into Messages SSE events for a client.

    ``message_start`` goes out with the first chunk; each run of text, reasoning or one tool
    call is a content block; the final chunk closes the open block, sends any tool calls no
    delta carried, then ``message_delta`` and ``message_stop``. A :class:`ResetChunk` raises
    ``ValueError`` (see :class:`~forge_rt.clients.OpenAIStreamEncoder`).
    """

    def __init__(self, *, model: str, message_id: str) -> None:
        self._model = model
        self._id = message_id
        self._started = False
        self._block = -1
        self._open: tuple[str, int | None] | None = None
        self._streamed_calls: set[int] = set()

    def _event(self, name: str, body: dict[str, Any]) -> bytes:
        return encode_sse(msgspec.json.encode({"type": name, **body}), event=name)

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._event(
            "message_start",
            {
                "message": {
                    "id": self._id,
                    "type": "message",
                    "role": "assistant",
                    "model": self._model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                }
            },
        )

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return self._event("content_block_stop", {"index": self._block})

    def _open_block(self, key: tuple[str, int | None], block: dict[str, Any]) -> bytes:
        if self._open == key:
            return b""
        out = self._close()
        self._block += 1
        self._open = key
        return out + self._event(
            "content_block_start", {"index": self._block, "content_block": block}
        )

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return self._event("content_block_delta", {"index": self._block, "delta": delta})

    def encode(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for one chunk."""
        out = self._start()
        if isinstance(chunk, TextDeltaChunk):
            out += self._open_block(("text", None), {"type": "text", "text": ""})
            return out + self._delta({"type": "text_delta", "text": chunk.text})
        if isinstance(chunk, ReasoningDeltaChunk):
            block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            out += self._open_block(("thinking", None), block)
            return out + self._delta({"type": "thinking_delta", "thinking": chunk.text})
        if isinstance(chunk, ToolCallDeltaChunk):
            if ("tool_use", chunk.index) != self._open:
                self._streamed_calls.add(chunk.index)
                block = {
                    "type": "tool_use",
                    "id": chunk.call_id or "",
                    "name": chunk.name or "",
                    "input": {},
                }
                out += self._open_block(("tool_use", chunk.index), block)
            if chunk.arguments_delta:
                out += self._delta(
                    {"type": "input_json_delta", "partial_json": chunk.arguments_delta}
                )
            return out
        if isinstance(chunk, ResetChunk):
            raise retraction_refused(chunk)
        return out + self._final(chunk)

    def _final(self, chunk: FinalChunk) -> bytes:
        response = chunk.response
        out = b""
        for i, call in enumerate(response.tool_calls):
            if i in self._streamed_calls:
                continue
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": call.call_id,
                "name": call.tool,
                "input": {},
            }
            out += self._open_block(("tool_use", i), block)
            out += self._delta(
                {
                    "type": "input_json_delta",
                    "partial_json": msgspec.json.encode(call.args).decode(),
                }
            )
        out += self._close()
        out += self._event(
            "message_delta",
            {
                "delta": {"stop_reason": _stop_reason(response), "stop_sequence": None},
                "usage": {"output_tokens": response.usage.completion_tokens or 0},
            },
        )
        return out + self._event("message_stop", {})
