"""``VLLMClient``: vLLM's OpenAI-compatible server.

vLLM answers 404 when the request's ``model`` is not its served name, so the client asks
``/v1/models`` once, before its first call: to learn the name when none was given, to fail with
a clear message when the given one is not served; the same entry's ``max_model_len`` is the context
length. Tools go out with ``tool_choice="auto"`` unless the request says otherwise (vLLM
parses calls server-side only with ``--enable-auto-tool-choice``). ``request.priority`` is sent
unchanged as vLLM's ``priority`` field: vLLM serves *lower* values first, and only when started
with ``--scheduling-policy priority``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from forge_rt.clients._openai import OpenAICompatClient, _ModelEntry, _ModelList
from forge_rt.clients._prometheus import metric_samples
from forge_rt.core import ClientCapabilities, InferenceRequest
from forge_rt.errors import BackendError, FaultKind

__all__ = ["VLLMClient"]


class VLLMClient(OpenAICompatClient):
    """A vLLM server; ``model`` defaults to the one it serves."""

    _dialect = "vllm"
    _default_tool_choice = "auto"

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        reasoning_replay: bool = True,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        deadline: float | None = None,
        recommended_sampling: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._entry: _ModelEntry | None = None
        super().__init__(
            base_url,
            model=model,
            api_key=api_key,
            dialect="vllm",
            json_schema=True,
            reasoning_replay=reasoning_replay,
            headers=headers,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            deadline=deadline,
            recommended_sampling=recommended_sampling,
            transport=transport,
        )

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(json_schema=True, priority_field=True)

    async def served_model(self) -> _ModelEntry:
        """The ``/v1/models`` entry for our model (the only one served, when none was given)."""
        if self._entry is not None:
            return self._entry
        listing = await self._get_json("/v1/models", _ModelList)
        ids = [m.id for m in listing.data]
        if self._model is None:
            if len(listing.data) != 1:
                raise BackendError(
                    f"{self._url('/v1/models')}: vLLM serves {ids}; pass model=... to choose",
                    kind=FaultKind.CLIENT_ERROR,
                    retry_safe=False,
                    url=self._url("/v1/models"),
                )
            self._entry = listing.data[0]
            self._model = self._entry.id
            return self._entry
        entry = next((m for m in listing.data if m.id == self._model), None)
        if entry is None:
            raise BackendError(
                f"{self._url('/v1/models')}: vLLM does not serve {self._model!r} (it serves "
                f"{ids}); requests for it would fail with 404",
                kind=FaultKind.CLIENT_ERROR,
                retry_safe=False,
                url=self._url("/v1/models"),
            )
        self._entry = entry
        return entry

    async def _discover_model(self) -> str:
        return (await self.served_model()).id

    async def _wire_model(self) -> str | None:
        """The served name, checked against ``/v1/models`` once (vLLM 404s on any other)."""
        return (await self.served_model()).id

    async def _body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        body = await super()._body(request, stream=stream)
        if request.priority is not None:
            body["priority"] = request.priority
        return body

    async def metrics(self) -> dict[str, float]:
        """``/metrics`` samples by name: ``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc``
        in older releases), ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` ...
        (vLLM labels them by model; a name repeated with other labels keeps its last value)."""
        with self._deadline_scope():
            raw = await self._fetch("GET", "/metrics")
            return metric_samples(raw, url=self._url("/metrics"))
        raise self._deadline_expired("/metrics", method="GET", delivered=False)

    async def context_length(self) -> int | None:
        """``max_model_len`` of the served model, or None if this vLLM does not report it."""
        return (await self.served_model()).max_model_len
