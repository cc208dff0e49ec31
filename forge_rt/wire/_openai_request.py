"""An OpenAI chat-completions request, both ways: an :class:`InferenceRequest` written as a
body (what the clients send), and a client's body read into a :class:`WireRequest` (what a
server does).

Dialects (outbound): ``"openai"`` sends only fields the OpenAI API defines (a non-OpenAI
sampling field or a grammar raises ``ValueError``); ``"llamacpp"`` adds ``top_k``, ``min_p``,
``repeat_penalty`` and ``grammar`` (llama-server, llamafile, LM Studio use these names);
``"vllm"`` adds ``top_k``, ``min_p`` and ``repetition_penalty``. A REASONING message before an
assistant message is folded into that message as ``reasoning_content`` when ``reasoning_replay``
is on (llama-server and vLLM accept it), and left off the wire otherwise.

Inbound, a body is decoded once, against the strict schema (:class:`OpenAIRequest`), and
converted from those structs; every error is a :class:`msgspec.ValidationError` saying what and
where (``... - at `$.messages[2].tool_call_id```), which a server answers with a 400. What the
API defines but an :class:`InferenceRequest` cannot hold (``n > 1``, log-probabilities, audio
output, the deprecated ``functions``, web search) is refused the same way rather than dropped,
so the client never gets a silently different answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from forge_rt.core import (
    GrammarConstraint,
    InferenceRequest,
    JsonSchemaConstraint,
    Message,
    MessageType,
    OutputConstraint,
    Role,
    Sampling,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from forge_rt.errors import ForgeError, UnsupportedRequestError
from forge_rt.wire import _openai_schema as oa
from forge_rt.wire._faults import invalid, relocated, required
from forge_rt.wire._reply import json_object_or_none
from forge_rt.wire._request import (
    ToolMemo,
    WireRequest,
    WireTools,
    fold_reasoning,
    struct_tag,
    tools_once,
)

__all__ = [
    "OpenAIDialect",
    "call_to_wire",
    "openai_messages_from_wire",
    "openai_messages_to_wire",
    "openai_request_from_wire",
    "openai_request_to_wire",
    "openai_tools_to_wire",
]

OpenAIDialect = Literal["openai", "llamacpp", "vllm"]


# ---------------------------------------------------------------------------------------------
# Outbound: forge_rt -> wire (the clients)


def call_to_wire(call: ToolCall) -> dict[str, Any]:
    """One call as the API writes it, in a history or a reply."""
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
            wire["tool_calls"] = [call_to_wire(c) for c in message.tool_calls]
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
            raise UnsupportedRequestError(
                f"sampling field {name}={value!r} is not part of the OpenAI API; use a "
                "llama.cpp or vLLM dialect client for this server, or leave the field unset",
                feature=name,
                api="openai",
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
        raise UnsupportedRequestError(
            "a GBNF grammar constraint needs llama-server (LlamaServerClient); this server "
            "only takes JSON-schema constraints -- check client.capabilities.grammar first",
            feature="grammar",
            api=f"openai ({dialect})",
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
    continues -- other dialects raise :class:`~forge_rt.errors.UnsupportedRequestError`.
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
            raise UnsupportedRequestError(
                "assistant_prefill needs a backend that continues a partial assistant reply "
                "(llama-server); check client.capabilities.assistant_prefill first",
                feature="assistant_prefill",
                api=f"openai ({dialect})",
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
# Inbound: wire -> forge_rt (a server reading a client's request)


def openai_request_from_wire(body: bytes, memo: ToolMemo | None = None) -> WireRequest:
    """A whole ``/v1/chat/completions`` body as a :class:`WireRequest`, decoded once.

    Raises :class:`msgspec.DecodeError` for a body that is not JSON and
    :class:`msgspec.ValidationError` for one the schema or the conversion refuses. ``memo``
    keeps the tools built from a tool list, by its exact JSON, so that a client sending the same
    tools with every request has them compiled once; without it they are built each time.
    """
    wire = oa.request_decoder.decode(body)
    _refuse_unsupported(wire)
    tools = _tools(wire.tools, memo)
    return WireRequest(
        model=wire.model,
        stream=bool(wire.stream),
        include_usage=bool(wire.stream_options and wire.stream_options.include_usage),
        ignored_schema_keywords=tools.ignored_keywords,
        parallel_tool_calls=wire.parallel_tool_calls,
        request=InferenceRequest(
            messages=tuple(_messages_from(wire.messages)),
            tools=tools.specs,
            sampling=_sampling(wire),
            tool_choice=_tool_choice(wire.tool_choice),
            constraint=_constraint(wire),
            model=wire.model,
        ),
    )


def openai_messages_from_wire(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Chat-completions ``messages`` (decoded JSON) as forge_rt messages, checked against the
    same schema as a whole request.

    Assistant ``reasoning_content`` / ``reasoning`` becomes a REASONING message before the
    reply; a tool message's ``tool_name`` is taken from the call it answers.
    """
    wire = msgspec.convert({"messages": list(messages)}, oa.MessageList)
    return _messages_from(wire.messages)


def _refuse_unsupported(wire: oa.OpenAIRequest) -> None:
    if wire.n is not None and wire.n != 1:
        raise invalid("only n=1 is supported: the answer is one choice per request", "$.n")
    if wire.logprobs or wire.top_logprobs:
        raise invalid("log-probabilities are not supported", "$.logprobs")
    if wire.audio is not None or (wire.modalities and "audio" in wire.modalities):
        raise invalid("audio output is not supported", "$.modalities")
    if wire.functions is not None or wire.function_call is not None:
        raise invalid(
            "the deprecated functions/function_call fields are not supported; send tools "
            "and tool_choice instead",
            "$.functions",
        )
    if wire.web_search_options is not None:
        raise invalid("web search is not supported", "$.web_search_options")


def _tools(raw: msgspec.Raw, memo: ToolMemo | None) -> WireTools:
    if raw == oa.NO_TOOLS:
        return WireTools()
    return tools_once(memo, b"openai" + bytes(raw), lambda: _build_tools(raw))


def _build_tools(raw: msgspec.Raw) -> WireTools:
    try:
        tools = oa.tools_decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise relocated(exc, "$.tools") from exc
    specs: list[ToolSpec] = []
    ignored: set[str] = set()
    for i, t in enumerate(tools):
        path = f"$.tools[{i}]"
        if t.type != "function":
            raise invalid(f"tool type {t.type!r} is not supported", f"{path}.type")
        if t.function is None:
            raise invalid("Object missing required field `function`", path)
        try:
            spec = ToolSpec(
                name=t.function.name,
                description=t.function.description or "",
                parameters=t.function.parameters or {},
            )
        except (ForgeError, ValueError) as exc:
            raise invalid(f"unusable tool definition: {exc}", f"{path}.function") from exc
        specs.append(spec)
        ignored.update(spec.ignored_keywords())
    return WireTools(specs=tuple(specs), ignored_keywords=tuple(sorted(ignored)))


def _text(content: str | Sequence[msgspec.Struct] | None, path: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts: list[str] = []
    for i, part in enumerate(content):
        if not isinstance(part, oa.TextPart):
            raise invalid(
                f"content parts of type {struct_tag(part)!r} are not supported (text only)",
                f"{path}[{i}].type",
            )
        texts.append(part.text)
    return "".join(texts)


def _calls_from(
    calls: Sequence[oa.ToolCallParam], path: str, names: dict[str, str]
) -> list[ToolCall]:
    out: list[ToolCall] = []
    for j, tc in enumerate(calls):
        cpath = f"{path}.tool_calls[{j}]"
        if tc.function is None or not tc.function.name:
            raise invalid("a tool call needs function.name", cpath)
        args = json_object_or_none(tc.function.arguments)
        if args is None:
            raise invalid(
                "function.arguments must be a JSON object (as a string)",
                f"{cpath}.function.arguments",
            )
        if not tc.id:
            raise invalid("a tool call in the history needs its id", f"{cpath}.id")
        names[tc.id] = tc.function.name
        out.append(ToolCall(tool=tc.function.name, args=args, call_id=tc.id))
    return out


def _messages_from(wire: Sequence[oa.MessageParam]) -> list[Message]:
    out: list[Message] = []
    names: dict[str, str] = {}  # call id -> tool name, for the results that answer them
    for i, m in enumerate(wire):
        path = f"$.messages[{i}]"
        if isinstance(m, oa.SystemMessage | oa.DeveloperMessage):
            out.append(Message.system(_text(m.content, f"{path}.content")))
        elif isinstance(m, oa.UserMessage):
            out.append(Message.user(_text(m.content, f"{path}.content")))
        elif isinstance(m, oa.AssistantMessage):
            content = _text(m.content, f"{path}.content")
            reasoning = m.reasoning_content or m.reasoning
            if reasoning:
                out.append(
                    Message(role=Role.ASSISTANT, content=reasoning, type=MessageType.REASONING)
                )
            if m.tool_calls:
                calls = _calls_from(m.tool_calls, path, names)
                out.append(Message.assistant_calls(calls, content=content))
            else:
                out.append(Message.assistant_text(content))
        elif isinstance(m, oa.ToolMessage):
            call_id = required(
                m.tool_call_id,
                "tool_call_id",
                "a tool message must name the call it answers",
                f"{path}.tool_call_id",
            )
            out.append(
                Message(
                    role=Role.TOOL,
                    content=_text(m.content, f"{path}.content"),
                    type=MessageType.TOOL_RESULT,
                    tool_call_id=call_id,
                    tool_name=names.get(call_id, m.name),
                )
            )
        else:
            raise invalid(
                f"role {struct_tag(m)!r} is not supported (it is deprecated): send the result "
                "as a tool message answering its tool_call_id",
                f"{path}.role",
            )
    return out


def _tool_choice(choice: str | oa.ToolChoiceParam | None) -> ToolChoice | None:
    if isinstance(choice, oa.ToolChoiceParam):
        if choice.type != "function":
            raise invalid(
                f"tool_choice type {choice.type!r} is not supported (function, or the strings "
                "auto, required, none)",
                "$.tool_choice.type",
            )
        if choice.function is None:
            raise invalid("Object missing required field `function`", "$.tool_choice")
        return choice.function.name
    if choice in (None, "auto", "required", "none"):
        return choice
    raise invalid(
        f"tool_choice {choice!r} is not auto, required, none or a function", "$.tool_choice"
    )


def _constraint(wire: oa.OpenAIRequest) -> OutputConstraint | None:
    fmt = wire.response_format
    constraint: OutputConstraint | None = None
    if fmt is not None and fmt.type == "json_schema":
        if fmt.json_schema is None or fmt.json_schema.schema is None:
            raise invalid(
                "a json_schema response_format needs json_schema.schema",
                "$.response_format.json_schema",
            )
        constraint = JsonSchemaConstraint(schema=fmt.json_schema.schema)
    elif fmt is not None and fmt.type != "text":
        raise invalid(
            f"response_format type {fmt.type!r} is not supported (text or json_schema)",
            "$.response_format.type",
        )
    if wire.grammar is not None:
        if constraint is not None:
            raise invalid("give either grammar or a json_schema response_format", "$.grammar")
        constraint = GrammarConstraint(gbnf=wire.grammar)
    return constraint


def _sampling(wire: oa.OpenAIRequest) -> Sampling:
    stop = [wire.stop] if isinstance(wire.stop, str) else wire.stop
    return Sampling(
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
