"""``AnthropicClient``: the Anthropic Messages API (``/v1/messages``) over httpx.

The API key comes from the caller (no environment lookup) and travels only in the
``x-api-key`` header; nothing here logs headers. The API reports no context window, so
:meth:`context_length` is None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from forge_rt.clients._http import HTTPClient, StreamDecoder
from forge_rt.core import ClientCapabilities, InferenceRequest, LLMResponse, Timings
from forge_rt.wire import (
    AnthropicStreamDecoder,
    anthropic_request_to_wire,
    anthropic_response_from_wire,
)

__all__ = ["AnthropicClient"]


class AnthropicClient(HTTPClient):
    """Anthropic (or any server with the Messages API, e.g. llama-server's ``/v1/messages``).

    ``max_tokens`` is the reply cap sent when a request sets none (the API requires one).
    """

    _inference_path = "/v1/messages"
    _capabilities = ClientCapabilities()

    def __init__(
        self,
        base_url: str = "https://api.anthropic.com",
        *,
        api_key: str,
        model: str,
        max_tokens: int = 4096,
        anthropic_version: str = "2023-06-01",
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        deadline: float | None = None,
        recommended_sampling: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens!r}")
        self._max_tokens = max_tokens
        super().__init__(
            base_url,
            model=model,
            headers={
                **(headers or {}),
                "x-api-key": api_key,
                "anthropic-version": anthropic_version,
            },
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            deadline=deadline,
            recommended_sampling=recommended_sampling,
            transport=transport,
        )

    async def _body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        assert self._model is not None  # required by __init__
        return anthropic_request_to_wire(
            await self._sampled(request),
            model=self._model,
            stream=stream,
            default_max_tokens=self._max_tokens,
        )

    def _parse(self, body: bytes, request: InferenceRequest, timings: Timings) -> LLMResponse:
        return anthropic_response_from_wire(
            body, timings=timings, url=self._url(self._inference_path)
        )

    def _decoder(self, request: InferenceRequest) -> StreamDecoder:
        return AnthropicStreamDecoder(url=self._url(self._inference_path))
