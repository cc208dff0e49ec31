"""``OllamaClient``: Ollama's native ``/api/chat``.

``num_ctx`` is fixed per client: Ollama reloads the model whenever a request's ``num_ctx``
differs from the loaded one, so a value that changed between calls would cost a reload each
time. Leave it unset to keep Ollama's own setting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx
import msgspec

from forge_rt.clients._http import HTTPClient, StreamDecoder
from forge_rt.core import ClientCapabilities, InferenceRequest, LLMResponse, Timings
from forge_rt.wire import (
    OllamaStreamDecoder,
    ollama_request_to_wire,
    ollama_response_from_wire,
)

__all__ = ["OllamaClient"]

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


class _ShowWire(msgspec.Struct, kw_only=True):
    parameters: str | None = None


class OllamaClient(HTTPClient):
    """An Ollama server. ``think`` is sent as Ollama's ``think`` flag when given."""

    _framing = "ndjson"
    _inference_path = "/api/chat"
    _capabilities = ClientCapabilities(json_schema=True)

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:11434",
        *,
        model: str,
        num_ctx: int | None = None,
        think: bool | None = None,
        keep_alive: str | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        deadline: float | None = None,
        recommended_sampling: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if num_ctx is not None and num_ctx <= 0:
            raise ValueError(f"num_ctx must be a positive token count, got {num_ctx!r}")
        self._num_ctx = num_ctx
        self._think = think
        self._keep_alive = keep_alive
        super().__init__(
            base_url,
            model=model,
            headers=headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            deadline=deadline,
            recommended_sampling=recommended_sampling,
            transport=transport,
        )

    @property
    def num_ctx(self) -> int | None:
        """The context size every request asks for (None: Ollama's own setting)."""
        return self._num_ctx

    async def _body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        assert self._model is not None  # required by __init__
        return ollama_request_to_wire(
            await self._sampled(request),
            model=self._model,
            stream=stream,
            num_ctx=self._num_ctx,
            think=self._think,
            keep_alive=self._keep_alive,
        )

    def _parse(self, body: bytes, request: InferenceRequest, timings: Timings) -> LLMResponse:
        return ollama_response_from_wire(body, timings=timings, url=self._url(self._inference_path))

    def _decoder(self, request: InferenceRequest) -> StreamDecoder:
        return OllamaStreamDecoder(url=self._url(self._inference_path))

    async def context_length(self) -> int | None:
        """The ``num_ctx`` this client sends; else the model's configured ``num_ctx`` from
        ``/api/show``; else None.

        The model's trained maximum (``model_info``) is deliberately not reported: Ollama runs
        with its own, usually smaller, window and silently truncates beyond it, so reporting the
        trained maximum would be a guess that overflows.
        """
        if self._num_ctx is not None:
            return self._num_ctx
        show = await self._call_json("POST", "/api/show", _ShowWire, body={"model": self._model})
        match = _NUM_CTX.search(show.parameters or "")
        return int(match.group(1)) if match else None
