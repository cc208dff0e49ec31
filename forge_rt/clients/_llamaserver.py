"""``LlamaServerClient``: llama.cpp's ``llama-server`` (and llamafile, which is the same server).

Beyond chat completions it knows the server's own endpoints -- ``/props`` (context size and
slot count), ``/slots``, ``/metrics``, ``/tokenize``, ``/health`` -- and its request extras:
``cache_prompt``, ``id_slot`` pinning, ``grammar`` and JSON-schema constraints, and continuing a
partial assistant reply (``assistant_prefill``). llama-server's non-streamed reply repeats the
prefill before the continuation while its stream carries only the continuation; this client
returns only the continuation both ways, as the ``LLMClient`` protocol says.

Two tool modes. ``native`` sends ``tools`` and reads structured ``tool_calls`` (the server needs
``--jinja``); text without structured calls comes back as a :class:`TextResponse` for the
guardrails. ``prompt`` describes the tools in the system prompt and parses calls out of the
reply with the guardrails' rescue parser -- for chat templates without tool support. Prompt mode
sends no ``tool_choice`` (there are no wire tools to choose among); the guardrails enforce it.

Two ways to generate. ``chat`` posts to ``/v1/chat/completions``. ``raw`` renders the same chat
body with the server's own template (``/apply-template``) and generates from that prompt with
``/completion`` (``cache_prompt``, ``id_slot``, the same sampling and constraint), reading tool
calls out of the text with the rescue parser. Every reply is then plain text, tool calls
included, so a call preempted half-way is continued from its exact partial reply -- sent as the
very token ids it streamed (:class:`~forge_rt.clients._resumable.ResumablePrompts`) -- where
the chat endpoint's structured tool-call deltas cannot be resumed at all. In raw mode the server
builds no grammar from ``tool_choice``; forge_rt's own constraint and guardrails enforce it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal

import httpx
import msgspec

from forge_rt.clients._http import StreamDecoder
from forge_rt.clients._openai import OpenAICompatClient
from forge_rt.clients._prometheus import metric_samples
from forge_rt.clients._resumable import ResumablePrompts
from forge_rt.core import (
    ClientCapabilities,
    GrammarConstraint,
    InferenceRequest,
    LLMResponse,
    TextResponse,
    Timings,
)
from forge_rt.wire import (
    CompletionStreamDecoder,
    completion_body,
    completion_from_wire,
    openai_request_to_wire,
    prompt_mode_messages,
)

__all__ = ["Generation", "LlamaServerClient", "LlamaServerProps", "SlotState"]

Generation = Literal["chat", "raw"]
"""How :class:`LlamaServerClient` generates: the chat endpoint, or the raw prompt (see above)."""


class _GenerationSettings(msgspec.Struct, kw_only=True):
    n_ctx: int


class _PropsWire(msgspec.Struct, kw_only=True):
    default_generation_settings: _GenerationSettings
    total_slots: int | None = None
    model_path: str | None = None
    model_alias: str | None = None
    build_info: str | None = None


class LlamaServerProps(msgspec.Struct, frozen=True, kw_only=True):
    """What ``/props`` says about the running server.

    ``n_ctx_per_slot`` is the context one request can use: llama-server reports each slot's
    context in ``default_generation_settings.n_ctx`` (the ``-c`` value divided by
    ``--parallel``, as ``/slots`` confirms), not the total.
    """

    n_ctx_per_slot: int
    total_slots: int | None
    model_path: str | None
    model_alias: str | None
    build_info: str | None


class SlotState(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``/slots``."""

    id: int
    n_ctx: int
    is_processing: bool


class _TokenizeWire(msgspec.Struct, kw_only=True):
    tokens: list[int]


class _TemplateWire(msgspec.Struct, kw_only=True):
    prompt: str


class _HealthWire(msgspec.Struct, kw_only=True):
    status: str


class LlamaServerClient(OpenAICompatClient):
    """llama-server / llamafile, natively or with prompt-injected tools.

    ``cache_prompt`` (default on) lets the server reuse the KV cache of a slot whose prompt
    shares a prefix; ``request.slot_id`` pins the call to a slot (``id_slot``). ``generation``
    picks the chat endpoint or raw-prompt generation (see the module docstring); forge_rt's own
    embedded and managed servers use ``"raw"``, so their preempted calls resume exactly.
    """

    _dialect = "llamacpp"

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        mode: Literal["native", "prompt"] = "native",
        generation: Generation = "chat",
        cache_prompt: bool = True,
        api_key: str | None = None,
        reasoning_replay: bool = True,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        deadline: float | None = None,
        recommended_sampling: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if mode not in ("native", "prompt"):
            raise ValueError(f"mode must be 'native' or 'prompt', got {mode!r}")
        if generation not in ("chat", "raw"):
            raise ValueError(f"generation must be 'chat' or 'raw', got {generation!r}")
        self._mode = mode
        self._generation: Generation = generation
        self._resumable = ResumablePrompts()
        self._cache_prompt = cache_prompt
        self._props: LlamaServerProps | None = None
        super().__init__(
            base_url,
            model=model,
            api_key=api_key,
            dialect="llamacpp",
            json_schema=True,
            reasoning_replay=reasoning_replay,
            headers=headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            deadline=deadline,
            recommended_sampling=recommended_sampling,
            transport=transport,
        )
        if generation == "raw":
            self._inference_path = "/completion"

    @property
    def mode(self) -> Literal["native", "prompt"]:
        return self._mode

    @property
    def generation(self) -> Generation:
        return self._generation

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            native_tools=self._mode == "native",
            json_schema=True,
            grammar=True,
            assistant_prefill=True,
            slots=True,
        )

    async def _discover_model(self) -> str:
        """The GGUF file stem of the served model, from ``/props``."""
        props = await self.props()
        path = props.model_path or props.model_alias
        if not path:
            raise ValueError(
                "llama-server's /props names no model_path; pass model=... to use "
                "recommended_sampling"
            )
        return PurePosixPath(path).name

    async def _body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        if self._generation == "chat":
            return await self._chat_body(request, stream=stream)
        # The partial reply goes after the rendered prompt as text, not as a trailing assistant
        # message: templates differ in whether they continue such a message or close it.
        whole = msgspec.structs.replace(request, assistant_prefill=None)
        chat = await self._chat_body(whole, stream=stream)
        rendered = await self._render(chat)
        parts = self._resumable.prompt(rendered + (request.assistant_prefill or ""))
        return completion_body(chat, parts, stream=stream)

    async def _render(self, chat: dict[str, Any]) -> str:
        """The prompt the server's chat template makes of a chat body."""
        rendered = await self._call_json("POST", "/apply-template", _TemplateWire, body=chat)
        return rendered.prompt

    async def _chat_body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        """The ``/v1/chat/completions`` body for ``request``."""
        prompt = self._mode == "prompt" and bool(request.tools)
        body = openai_request_to_wire(
            await self._sampled(request),
            model=await self._wire_model(),
            stream=stream,
            dialect="llamacpp",
            reasoning_replay=self._reasoning_replay,
            messages=prompt_mode_messages(request.messages, request.tools) if prompt else None,
            send_tools=not prompt,
        )
        body["cache_prompt"] = self._cache_prompt
        if stream:
            # Progress on the prompt as it is prefilled: the slot tells a long prefill, even on
            # a crowded CPU, from a hung server by these (StallLimits).
            body["return_progress"] = True
        if isinstance(request.constraint, GrammarConstraint) and "tools" in body:
            # llama-server refuses a grammar beside tools it would parse calls from ("Cannot
            # use custom grammar constraints with tools"); with tool_choice "none" it renders
            # the same prompt (tools included) and leaves the reply text to the grammar, which
            # is what a constrained reply is: forge_rt's rescue parser reads the calls.
            body["tool_choice"] = "none"
        if request.slot_id is not None:
            body["id_slot"] = request.slot_id
        return body

    def _stream_decoder(self, request: InferenceRequest, body: dict[str, Any]) -> StreamDecoder:
        if self._generation == "chat":
            return self._decoder(request)
        decoder = CompletionStreamDecoder(url=self._url(self._inference_path))
        self._resumable.streaming(body["prompt"], decoder.pieces)
        return decoder

    def _parse(self, body: bytes, request: InferenceRequest, timings: Timings) -> LLMResponse:
        if self._generation == "raw":
            raw = completion_from_wire(body, timings=timings, url=self._url(self._inference_path))
            return self._finalize(raw, request)
        response = super()._parse(body, request, timings)
        prefill = request.assistant_prefill
        if not prefill or not response.raw_text.startswith(prefill):
            return response
        rest = response.raw_text[len(prefill) :]
        result = response.result
        if isinstance(result, TextResponse) and result.content.startswith(prefill):
            result = msgspec.structs.replace(result, content=result.content[len(prefill) :])
        return msgspec.structs.replace(response, raw_text=rest, result=result)

    def _finalize(self, response: LLMResponse, request: InferenceRequest) -> LLMResponse:
        """In prompt mode and raw generation, read tool calls out of the reply text with the
        rescue parser -- in raw generation from the partial reply it continued and the new
        text together, so a call cut by a preemption is read whole."""
        if (self._mode != "prompt" and self._generation != "raw") or not request.tools:
            return response
        if not isinstance(response.result, TextResponse):
            return response
        # Imported here: the guardrails package depends on the clients, not the other way round.
        from forge_rt.guardrails import rescue_tool_calls

        text = response.result
        before = request.assistant_prefill if self._generation == "raw" else None
        calls = rescue_tool_calls((before or "") + text.content, request.tools)
        if not calls:
            return response
        if text.reasoning is not None:
            calls = [msgspec.structs.replace(calls[0], reasoning=text.reasoning), *calls[1:]]
        return msgspec.structs.replace(response, result=list(calls))

    async def props(self) -> LlamaServerProps:
        """``/props``: per-slot context, slot count, the model file (fetched each time)."""
        wire = await self._get_json("/props", _PropsWire)
        props = LlamaServerProps(
            n_ctx_per_slot=wire.default_generation_settings.n_ctx,
            total_slots=wire.total_slots,
            model_path=wire.model_path,
            model_alias=wire.model_alias,
            build_info=wire.build_info,
        )
        self._props = props
        return props

    async def slots(self) -> list[SlotState]:
        """``/slots``: each slot's context and whether it is busy (needs ``--slots``)."""
        return await self._get_json("/slots", list[SlotState])

    async def metrics(self) -> dict[str, float]:
        """``/metrics`` samples by name (``llamacpp:kv_cache_usage_ratio``,
        ``llamacpp:prompt_tokens_total`` ...; needs ``--metrics``)."""
        with self._deadline_scope():
            raw = await self._fetch("GET", "/metrics")
            return metric_samples(raw, url=self._url("/metrics"))
        raise self._deadline_expired("/metrics", method="GET", delivered=False)

    async def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        """The server's own token ids for ``text``."""
        body = {"content": text, "add_special": add_special}
        return (await self._call_json("POST", "/tokenize", _TokenizeWire, body=body)).tokens

    async def prompt_tokens(self, request: InferenceRequest) -> int | None:
        """Exactly the prompt tokens a chat request would cost: the body this client would
        send, rendered by the server's own chat template (``/apply-template``: tools, and the
        prompt-mode tool prompt, included) and tokenized by ``/tokenize`` -- the same count
        the server reports as ``prompt_tokens`` for that request."""
        rendered = await self._render(await self._chat_body(request, stream=False))
        return len(await self.tokenize(rendered))

    async def health(self) -> str:
        """``/health``'s status (``"ok"``); a loading server answers 503 -> ``BackendError``."""
        return (await self._get_json("/health", _HealthWire)).status

    async def context_length(self) -> int | None:
        """The context one call can use: ``/props`` per-slot ``n_ctx`` (cached after the first
        successful read)."""
        if self._props is None:
            await self.props()
        assert self._props is not None
        return self._props.n_ctx_per_slot
