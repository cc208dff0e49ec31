"""``OpenAICompatClient``: any server that speaks ``/v1/chat/completions``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import msgspec

from forge_rt.clients._http import HTTPClient, StreamDecoder
from forge_rt.core import (
    ClientCapabilities,
    InferenceRequest,
    JsonSchemaConstraint,
    LLMResponse,
    Timings,
    ToolChoice,
)
from forge_rt.errors import BackendError, FaultKind
from forge_rt.wire import (
    OpenAIDialect,
    OpenAIStreamDecoder,
    openai_request_to_wire,
    openai_response_from_wire,
)

__all__ = ["OpenAICompatClient"]


class _ModelMeta(msgspec.Struct, kw_only=True):
    n_ctx: int | None = None


class _ModelEntry(msgspec.Struct, kw_only=True):
    id: str
    max_model_len: int | None = None
    context_length: int | None = None
    meta: _ModelMeta | None = None

    def context(self) -> int | None:
        if self.max_model_len is not None:
            return self.max_model_len
        if self.context_length is not None:
            return self.context_length
        return self.meta.n_ctx if self.meta is not None else None


class _ModelList(msgspec.Struct, kw_only=True):
    data: list[_ModelEntry]


class OpenAICompatClient(HTTPClient):
    """A generic OpenAI-compatible chat-completions backend.

    ``dialect`` picks which non-OpenAI fields may be sent (see
    :data:`forge_rt.wire.OpenAIDialect`); the default ``"openai"`` sends only what the OpenAI
    API defines and refuses anything else with a ``ValueError``. ``api_key`` is sent as a bearer
    token and never logged. ``json_schema=False`` declares a server that ignores
    ``response_format`` (a schema constraint is then refused rather than silently unenforced).
    ``reasoning_replay`` (default: on unless the dialect is ``"openai"``) folds earlier
    reasoning into assistant messages as ``reasoning_content``.
    """

    _inference_path = "/v1/chat/completions"
    _dialect: OpenAIDialect = "openai"
    _default_tool_choice: ToolChoice | None = None

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        dialect: OpenAIDialect | None = None,
        json_schema: bool = True,
        reasoning_replay: bool | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        deadline: float | None = None,
        recommended_sampling: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        all_headers = dict(headers or {})
        if api_key is not None:
            all_headers["authorization"] = f"Bearer {api_key}"
        if dialect is not None:
            self._dialect = dialect
        self._json_schema = json_schema
        self._reasoning_replay = (
            reasoning_replay if reasoning_replay is not None else self._dialect != "openai"
        )
        self._context: int | None = None
        self._context_known = False
        super().__init__(
            base_url,
            model=model,
            headers=all_headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            deadline=deadline,
            recommended_sampling=recommended_sampling,
            transport=transport,
        )

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(
            json_schema=self._json_schema, grammar=self._dialect == "llamacpp"
        )

    def _check_constraint(self, request: InferenceRequest) -> None:
        if isinstance(request.constraint, JsonSchemaConstraint) and not self._json_schema:
            raise ValueError(
                f"{type(self).__name__} was created with json_schema=False: this server does "
                "not enforce response_format; check client.capabilities.json_schema first"
            )

    async def _wire_model(self) -> str | None:
        """The ``model`` field to send."""
        return self._model

    async def _body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        self._check_constraint(request)
        return openai_request_to_wire(
            await self._sampled(request),
            model=await self._wire_model(),
            stream=stream,
            dialect=self._dialect,
            reasoning_replay=self._reasoning_replay,
            default_tool_choice=self._default_tool_choice,
        )

    def _parse(self, body: bytes, request: InferenceRequest, timings: Timings) -> LLMResponse:
        response = openai_response_from_wire(
            body, timings=timings, url=self._url(self._inference_path)
        )
        return self._finalize(response, request)

    def _decoder(self, request: InferenceRequest) -> StreamDecoder:
        return OpenAIStreamDecoder(url=self._url(self._inference_path))

    async def models(self) -> list[str]:
        """The model ids ``/v1/models`` lists."""
        listing = await self._get_json("/v1/models", _ModelList)
        return [m.id for m in listing.data]

    async def _model_entries(self) -> list[_ModelEntry] | None:
        """``/v1/models`` entries, or None when the server has no such endpoint (404)."""
        try:
            listing = await self._get_json("/v1/models", _ModelList)
        except BackendError as exc:
            if exc.kind is FaultKind.CLIENT_ERROR and exc.status == 404:
                return None
            raise
        return listing.data

    async def context_length(self) -> int | None:
        """What ``/v1/models`` reports for this model (``max_model_len``, ``context_length``
        or llama.cpp's ``meta.n_ctx``), else None -- never a guess."""
        if not self._context_known:
            entries = await self._model_entries()
            self._context = None
            if entries:
                chosen = next((e for e in entries if e.id == self._model), None)
                if chosen is None and len(entries) == 1:
                    chosen = entries[0]
                self._context = chosen.context() if chosen is not None else None
            self._context_known = True
        return self._context
