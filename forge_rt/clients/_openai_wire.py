"""The OpenAI chat-completions wire format, in both directions.

Forward (what the clients send and read): :func:`openai_messages_to_wire`,
:func:`openai_tools_to_wire`, :func:`openai_request_to_wire`, :func:`openai_response_from_wire`
and :class:`OpenAIStreamDecoder`. Inverse (what the proxy reads and sends):
:func:`openai_request_from_wire`, :func:`openai_messages_from_wire`,
:func:`openai_tools_from_wire`, :func:`openai_response_to_wire` and :class:`OpenAIStreamEncoder`.
All pure; the inverse parsers raise :class:`msgspec.ValidationError` saying what and where
(``... - at `$.messages[2].tool_call_id```), which a server answers with a 400.

Dialects: ``"openai"`` sends only fields the OpenAI API defines (a non-OpenAI sampling field or a
grammar raises ``ValueError``); ``"llamacpp"`` adds ``top_k``, ``min_p``, ``repeat_penalty`` and
``grammar`` (llama-server, llamafile, LM Studio use these names); ``"vllm"`` adds ``top_k``,
``min_p`` and ``repetition_penalty``.

Reasoning: a REASONING message before an assistant message is folded into that message as
``reasoning_content`` when ``reasoning_replay`` is on (llama-server and vLLM accept it), and
left off the wire otherwise. Replies' reasoning is read from ``reasoning_content``,
``reasoning`` or ``<think>`` tags in the content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

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
    json_object_or_none,
    reply_result,
    result_reasoning,
    retraction_refused,
    stream_decode_error,
)
from forge_rt.core import (
    FinalChunk,
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    LLMResponse,
    Message,
    MessageType,
    OutputConstraint,
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
from forge_rt.errors import BackendError, ForgeError

__all__ = [
    "OpenAIDialect",
    "OpenAIStreamDecoder",
    "OpenAIStreamEncoder",
    "openai_messages_from_wire",
    "openai_messages_to_wire",
    "openai_request_from_wire",
    "openai_request_to_wire",
    "openai_response_from_wire",
    "openai_response_to_wire",
    "openai_tools_from_wire",
    "openai_tools_to_wire",
]

OpenAIDialect = Literal["openai", "llamacpp", "vllm"]


# ---------------------------------------------------------------------------------------------
# Wire structs (decoding). Unknown fields are ignored: servers add their own freely.


class _Function(msgspec.Struct, kw_only=True):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _ToolCallWire(msgspec.Struct, kw_only=True):
    index: int | None = None
    id: str | None = None
    type: str | None = None
    function: _Function | None = None


class _ContentPart(msgspec.Struct, kw_only=True):
    type: str
    text: str | None = None


class _MessageWire(msgspec.Struct, kw_only=True):
    role: str | None = None
    content: str | list[_ContentPart] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallWire] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class _Choice(msgspec.Struct, kw_only=True):
    index: int = 0
    message: _MessageWire | None = None
    delta: _MessageWire | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct, kw_only=True):
    cached_tokens: int | None = None


class _UsageWire(msgspec.Struct, kw_only=True):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _LlamaTimings(msgspec.Struct, kw_only=True):
    cache_n: int | None = None
    prompt_n: int | None = None
    predicted_n: int | None = None


class _ErrorWire(msgspec.Struct, kw_only=True):
    message: str = ""
    type: str | None = None
    code: int | str | None = None


class _CompletionWire(msgspec.Struct, kw_only=True):
    id: str | None = None
    model: str | None = None
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: _UsageWire | None = None
    timings: _LlamaTimings | None = None
    error: _ErrorWire | str | None = None


_completion_decoder = msgspec.json.Decoder(_CompletionWire)


# ---------------------------------------------------------------------------------------------
# Forward: forge_rt -> wire


def _text(part: str | list[_ContentPart] | None) -> str:
    if part is None:
        return ""
    if isinstance(part, str):
        return part
    return "".join(p.text or "" for p in part if p.type == "text")


def _call_to_wire(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.tool, "arguments": msgspec.json.encode(call.args).decode()},
    }


def openai_messages_to_wire(
    messages: Sequence[Message], *, reasoning_replay: bool = True
) -> list[dict[str, Any]]:
    """Messages as chat-completions ``messages``; compaction tags and metadata stay behind."""
    out: list[dict[str, Any]] = []
    for message, reasoning in fold_reasoning(messages):
        wire: dict[str, Any] = {"role": message.role.value}
        if message.role is Role.ASSISTANT and message.tool_calls:
            wire["content"] = message.content or None
            wire["tool_calls"] = [_call_to_wire(c) for c in message.tool_calls]
        else:
            wire["content"] = message.content
        if message.role is Role.TOOL:
            wire["tool_call_id"] = message.tool_call_id
        if reasoning is not None and reasoning_replay:
            wire["reasoning_content"] = reasoning
        out.append(wire)
    return out


def openai_tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as ``tools`` entries of type ``function``."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.json_schema(),
            },
        }
        for t in tools
    ]


def _tool_choice_to_wire(choice: ToolChoice) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _sampling_to_wire(sampling: Sampling, dialect: OpenAIDialect) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "seed"):
        value = getattr(sampling, name)
        if value is not None:
            out[name] = value
    if sampling.max_tokens is not None:
        out["max_tokens"] = sampling.max_tokens
    if sampling.stop is not None:
        out["stop"] = list(sampling.stop)
    extra = {"top_k": sampling.top_k, "min_p": sampling.min_p}
    extra["repetition_penalty" if dialect == "vllm" else "repeat_penalty"] = sampling.repeat_penalty
    for name, value in extra.items():
        if value is None:
            continue
        if dialect == "openai":
            raise ValueError(
                f"sampling field {name}={value!r} is not part of the OpenAI API; use a "
                "llama.cpp or vLLM dialect client for this server, or leave the field unset"
            )
        out[name] = value
    return out


def _constraint_to_wire(constraint: OutputConstraint, dialect: OpenAIDialect) -> dict[str, Any]:
    if isinstance(constraint, JsonSchemaConstraint):
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": constraint.schema, "strict": True},
            }
        }
    if dialect != "llamacpp":
        raise ValueError(
            "a GBNF grammar constraint needs llama-server (LlamaServerClient); this server "
            "only takes JSON-schema constraints -- check client.capabilities.grammar first"
        )
    return {"grammar": constraint.gbnf}


def openai_request_to_wire(
    request: InferenceRequest,
    *,
    model: str | None,
    stream: bool,
    dialect: OpenAIDialect = "openai",
    reasoning_replay: bool = True,
    default_tool_choice: ToolChoice | None = None,
    messages: list[dict[str, Any]] | None = None,
    send_tools: bool = True,
) -> dict[str, Any]:
    """A complete ``/v1/chat/completions`` body for ``request``.

    ``messages`` replaces the serialised history (prompt-injected tool mode builds its own);
    ``send_tools=False`` keeps the tools off the wire for the same reason. An
    ``assistant_prefill`` is sent as a trailing assistant message, which only llama-server
    continues -- other dialects raise ``ValueError``.
    """
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    wire_messages = (
        messages
        if messages is not None
        else openai_messages_to_wire(request.messages, reasoning_replay=reasoning_replay)
    )
    if request.assistant_prefill is not None:
        if dialect != "llamacpp":
            raise ValueError(
                "assistant_prefill needs a backend that continues a partial assistant reply "
                "(llama-server); check client.capabilities.assistant_prefill first"
            )
        wire_messages = [
            *wire_messages,
            {"role": "assistant", "content": request.assistant_prefill},
        ]
    body["messages"] = wire_messages
    if request.tools and send_tools:
        body["tools"] = openai_tools_to_wire(request.tools)
        choice = request.tool_choice if request.tool_choice is not None else default_tool_choice
        if choice is not None:
            body["tool_choice"] = _tool_choice_to_wire(choice)
    body.update(_sampling_to_wire(request.sampling, dialect))
    if request.constraint is not None:
        body.update(_constraint_to_wire(request.constraint, dialect))
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# ---------------------------------------------------------------------------------------------
# Forward: wire -> forge_rt


def _usage(usage: _UsageWire | None, timings: _LlamaTimings | None) -> Usage:
    cached = None
    if usage is not None and usage.prompt_tokens_details is not None:
        cached = usage.prompt_tokens_details.cached_tokens
    if cached is None and timings is not None:
        cached = timings.cache_n
    return Usage(
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        cached_tokens=cached,
    )


def _in_band_error(error: _ErrorWire | str, *, url: str | None, retry_safe: bool) -> BackendError:
    message = error if isinstance(error, str) else error.message
    code = None if isinstance(error, str) else error.code
    return in_band_error(
        f"the backend reported an error inside its reply (code {code})",
        url=url,
        body=message,
        retry_safe=retry_safe,
        status=code if isinstance(code, int) else None,
    )


def openai_response_from_wire(
    body: bytes, *, timings: Timings = NO_TIMINGS, url: str | None = None
) -> LLMResponse:
    """Parse a non-streamed chat completion.

    Raises ``BackendError(MALFORMED_RESPONSE)`` when the body is not a completion and
    ``BackendError(SERVER_ERROR)`` when it is an error object.
    """
    try:
        wire = _completion_decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise malformed_error(str(exc), url=url, body=body) from exc
    if wire.error is not None:
        raise _in_band_error(wire.error, url=url, retry_safe=True)
    if not wire.choices or wire.choices[0].message is None:
        raise malformed_error("it has no choices[0].message", url=url, body=body)
    choice = wire.choices[0]
    message = choice.message
    assert message is not None  # checked just above; narrows for the type checker
    raw = _text(message.content)
    calls = [
        RawCall(
            call_id=c.id,
            name=(c.function.name or "") if c.function else "",
            arguments=(c.function.arguments or "") if c.function else "",
        )
        for c in message.tool_calls or ()
    ]
    return LLMResponse(
        result=reply_result(raw, message.reasoning_content or message.reasoning, calls),
        usage=_usage(wire.usage, wire.timings),
        timings=timings,
        finish_reason=choice.finish_reason,
        raw_text=raw,
        model=wire.model,
    )


class OpenAIStreamDecoder:
    """Consumes the ``data:`` payloads of a chat-completions stream, yielding typed chunks.

    Content deltas go through the think-tag splitter; tool-call deltas through the by-index
    assembler. :attr:`complete` turns true at ``[DONE]``, or once a ``finish_reason`` was seen
    (some servers end the body without ``[DONE]``).
    """

    def __init__(self, *, url: str | None = None) -> None:
        self._url = url
        self._reply = ReplyAssembler()
        self._finish: str | None = None
        self._usage: _UsageWire | None = None
        self._timings: _LlamaTimings | None = None
        self._model: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done or self._finish is not None

    @property
    def partial_text(self) -> str:
        """The raw text received so far (for error context)."""
        return self._reply.raw_text

    def feed(self, data: str, *, delivered: bool = False) -> list[StreamChunk]:
        """One event's data; raises :class:`StreamError` if it is not a chunk.

        ``delivered`` (whether the caller already got output) decides ``retry_safe`` on an
        error the server reports inside the stream.
        """
        if data.strip() == "[DONE]":
            self._done = True
            return []
        try:
            wire = _completion_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise stream_decode_error(
                "chunk", "a valid chat-completion chunk", data, exc, partial=self.partial_text
            ) from exc
        if wire.error is not None:
            raise _in_band_error(wire.error, url=self._url, retry_safe=not delivered)
        self._model = wire.model or self._model
        if wire.usage is not None:
            self._usage = wire.usage
        if wire.timings is not None:
            self._timings = wire.timings
        out: list[StreamChunk] = []
        for choice in wire.choices:
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
            delta = choice.delta or choice.message
            if delta is None:
                continue
            reasoning = delta.reasoning_content or delta.reasoning
            if reasoning:
                out.extend(self._reply.reasoning(reasoning))
            text = _text(delta.content)
            if text:
                out.extend(self._reply.text(text))
            for tc in delta.tool_calls or ():
                fn = tc.function
                args = fn.arguments if fn else None
                if isinstance(args, dict):
                    args = msgspec.json.encode(args).decode()
                out.extend(self._reply.call(tc.index, tc.id, fn.name if fn else None, args))
        return out

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]:
        """The stream ended: the last held-back text, and the assembled response."""
        tail, result = self._reply.finish()
        return tail, LLMResponse(
            result=result,
            usage=_usage(self._usage, self._timings),
            timings=timings,
            finish_reason=self._finish,
            raw_text=self.partial_text,
            model=self._model,
        )


# ---------------------------------------------------------------------------------------------
# Inverse: wire -> forge_rt (the proxy reading a client's request)


class _ToolFunctionWire(msgspec.Struct, kw_only=True):
    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


class _ToolWire(msgspec.Struct, kw_only=True):
    type: str = "function"
    function: _ToolFunctionWire


class _NamedChoice(msgspec.Struct, kw_only=True):
    name: str


class _ToolChoiceWire(msgspec.Struct, kw_only=True):
    type: str = "function"
    function: _NamedChoice


class _JsonSchemaWire(msgspec.Struct, kw_only=True):
    name: str = "output"
    schema: dict[str, Any] | None = None


class _ResponseFormat(msgspec.Struct, kw_only=True):
    type: str
    json_schema: _JsonSchemaWire | None = None


class _StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


class _ChatRequestWire(msgspec.Struct, kw_only=True):
    model: str | None = None
    messages: list[_MessageWire]
    tools: list[_ToolWire] | None = None
    tool_choice: str | _ToolChoiceWire | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repeat_penalty: float | None = None
    repetition_penalty: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    response_format: _ResponseFormat | None = None
    grammar: str | None = None


_request_decoder = msgspec.json.Decoder(_ChatRequestWire)


def _strict_text(content: str | list[_ContentPart] | None, path: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    for i, part in enumerate(content):
        if part.type != "text":
            raise invalid(
                f"content parts of type {part.type!r} are not supported (text only)",
                f"{path}[{i}].type",
            )
    return "".join(p.text or "" for p in content)


def _messages_from(wire: Sequence[_MessageWire], base: str) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}
    for i, m in enumerate(wire):
        path = f"{base}[{i}]"
        content = _strict_text(m.content, f"{path}.content")
        if m.role in ("system", "developer"):
            out.append(Message.system(content))
        elif m.role == "user":
            out.append(Message.user(content))
        elif m.role == "assistant":
            reasoning = m.reasoning_content or m.reasoning
            if reasoning:
                out.append(
                    Message(role=Role.ASSISTANT, content=reasoning, type=MessageType.REASONING)
                )
            if m.tool_calls:
                calls = []
                for j, tc in enumerate(m.tool_calls):
                    cpath = f"{path}.tool_calls[{j}]"
                    if tc.function is None or not tc.function.name:
                        raise invalid("a tool call needs function.name", cpath)
                    args = json_object_or_none(tc.function.arguments or "")
                    if args is None:
                        raise invalid(
                            "function.arguments must be a JSON object (as a string)",
                            f"{cpath}.function.arguments",
                        )
                    if not tc.id:
                        raise invalid("a tool call in the history needs its id", f"{cpath}.id")
                    names[tc.id] = tc.function.name
                    calls.append(ToolCall(tool=tc.function.name, args=args, call_id=tc.id))
                out.append(Message.assistant_calls(calls, content=content))
            else:
                out.append(Message.assistant_text(content))
        elif m.role == "tool":
            if not m.tool_call_id:
                raise invalid(
                    "a tool message must name the call it answers", f"{path}.tool_call_id"
                )
            out.append(
                Message(
                    role=Role.TOOL,
                    content=content,
                    type=MessageType.TOOL_RESULT,
                    tool_call_id=m.tool_call_id,
                    tool_name=names.get(m.tool_call_id, m.name),
                )
            )
        else:
            raise invalid(
                f"role {m.role!r} is not supported (system, developer, user, assistant, tool)",
                f"{path}.role",
            )
    return out


def openai_messages_from_wire(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Chat-completions ``messages`` (decoded JSON) as forge_rt messages.

    Assistant ``reasoning_content`` / ``reasoning`` becomes a REASONING message before the
    reply; a tool message's ``tool_name`` is taken from the call it answers.
    """
    wire = msgspec.convert(messages, list[_MessageWire])
    return _messages_from(wire, "$.messages")


def _tools_from(tools: Sequence[_ToolWire], base: str) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for i, t in enumerate(tools):
        if t.type != "function":
            raise invalid(f"tool type {t.type!r} is not supported", f"{base}[{i}].type")
        try:
            out.append(
                ToolSpec(
                    name=t.function.name,
                    description=t.function.description,
                    parameters=t.function.parameters or {},
                )
            )
        except (ForgeError, ValueError) as exc:
            raise invalid(f"unusable tool definition: {exc}", f"{base}[{i}].function") from exc
    return out


def openai_tools_from_wire(tools: Sequence[Mapping[str, Any]]) -> list[ToolSpec]:
    """Chat-completions ``tools`` (decoded JSON) as tool specs."""
    return _tools_from(msgspec.convert(tools, list[_ToolWire]), "$.tools")


def openai_request_from_wire(body: bytes) -> WireRequest:
    """A whole ``/v1/chat/completions`` request body as a :class:`WireRequest`."""
    wire = _request_decoder.decode(body)
    choice: ToolChoice | None
    if isinstance(wire.tool_choice, _ToolChoiceWire):
        choice = wire.tool_choice.function.name
    elif wire.tool_choice in (None, "auto", "required", "none"):
        choice = wire.tool_choice
    else:
        raise invalid(
            f"tool_choice {wire.tool_choice!r} is not auto, required, none or a function",
            "$.tool_choice",
        )
    constraint: OutputConstraint | None = None
    if wire.response_format is not None and wire.response_format.type == "json_schema":
        fmt = wire.response_format.json_schema
        if fmt is None or fmt.schema is None:
            raise invalid(
                "a json_schema response_format needs json_schema.schema",
                "$.response_format.json_schema",
            )
        constraint = JsonSchemaConstraint(schema=fmt.schema)
    elif wire.response_format is not None and wire.response_format.type != "text":
        raise invalid(
            f"response_format type {wire.response_format.type!r} is not supported "
            "(text or json_schema)",
            "$.response_format.type",
        )
    if wire.grammar is not None:
        if constraint is not None:
            raise invalid("give either grammar or a json_schema response_format", "$.grammar")
        constraint = GrammarConstraint(gbnf=wire.grammar)
    stop = [wire.stop] if isinstance(wire.stop, str) else wire.stop
    sampling = Sampling(
        temperature=wire.temperature,
        top_p=wire.top_p,
        top_k=wire.top_k,
        min_p=wire.min_p,
        presence_penalty=wire.presence_penalty,
        frequency_penalty=wire.frequency_penalty,
        repeat_penalty=wire.repeat_penalty
        if wire.repeat_penalty is not None
        else wire.repetition_penalty,
        max_tokens=wire.max_completion_tokens
        if wire.max_completion_tokens is not None
        else wire.max_tokens,
        seed=wire.seed,
        stop=tuple(stop) if stop is not None else None,
    )
    return WireRequest(
        model=wire.model,
        stream=wire.stream,
        include_usage=bool(wire.stream_options and wire.stream_options.include_usage),
        request=InferenceRequest(
            messages=tuple(_messages_from(wire.messages, "$.messages")),
            tools=tuple(_tools_from(wire.tools or (), "$.tools")),
            sampling=sampling,
            tool_choice=choice,
            constraint=constraint,
        ),
    )


# ---------------------------------------------------------------------------------------------
# Inverse: forge_rt -> wire (the proxy answering a client)


def _usage_to_wire(usage: Usage) -> dict[str, Any] | None:
    if usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    out: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return out


def _finish_to_wire(response: LLMResponse) -> str:
    if response.tool_calls:
        return "tool_calls"
    # A backend that did not say why it stopped finished normally: the reply is complete.
    return response.finish_reason or "stop"


def openai_response_to_wire(
    response: LLMResponse, *, model: str, response_id: str, created: int
) -> dict[str, Any]:
    """A ``chat.completion`` body for ``response`` (usage only when the backend reported it)."""
    message: dict[str, Any] = {"role": "assistant"}
    if isinstance(response.result, TextResponse):
        message["content"] = response.result.content
    else:
        message["content"] = None
        message["tool_calls"] = [_call_to_wire(c) for c in response.result]
    reasoning = result_reasoning(response.result)
    if reasoning:
        message["reasoning_content"] = reasoning
    body: dict[str, Any] = {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_to_wire(response)}],
    }
    usage = _usage_to_wire(response.usage)
    if usage is not None:
        body["usage"] = usage
    return body


class OpenAIStreamEncoder:
    """Turns stream chunks into ``chat.completion.chunk`` SSE frames for a client.

    The first frame carries the assistant role. A :class:`FinalChunk` whose response holds tool
    calls that no delta carried (calls parsed from text after the fact) sends them whole before
    the finishing frame. A :class:`ResetChunk` cannot be honoured -- SSE has no way to take back
    what a client already received -- so it raises ``ValueError``: a server that may abandon an
    attempt must buffer instead of streaming it.
    """

    def __init__(
        self, *, model: str, response_id: str, created: int, include_usage: bool = False
    ) -> None:
        self._model = model
        self._id = response_id
        self._created = created
        self._include_usage = include_usage
        self._started = False
        self._streamed_calls: set[int] = set()

    def _frame(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self._started:
            delta = {"role": "assistant", **delta}
            self._started = True
        body = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return encode_sse(msgspec.json.encode(body))

    def encode(self, chunk: StreamChunk) -> bytes:
        """The SSE bytes for one chunk (several frames for a final chunk)."""
        if isinstance(chunk, TextDeltaChunk):
            return self._frame({"content": chunk.text})
        if isinstance(chunk, ReasoningDeltaChunk):
            return self._frame({"reasoning_content": chunk.text})
        if isinstance(chunk, ToolCallDeltaChunk):
            self._streamed_calls.add(chunk.index)
            return self._frame({"tool_calls": [_delta_call(chunk)]})
        if isinstance(chunk, ResetChunk):
            raise retraction_refused(chunk)
        return self._final(chunk)

    def _final(self, chunk: FinalChunk) -> bytes:
        response = chunk.response
        frames = b""
        for i, call in enumerate(response.tool_calls):
            if i not in self._streamed_calls:
                frames += self._frame({"tool_calls": [_delta_call_whole(i, call)]})
        frames += self._frame({}, _finish_to_wire(response))
        usage = _usage_to_wire(response.usage)
        if self._include_usage and usage is not None:
            body = {
                "id": self._id,
                "object": "chat.completion.chunk",
                "created": self._created,
                "model": self._model,
                "choices": [],
                "usage": usage,
            }
            frames += encode_sse(msgspec.json.encode(body))
        return frames

    def done(self) -> bytes:
        """The terminating ``[DONE]`` frame."""
        return encode_sse("[DONE]")


def _delta_call(chunk: ToolCallDeltaChunk) -> dict[str, Any]:
    out: dict[str, Any] = {"index": chunk.index}
    if chunk.call_id is not None:
        out["id"] = chunk.call_id
        out["type"] = "function"
    function: dict[str, Any] = {"arguments": chunk.arguments_delta}
    if chunk.name is not None:
        function["name"] = chunk.name
    out["function"] = function
    return out


def _delta_call_whole(index: int, call: ToolCall) -> dict[str, Any]:
    return {
        "index": index,
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.tool, "arguments": msgspec.json.encode(call.args).decode()},
    }
