"""The HTTP plumbing every adapter shares: one pooled ``httpx.AsyncClient``, timeouts, the
whole-call deadline, the single automatic retry, and assembling a streamed reply.

Adapters subclass :class:`HTTPClient` and supply the wire format (request body, response
parser, stream decoder); everything about connections and faults lives here, so every adapter
behaves the same under the same fault.

Who emits :class:`~forge_rt.core.ResetChunk`: not the clients. A client either finishes a
stream with a :class:`~forge_rt.core.FinalChunk` or raises; its one automatic retry happens
before anything was delivered, so there is nothing to reset. The consumer that abandons an
attempt after output was delivered (the runtime's SlotWorker on preemption, the guardrails'
retry after a rejected reply) emits the ResetChunk to its own listeners.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from types import TracebackType
from typing import Any, ClassVar, Literal, Protocol, Self, TypeVar

import httpx
import msgspec
import trio

from actors import quiet_logger
from forge_rt.clients._cancel_safe import cancel_safe_transport
from forge_rt.clients._faults import (
    AUTO_RETRY_KINDS,
    deadline_error,
    status_error,
    transport_error,
)
from forge_rt.clients._sampling import has_sampling_defaults, sampling_defaults
from forge_rt.core import (
    BackendChunk,
    ClientCapabilities,
    FinalChunk,
    InferenceRequest,
    LLMResponse,
    PromptProgressChunk,
    Sampling,
    StreamChunk,
    Timings,
)
from forge_rt.errors import BackendError, StreamError
from forge_rt.wire import SSEDecoder, in_band_error, malformed_error

__all__ = ["HTTPClient", "StreamDecoder"]

log = quiet_logger(__name__)

T = TypeVar("T")


class StreamDecoder(Protocol):
    """What an adapter's stream decoder offers the shared streaming loop."""

    @property
    def complete(self) -> bool: ...

    @property
    def partial_text(self) -> str: ...

    def feed(self, data: str, *, delivered: bool = False) -> Sequence[BackendChunk]: ...

    def finish(self, timings: Timings) -> tuple[list[StreamChunk], LLMResponse]: ...


class _Progress:
    """What the caller has seen of one streamed call."""

    __slots__ = ("delivered", "first_token_s")

    def __init__(self) -> None:
        self.delivered = False
        self.first_token_s: float | None = None


async def _finish_abandoned(lines: AsyncIterator[str]) -> None:
    """Run an httpx body iterator to its end under an already-cancelled scope.

    httpx reads a body through a chain of nested async generators. A consumer that stops early
    leaves that chain suspended at its ``yield`` s, and closing the outermost one does not close
    the inner ones: each would be garbage-collected unfinished (trio warns, and the connection is
    released late). Stepping the chain once more inside a cancelled scope makes the innermost
    read raise ``Cancelled`` at its checkpoint, which unwinds every generator in the chain (and
    makes httpcore close the connection, so the server stops generating). Our own scope absorbs
    that ``Cancelled``; an iterator that already ended just reports ``StopAsyncIteration``.
    """
    with trio.CancelScope() as scope:
        scope.cancel()
        while True:
            try:
                await lines.__anext__()
            except StopAsyncIteration:
                return


class HTTPClient:
    """Base of every adapter: pooling, timeouts, deadline, retry-once, streaming assembly.

    ``connect_timeout`` bounds connecting; ``read_timeout`` bounds each wait for data (the
    response to start, or the next part of a stream), so a hung server is caught; ``deadline``
    bounds a whole call including every part of a stream and the automatic retry, so a server
    that drips bytes just fast enough is caught too. Timeouts and the deadline are in seconds;
    ``deadline=None`` leaves the bound to the caller's own cancel scopes.
    """

    _framing: ClassVar[Literal["sse", "ndjson"]] = "sse"
    _inference_path: str  # an adapter may choose it per instance (llama-server's raw mode)
    _capabilities: ClassVar[ClientCapabilities]

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        deadline: float | None = None,
        recommended_sampling: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be > 0 seconds or None, got {deadline!r}")
        # Credentials in the URL (http://user:pass@host) become basic auth and leave the URL:
        # the URL is in every error message and log line, the password must be in none.
        url = httpx.URL(base_url)
        auth = httpx.BasicAuth(url.username, url.password) if url.userinfo else None
        plain = str(url.copy_with(userinfo=b"")) if auth is not None else base_url
        self._base_url = plain.rstrip("/")
        self._model = model
        self._deadline_s = deadline
        self._recommended = recommended_sampling
        self._defaults: Sampling | None = None
        self._http = httpx.AsyncClient(
            base_url=self._base_url,
            auth=auth,
            headers=dict(headers or {}),
            timeout=httpx.Timeout(
                connect=connect_timeout, read=read_timeout, write=read_timeout, pool=connect_timeout
            ),
            # Cancel-safe whatever transport was given: a preempted or timed-out call must not
            # leave its request body's generator behind (see clients._cancel_safe).
            transport=cancel_safe_transport(transport),
        )
        if model is not None:
            self._check_sampling_model(model)

    # -- identity --------------------------------------------------------------------------

    @property
    def model(self) -> str | None:
        """The model this client asks for (or discovered), if known."""
        return self._model

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def capabilities(self) -> ClientCapabilities:
        return self._capabilities

    def _check_sampling_model(self, model: str) -> None:
        """Fail early for an unknown model under opt-in defaults; hint at the flag otherwise."""
        if self._recommended:
            self._defaults = sampling_defaults(model)
        elif has_sampling_defaults(model):
            log.info(
                "sampling_defaults_available",
                model=model,
                hint="pass recommended_sampling=True to use the model card's sampling values",
            )

    async def _discover_model(self) -> str:
        """The model identity for sampling defaults when none was given; adapters that can ask
        their server override this."""
        raise ValueError(
            f"{type(self).__name__} needs model=... to use recommended_sampling: this backend "
            "cannot report which model it serves"
        )

    async def _sampling(self, request: InferenceRequest) -> Sampling:
        """The request's sampling, over the model card's defaults when opted in."""
        if not self._recommended:
            return request.sampling
        if self._defaults is None:
            self._defaults = sampling_defaults(self._model or await self._discover_model())
        return request.sampling.merged_over(self._defaults)

    async def _sampled(self, request: InferenceRequest) -> InferenceRequest:
        """``request`` with :meth:`_sampling` in place: what an adapter's ``_body`` sends."""
        return msgspec.structs.replace(request, sampling=await self._sampling(request))

    # -- adapter hooks ---------------------------------------------------------------------

    async def _body(self, request: InferenceRequest, *, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, body: bytes, request: InferenceRequest, timings: Timings) -> LLMResponse:
        raise NotImplementedError

    def _decoder(self, request: InferenceRequest) -> StreamDecoder:
        raise NotImplementedError

    def _stream_decoder(self, request: InferenceRequest, body: dict[str, Any]) -> StreamDecoder:
        """The decoder for the stream that ``body`` opens (an adapter that needs to know what
        it sent overrides this; the rest supply :meth:`_decoder`)."""
        return self._decoder(request)

    def _finalize(self, response: LLMResponse, request: InferenceRequest) -> LLMResponse:
        """Last look at an assembled streamed response (prompt-mode tool parsing)."""
        return response

    # -- HTTP ------------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self._base_url}{path}"

    def _deadline_scope(self) -> trio.CancelScope:
        return (
            trio.CancelScope() if self._deadline_s is None else trio.move_on_after(self._deadline_s)
        )

    async def _send_once_retrying(self, request: httpx.Request) -> httpx.Response:
        """Send, retrying once when the connection reset before the response started."""
        url = str(request.url)
        try:
            return await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            error = transport_error(
                exc, method=request.method, url=url, phase="request", delivered=False
            )
            if error.kind not in AUTO_RETRY_KINDS:
                raise error from exc
            log.info("backend_retry", url=url, kind=error.kind.value, cause=type(exc).__name__)
        try:
            return await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise transport_error(
                exc, method=request.method, url=url, phase="request", delivered=False
            ) from exc

    @asynccontextmanager
    async def _open(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """A response whose status is known good; closed on exit, whatever happens."""
        request = self._http.build_request(
            method,
            path,
            content=body,
            headers={"content-type": "application/json", **(headers or {})}
            if body is not None
            else headers,
        )
        response = await self._send_once_retrying(request)
        try:
            if response.status_code >= 400:
                url = str(request.url)
                try:
                    text = (await response.aread()).decode(errors="replace")
                except httpx.TransportError as exc:
                    raise status_error(
                        response.status_code,
                        response.reason_phrase,
                        f"(the error body could not be read: {exc})",
                        method=method,
                        url=url,
                    ) from exc
                raise status_error(
                    response.status_code,
                    response.reason_phrase,
                    text,
                    method=method,
                    url=url,
                    retry_after=response.headers.get("retry-after"),
                )
            yield response
        finally:
            await response.aclose()

    async def _fetch(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes:
        """A whole response body (no deadline of its own: callers hold the scope)."""
        async with self._open(method, path, body=body, headers=headers) as response:
            try:
                return await response.aread()
            except httpx.TransportError as exc:
                raise transport_error(
                    exc, method=method, url=str(response.url), phase="body", delivered=False
                ) from exc

    async def _get_json(self, path: str, type_: type[T]) -> T:
        """GET ``path`` under the call deadline and decode it as ``type_``."""
        return await self._call_json("GET", path, type_)

    async def _call_json(self, method: str, path: str, type_: type[T], *, body: Any = None) -> T:
        """``method path`` (with an optional JSON body) under the call deadline, decoded as
        ``type_``; a body of another shape is ``BackendError(MALFORMED_RESPONSE)``."""
        content = None if body is None else msgspec.json.encode(body)
        with self._deadline_scope():
            raw = await self._fetch(method, path, body=content)
            try:
                return msgspec.json.decode(raw, type=type_)
            except msgspec.DecodeError as exc:  # includes ValidationError
                raise malformed_error(str(exc), url=self._url(path), body=raw) from exc
        raise self._deadline_expired(path, method=method, delivered=False)

    def _deadline_expired(self, path: str, *, method: str, delivered: bool) -> BackendError:
        assert self._deadline_s is not None  # only a scope with a deadline can expire
        return deadline_error(
            self._deadline_s, method=method, url=self._url(path), delivered=delivered
        )

    # -- LLMClient -------------------------------------------------------------------------

    async def send(self, request: InferenceRequest) -> LLMResponse:
        """One inference, the whole reply at once."""
        start = trio.current_time()
        with self._deadline_scope():
            body = msgspec.json.encode(await self._body(request, stream=False))
            raw = await self._fetch(
                "POST", self._inference_path, body=body, headers=request.headers
            )
            timings = Timings(total_s=trio.current_time() - start)
            response = self._parse(raw, request, timings)
            log.debug(
                "backend_reply",
                url=self._url(self._inference_path),
                total_s=timings.total_s,
                finish_reason=response.finish_reason,
                tool_calls=len(response.tool_calls),
            )
            return response
        raise self._deadline_expired(self._inference_path, method="POST", delivered=False)

    @asynccontextmanager
    async def stream(self, request: InferenceRequest) -> AsyncIterator[AsyncIterator[BackendChunk]]:
        """One inference, streamed: deltas, then a :class:`FinalChunk` with the whole reply.

        Leaving the block early closes the HTTP response (the server stops generating).
        """
        start = trio.current_time()
        progress = _Progress()
        with self._deadline_scope() as scope:
            body = await self._body(request, stream=True)
            decoder = self._stream_decoder(request, body)
            async with self._open(
                "POST",
                self._inference_path,
                body=msgspec.json.encode(body),
                headers=request.headers,
            ) as response:
                chunks = self._chunks(response, request, start, progress, decoder)
                async with aclosing(chunks):
                    yield chunks
        if scope.cancelled_caught:
            raise self._deadline_expired(
                self._inference_path, method="POST", delivered=progress.delivered
            )

    async def _chunks(
        self,
        response: httpx.Response,
        request: InferenceRequest,
        start: float,
        progress: _Progress,
        decoder: StreamDecoder,
    ) -> AsyncGenerator[BackendChunk, None]:
        url = str(response.url)

        def delivered(chunk: BackendChunk) -> BackendChunk:
            # A report on the prompt is no part of the reply: a call that saw only those can
            # still be retried as if nothing had arrived.
            if not progress.delivered and not isinstance(chunk, PromptProgressChunk):
                progress.delivered = True
                progress.first_token_s = trio.current_time() - start
            return chunk

        sse = SSEDecoder() if self._framing == "sse" else None
        lines = response.aiter_lines()
        try:
            async for line in lines:
                if sse is None:
                    payloads = [line] if line.strip() else []
                else:
                    event = sse.feed_line(line)
                    payloads = [] if event is None else [self._event_data(event, url, progress)]
                for payload in payloads:
                    for chunk in decoder.feed(payload, delivered=progress.delivered):
                        yield delivered(chunk)
        except httpx.TransportError as exc:
            raise transport_error(
                exc, method="POST", url=url, phase="body", delivered=progress.delivered
            ) from exc
        finally:
            await _finish_abandoned(lines)
        if sse is not None and (event := sse.close()) is not None:
            for chunk in decoder.feed(
                self._event_data(event, url, progress), delivered=progress.delivered
            ):
                yield delivered(chunk)
        if not decoder.complete:
            raise StreamError(
                f"{url}: the stream ended before its final chunk (no finish reason, no end "
                "marker); the server stopped mid-reply",
                partial=decoder.partial_text,
            )
        timings = Timings(total_s=trio.current_time() - start, first_token_s=progress.first_token_s)
        tail, assembled = decoder.finish(timings)
        for chunk in tail:
            yield delivered(chunk)
        yield FinalChunk(self._finalize(assembled, request))

    @staticmethod
    def _event_data(event: Any, url: str, progress: _Progress) -> str:
        if event.event == "error":
            raise in_band_error(
                "the backend reported an error inside the stream",
                url=url,
                body=event.data,
                retry_safe=not progress.delivered,
            )
        data: str = event.data
        return data

    async def context_length(self) -> int | None:
        """The backend's real context window for one call, or None when it does not say."""
        return None

    async def prompt_tokens(self, request: InferenceRequest) -> int | None:
        """The prompt tokens the backend would process for ``request``, counted by the
        backend's own template and tokenizer; None where its API offers no way to count."""
        return None

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
