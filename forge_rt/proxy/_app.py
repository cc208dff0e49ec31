"""The proxy as an ASGI application: routes, auth, bad-input handling, and the two chat APIs.

``POST /v1/chat/completions`` (also ``/chat/completions``) speaks OpenAI, ``POST /v1/messages``
(and ``/v1/messages/count_tokens``) speaks Anthropic; both go through the same
:class:`~forge_rt.proxy._engine.InferenceEngine`. ``GET /v1/models`` lists what the backend
really serves, ``GET /health`` (liveness) and ``GET /ready`` (the backend answers) answer
without auth, ``GET /metrics`` is Prometheus text and ``GET /forge/usage`` the BudgetActor's view
of context use.

Every client mistake is a 4xx in the API's own error shape: a body that is not JSON, a field of
the wrong type, a field neither API defines, a body over the size limit, too many messages or
tools, a missing or wrong API key, a Host, Origin or content type the local-server rules refuse
(``proxy/_origin.py``). A 5xx means the backend or the model failed, never the client -- or a
bug, which is still answered in the API's shape and logged with its traceback.
"""

from __future__ import annotations

import collections
import hmac
import itertools
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from actors import quiet_logger
from forge_rt.clients import HTTPClient
from forge_rt.context import TokenEstimator
from forge_rt.core import FinalChunk, InferenceRequest, LLMClient, Message, Role, StreamChunk
from forge_rt.errors import BackendError, ForgeError
from forge_rt.proxy._asgi import (
    ClientGone,
    Receive,
    Responder,
    Scope,
    Send,
    header,
    read_body,
    watch_disconnect,
)
from forge_rt.proxy._config import NAMED_PRIORITIES, KeyProfile, ProxyConfig
from forge_rt.proxy._engine import Outcome, RequestPlan, apply_reasoning_replay
from forge_rt.proxy._errors import (
    ApiShape,
    ErrorKind,
    ProxyHTTPError,
    from_forge_error,
    redact,
)
from forge_rt.proxy._limits import BodyTally, check_counts
from forge_rt.proxy._metrics import CONTENT_TYPE
from forge_rt.proxy._origin import OriginGuard
from forge_rt.proxy._runtime import ProxyRuntime, open_runtime
from forge_rt.proxy._toolcache import ToolCache
from forge_rt.runtime import Unavailable, slot_report
from forge_rt.wire import (
    AnthropicStreamEncoder,
    OpenAIStreamEncoder,
    ToolMemo,
    WireRequest,
    WireTools,
    anthropic_count_tokens_from_wire,
    anthropic_request_from_wire,
    anthropic_response_to_wire,
    openai_request_from_wire,
    openai_response_to_wire,
)

__all__ = ["ProxyApp", "build_app"]

log = quiet_logger(__name__)

_ids = itertools.count(1)
_PRIORITY_LIMIT = 1_000_000  # far past any real use; keeps absurd values out of the scheduler
_ID_PREFIX = os.urandom(4).hex()

_Handler = Callable[["_Call"], Awaitable[None]]
_Reader = Callable[[bytes, ToolMemo], WireRequest]


class _Call:
    """One HTTP request being answered."""

    __slots__ = (
        "body",
        "gone",
        "key",
        "receive",
        "reply",
        "request_id",
        "scope",
        "started",
        "stream",
        "tally",
    )

    def __init__(self, scope: Scope, receive: Receive, reply: Responder) -> None:
        self.scope = scope
        self.receive = receive
        self.reply = reply
        self.body = b""
        self.key: KeyProfile | None = None
        self.request_id = f"req_{_ID_PREFIX}{next(_ids):08x}"
        self.started = trio.current_time()
        self.gone: list[bool] = []
        self.stream = False  # the client asked for a stream (set once its body is read)
        self.tally = BodyTally()  # bounds of its messages and tools, counted as it arrives


class ProxyApp:
    """The ASGI application (HTTP and lifespan).

    Built with a running :class:`ProxyRuntime` (what :func:`serve_proxy` does), or without one,
    in which case the ASGI lifespan starts the runtime from the config (for running under an
    ASGI server you start yourself). ``client`` replaces the configured backend (tests).
    """

    def __init__(
        self,
        config: ProxyConfig,
        *,
        runtime: ProxyRuntime | None = None,
        client: LLMClient | None = None,
    ) -> None:
        self.config = config
        self._runtime = runtime
        self._client = client
        self._keys = config.api_keys
        self._cors = frozenset(config.cors_origins)
        self._guard = OriginGuard(
            bind_host=config.host,
            allowed_hosts=config.allowed_hosts,
            cors_origins=config.cors_origins,
        )
        self._tools: ToolCache[WireTools] = ToolCache()
        self._routes: dict[str, tuple[str, _Handler, ApiShape]] = {
            "/v1/chat/completions": ("POST", self._chat, "openai"),
            "/chat/completions": ("POST", self._chat, "openai"),
            "/v1/messages": ("POST", self._messages, "anthropic"),
            "/v1/messages/count_tokens": ("POST", self._count_tokens, "anthropic"),
            "/v1/models": ("GET", self._models, "openai"),
            "/models": ("GET", self._models, "openai"),
            "/health": ("GET", self._health, "openai"),
            "/ready": ("GET", self._ready, "openai"),
            "/metrics": ("GET", self._metrics, "openai"),
            "/forge/usage": ("GET", self._usage, "openai"),
        }

    @property
    def runtime(self) -> ProxyRuntime:
        if self._runtime is None:
            raise RuntimeError(
                "the proxy runtime is not running: serve the app with serve_proxy(), or under "
                "an ASGI server that runs its lifespan"
            )
        return self._runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:
            # Websockets: the proxy has none; close the handshake.
            await send({"type": "websocket.close", "code": 1003})

    # -- lifespan --------------------------------------------------------------------------

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        if self._runtime is not None:
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        started = False
        try:
            async with open_runtime(self.config, client=self._client) as runtime:
                self._runtime = runtime
                started = True
                await send({"type": "lifespan.startup.complete"})
                await receive()
                self._runtime = None
        except Exception as exc:
            if not started:
                # Reported to the server, which stops with this message: the ASGI way to fail.
                await send(
                    {"type": "lifespan.startup.failed", "message": f"{type(exc).__name__}: {exc}"}
                )
            raise
        await send({"type": "lifespan.shutdown.complete"})

    # -- HTTP ------------------------------------------------------------------------------

    def _extra_headers(self, scope: Scope, request_id: str) -> list[tuple[bytes, bytes]]:
        rid = request_id.encode()
        out = [(b"x-request-id", rid), (b"request-id", rid)]
        origin = header(scope, b"origin")
        if origin is not None and self._cors:
            text = origin.decode("latin-1")
            if "*" in self._cors or text in self._cors:
                out += [(b"access-control-allow-origin", origin), (b"vary", b"origin")]
        return out

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        shape: ApiShape = "anthropic" if path.startswith("/v1/messages") else "openai"
        route = self._routes.get(path)
        # The metrics label: a fixed set of values, whatever paths clients invent.
        endpoint = path if route is not None else "unknown"
        if route is None and path.startswith(("/v1/models/", "/models/")):
            route = ("GET", self._model, shape)
            endpoint = "/v1/models/{id}"
        call = _Call(scope, receive, Responder(send, shape, []))
        call.reply.extra_headers = self._extra_headers(scope, call.request_id)
        runtime = self._runtime
        if runtime is not None:
            runtime.metrics.in_flight.inc()
        try:
            await self._dispatch(call, route)
        except Exception as exc:
            # A bug, not a client's or backend's failure: logged with its traceback, and the
            # client still gets an answer in its API's shape (not an empty 500) if none began.
            log.exception("proxy.internal_error", request=call.request_id, path=path)
            if call.reply.started or call.gone:
                raise
            await call.reply.error(
                ProxyHTTPError(
                    ErrorKind.INTERNAL,
                    f"internal error ({type(_first_leaf(exc)).__name__}); the proxy logged it "
                    f"as request "
                    f"{call.request_id}",
                    code="internal_error",
                )
            )
        finally:
            if runtime is not None:
                runtime.metrics.in_flight.dec()
                if endpoint != "/metrics":  # a scrape is not a request of either API
                    self._count(runtime, call, endpoint)

    def _count(self, runtime: ProxyRuntime, call: _Call, endpoint: str) -> None:
        metrics = runtime.metrics
        status = str(call.reply.status) if call.reply.status else "disconnected"
        # What the client asked for (a stream it left before the first byte is still one).
        stream = "true" if call.stream or call.reply.first_byte_at is not None else "false"
        metrics.requests.labels(call.reply.shape, endpoint, stream, status).inc()
        if endpoint in ("/v1/chat/completions", "/chat/completions", "/v1/messages"):
            metrics.latency.labels(call.reply.shape, stream).observe(
                trio.current_time() - call.started
            )
            if call.reply.first_byte_at is not None:
                metrics.first_token.labels(call.reply.shape).observe(
                    call.reply.first_byte_at - call.started
                )
        if call.gone:
            metrics.disconnects.inc()

    async def _dispatch(self, call: _Call, route: tuple[str, _Handler, ApiShape] | None) -> None:
        scope, reply = call.scope, call.reply
        # Until its body is read, an answer closes the connection: refused early (a bad Host,
        # a missing key, a GET that carried a body), the unread body would be taken for the
        # next request on it, so the server drops the connection -- and a pooling client that
        # was not told so finds it gone when it sends its next request.
        unread = _CLOSE if _declares_body(scope) else None
        if unread is not None:
            reply.extra_headers.append(unread)
        try:
            if route is None:
                raise ProxyHTTPError(
                    ErrorKind.NOT_FOUND,
                    f"no such endpoint: {scope['method']} {scope['path']}; the proxy serves "
                    "/v1/chat/completions, /v1/messages, /v1/models, /health, /ready, /metrics "
                    "and /forge/usage",
                    code="not_found",
                )
            method, handler, _shape = route
            self._guard.check(scope)
            if scope["method"] == "OPTIONS" and self._cors:
                await self._preflight(call)
                return
            if scope["method"] != method:
                raise ProxyHTTPError(
                    ErrorKind.METHOD_NOT_ALLOWED,
                    f"{scope['path']} accepts {method}, not {scope['method']}",
                    code="method_not_allowed",
                )
            if handler not in (self._health, self._ready):
                call.key = self._authenticate(scope)
            if method == "POST":
                call.body = await read_body(
                    scope,
                    call.receive,
                    limit=self.config.max_body_bytes,
                    timeout_s=self.config.body_timeout_s,
                    observe=call.tally.feed,
                )
                if unread is not None:
                    reply.extra_headers.remove(unread)
            await self._with_disconnect(call, handler)
        except ProxyHTTPError as exc:
            if exc.status >= 500:
                log.warning(
                    "proxy.request_failed",
                    request=call.request_id,
                    status=exc.status,
                    code=exc.code,
                    error=exc.message,
                )
            else:
                log.info(
                    "proxy.request_rejected",
                    request=call.request_id,
                    status=exc.status,
                    code=exc.code,
                    error=exc.message,
                )
            if not call.gone:
                await reply.error(exc)
        except ClientGone:
            call.gone.append(True)

    async def _with_disconnect(self, call: _Call, handler: _Handler) -> None:
        """Run ``handler``; if the client disconnects first, cancel it (and its inference)."""
        failed: ProxyHTTPError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                watch_disconnect, call.receive, call.reply, nursery.cancel_scope, call.gone
            )
            try:
                await handler(call)
            except ProxyHTTPError as exc:
                failed = exc  # raised below, outside the nursery, unwrapped
            nursery.cancel_scope.cancel()
        if failed is not None:
            raise failed
        if call.gone:
            log.info("proxy.client_gone", request=call.request_id, path=call.scope["path"])

    async def _preflight(self, call: _Call) -> None:
        requested = header(call.scope, b"access-control-request-headers") or b""
        await call.reply.raw(
            204,
            b"",
            [
                (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
                (b"access-control-allow-headers", requested),
                (b"access-control-max-age", b"600"),
            ],
        )

    # -- auth and priority -----------------------------------------------------------------

    def _authenticate(self, scope: Scope) -> KeyProfile | None:
        if not self._keys:
            return None
        given = header(scope, b"x-api-key")
        if not given:  # absent or empty: an SDK that sends both leaves one blank
            auth = header(scope, b"authorization")
            if auth is not None and auth[:7].lower() == b"bearer ":
                given = auth[7:].strip()
        if not given:
            raise ProxyHTTPError(
                ErrorKind.UNAUTHORIZED,
                "missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
                code="missing_api_key",
            )
        found: KeyProfile | None = None
        for profile in self._keys:
            # Every key is compared, in constant time, whatever matched before.
            if hmac.compare_digest(given, profile.key.get_secret_value().encode()):
                found = profile
        if found is None:
            raise ProxyHTTPError(ErrorKind.UNAUTHORIZED, "invalid API key", code="invalid_api_key")
        return found

    def _priority(self, call: _Call) -> int:
        key = call.key
        base = key.priority if key is not None else self.config.default_priority
        raw = header(call.scope, b"x-forge-priority")
        if raw is None:
            return base
        text = raw.decode("latin-1").strip().lower()
        if text in NAMED_PRIORITIES:
            wanted = NAMED_PRIORITIES[text]
        else:
            try:
                wanted = int(text)
            except ValueError:
                raise ProxyHTTPError(
                    ErrorKind.BAD_REQUEST,
                    f"x-forge-priority {text!r} is not an integer or one of "
                    f"{', '.join(NAMED_PRIORITIES)} (lower runs first)",
                    code="invalid_priority",
                ) from None
        if abs(wanted) > _PRIORITY_LIMIT:
            raise ProxyHTTPError(
                ErrorKind.BAD_REQUEST,
                f"x-forge-priority {wanted} is outside -{_PRIORITY_LIMIT}..{_PRIORITY_LIMIT}",
                code="invalid_priority",
            )
        if key is not None and wanted < key.most_urgent:
            raise ProxyHTTPError(
                ErrorKind.FORBIDDEN,
                f"API key {key.name!r} may not ask for priority {wanted}; the most urgent it "
                f"may ask for is {key.most_urgent} (lower runs first)",
                code="priority_not_allowed",
            )
        ceiling = self.config.anonymous_max_priority
        if key is None and wanted < ceiling:
            raise ProxyHTTPError(
                ErrorKind.FORBIDDEN,
                f"a request without an API key may not ask for priority {wanted}; the most "
                f"urgent it may ask for is {ceiling} (lower runs first). Give urgent clients a "
                "key with that priority, or raise --anonymous-max-priority",
                code="priority_not_allowed",
            )
        return wanted

    # -- chat endpoints --------------------------------------------------------------------

    def _read(self, call: _Call, read: _Reader) -> WireRequest:
        """The request in forge_rt's terms: the body decoded once, by the wire codecs, against
        the API's strict schema, its tools from the :class:`ToolCache` when already seen.

        Every way the body can be wrong is a 400 in the API's shape. Anthropic server tools,
        which no local model can run, are left out by the codec; the client is told which in
        ``x-forge-dropped-tools``, so clients that always offer them (Claude Code's web
        search) keep working against a local model. Tool-schema keywords forge_rt does not
        enforce are accepted too, and named in ``x-forge-ignored-schema-keywords``: the
        backend gets the schema as written, only the argument check is less strict.
        """
        config = self.config
        check_counts(
            call.body, call.tally, max_messages=config.max_messages, max_tools=config.max_tools
        )
        try:
            wire = read(call.body, self._tools)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise _schema_error(exc) from exc
        except RecursionError as exc:
            raise ProxyHTTPError(
                ErrorKind.BAD_REQUEST,
                "the request's JSON is nested too deeply to read",
                code="invalid_request",
            ) from exc
        except ValueError as exc:
            # A message or call the data model refuses to hold: the client's data, so a 400.
            raise ProxyHTTPError(
                ErrorKind.BAD_REQUEST, f"invalid request: {exc}", code="invalid_request"
            ) from exc
        call.stream = wire.stream
        if not wire.request.messages:
            raise _bad("messages must hold at least one message", "$.messages")
        _check_consistent(wire.request)
        if wire.dropped_tools:
            log.info(
                "proxy.server_tools_dropped", request=call.request_id, tools=wire.dropped_tools
            )
            call.reply.extra_headers.append(
                (b"x-forge-dropped-tools", ",".join(wire.dropped_tools).encode())
            )
        if wire.ignored_schema_keywords:
            call.reply.extra_headers.append(
                (
                    b"x-forge-ignored-schema-keywords",
                    ",".join(wire.ignored_schema_keywords).encode(),
                )
            )
        return wire

    def _plan(self, call: _Call, wire: WireRequest) -> RequestPlan:
        messages = apply_reasoning_replay(wire.request.messages, self.config.reasoning_replay)
        request = msgspec.structs.replace(wire.request, messages=messages)
        return RequestPlan(
            request=request,
            stream=wire.stream,
            priority=self._priority(call),
            client=call.key.name if call.key is not None else "anonymous",
            request_id=call.request_id,
            parallel_tool_calls=wire.parallel_tool_calls is not False,
        )

    def _model_name(self, wire: WireRequest) -> str:
        return self.config.served_model or wire.model or self.runtime.client.model or "forge-rt"

    async def _chat(self, call: _Call) -> None:
        wire = self._read(call, openai_request_from_wire)
        plan = self._plan(call, wire)
        model = self._model_name(wire)
        created = int(time.time())
        response_id = f"chatcmpl-{call.request_id[4:]}"
        if wire.stream:
            encoder = OpenAIStreamEncoder(
                model=model,
                response_id=response_id,
                created=created,
                include_usage=wire.include_usage,
            )
            await self._stream(
                call,
                plan,
                encoder.encode,
                lambda outcome: encoder.encode(FinalChunk(outcome.response)) + encoder.done(),
            )
            return
        outcome = await self.runtime.engine.run(plan, None)
        answer = openai_response_to_wire(
            outcome.response,
            model=model,
            response_id=response_id,
            created=created,
            text_with_calls=outcome.text_with_calls,
        )
        await call.reply.json(200, answer, outcome.work.headers())

    async def _messages(self, call: _Call) -> None:
        wire = self._read(call, anthropic_request_from_wire)
        plan = self._plan(call, wire)
        model = self._model_name(wire)
        message_id = f"msg_{call.request_id[4:]}"
        if wire.stream:
            encoder = AnthropicStreamEncoder(model=model, message_id=message_id)
            await self._stream(
                call,
                plan,
                encoder.encode,
                lambda outcome: encoder.encode(FinalChunk(outcome.response)),
            )
            return
        outcome = await self.runtime.engine.run(plan, None)
        answer = anthropic_response_to_wire(
            outcome.response,
            model=model,
            message_id=message_id,
            text_with_calls=outcome.text_with_calls,
        )
        await call.reply.json(200, answer, outcome.work.headers())

    async def _stream(
        self,
        call: _Call,
        plan: RequestPlan,
        encode: Callable[[StreamChunk], bytes],
        finish: Callable[[Outcome], bytes],
    ) -> None:
        """Run ``plan`` streaming: the first frame goes out at once, the rest through a writer.

        The writer sends whatever has queued up since its last write in one piece, so a burst
        of tokens (a fast backend, a validated call released at once) costs one socket write,
        while a lone token still goes out at once.
        """
        reply = call.reply
        frames, queued = trio.open_memory_channel[bytes](math.inf)

        async def writer() -> None:
            async with queued:
                async for frame in queued:
                    batch = [frame]
                    while True:
                        try:
                            batch.append(queued.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    await reply.stream(b"".join(batch))

        first = True

        async def sink(chunk: StreamChunk) -> None:
            nonlocal first
            if first:
                # The first frame is written at once (with the headers): time to first token
                # is what a streaming client waits on. Later frames queue for the writer.
                first = False
                await reply.stream(encode(chunk))
                return
            frames.send_nowait(encode(chunk))

        failed: ProxyHTTPError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            with frames:
                try:
                    outcome = await self.runtime.engine.run(plan, sink)
                except ProxyHTTPError as exc:
                    failed = exc  # raised below, once the writer has sent what came before
                else:
                    frames.send_nowait(finish(outcome))
        if failed is not None:
            raise failed
        await reply.end_stream()

    async def _count_tokens(self, call: _Call) -> None:
        """What the backend will see -- the request with the tools the proxy adds (``respond``)
        and without those its policy withholds -- counted by the backend's own template and
        tokenizer where it can (llama-server: ``x-forge-token-count: exact``), else estimated
        (``estimated``)."""
        wire = self._read(call, anthropic_count_tokens_from_wire)
        request = self.runtime.engine.prompt_request(wire.request, request_id="count_tokens")
        client = self.runtime.client
        exact: int | None = None
        if isinstance(client, HTTPClient):
            try:
                exact = await client.prompt_tokens(request)
            except ForgeError as exc:
                raise from_forge_error(exc) from exc
        if exact is not None:
            count, how = exact, b"exact"
        else:
            count, how = _estimate(self.runtime.estimator, request), b"estimated"
        await call.reply.json(200, {"input_tokens": count}, [(b"x-forge-token-count", how)])

    # -- information endpoints -------------------------------------------------------------

    def _anthropic_client(self, call: _Call) -> bool:
        return header(call.scope, b"anthropic-version") is not None

    async def _models(self, call: _Call) -> None:
        ids = await self._backend_models()
        if self._anthropic_client(call):
            data = [_anthropic_model(m) for m in ids]
            await call.reply.json(
                200,
                {
                    "data": data,
                    "has_more": False,
                    "first_id": ids[0] if ids else None,
                    "last_id": ids[-1] if ids else None,
                },
            )
            return
        await call.reply.json(200, {"object": "list", "data": [_openai_model(m) for m in ids]})

    async def _model(self, call: _Call) -> None:
        wanted = call.scope["path"].split("/models/", 1)[1]
        ids = await self._backend_models()
        if wanted not in ids:
            raise ProxyHTTPError(
                ErrorKind.NOT_FOUND,
                f"the backend does not serve a model named {wanted!r}; it serves {ids}",
                code="model_not_found",
            )
        body = _anthropic_model(wanted) if self._anthropic_client(call) else _openai_model(wanted)
        await call.reply.json(200, body)

    async def _backend_models(self) -> list[str]:
        try:
            return await self.runtime.models()
        except BackendError as exc:
            # The backend's URL and its error text stay in the operator's log, not the reply.
            log.warning("proxy.backend_models_failed", error=redact(str(exc)))
            raise ProxyHTTPError(
                ErrorKind.UNAVAILABLE,
                f"the backend did not answer its model list ({exc.kind.value}); try again once "
                "it is up (GET /ready says when)",
                code="backend_unavailable",
                retry_after=5,
            ) from exc
        except msgspec.DecodeError as exc:
            raise ProxyHTTPError(
                ErrorKind.BAD_GATEWAY,
                f"the backend's model list could not be read: {exc}",
                code="backend_models_unreadable",
            ) from exc

    async def _ready(self, call: _Call) -> None:
        """Readiness, unlike ``/health`` (liveness): 200 only while the backend answers."""
        try:
            ids = await self.runtime.models()
        except BackendError as exc:
            log.info("proxy.not_ready", error=redact(str(exc)))
            await call.reply.json(
                503, {"status": "unavailable", "backend": {"error": exc.kind.value}}
            )
            return
        await call.reply.json(200, {"status": "ready", "models": ids})

    async def _health(self, call: _Call) -> None:
        stats = await self.runtime.slot.stats()
        await call.reply.json(
            200,
            {
                "status": "ok",
                "backend": {
                    "kind": self.runtime.backend.kind,
                    "mode": self.runtime.backend.mode,
                    "model": self.runtime.client.model,
                },
                "slot": {"queue_depth": stats.queue_depth, "running": stats.running},
            },
        )

    async def _metrics(self, call: _Call) -> None:
        stats, lanes = await slot_report(self.runtime.slot)
        data = self.runtime.metrics.render(stats, (self._tools.hits, self._tools.misses), lanes)
        await call.reply.raw(200, data, [(b"content-type", CONTENT_TYPE.encode())])

    async def _usage(self, call: _Call) -> None:
        report = await self.runtime.budget.report()
        stats = await self.runtime.slot.stats()
        readings = {
            name: {"available": False, "reason": r.reason}
            if isinstance(r, Unavailable)
            else {"available": True, **msgspec.to_builtins(r)}
            for name, r in report.readings.items()
        }
        backend = self.runtime.backend
        await call.reply.json(
            200,
            {
                "backend": {
                    "kind": backend.kind,
                    "mode": backend.mode,
                    "url": redact(backend.url) if backend.url is not None else None,
                    "model": self.runtime.client.model,
                },
                "context_tokens": report.context_tokens,
                "pool_tokens": report.pool_tokens,
                "kv_used_ratio": report.kv_used_ratio,
                "under_pressure": report.under_pressure,
                "clients": dict(self.runtime.client_tokens),
                "sources": readings,
                "slot": msgspec.to_builtins(stats),
            },
        )


def build_app(config: ProxyConfig, *, client: LLMClient | None = None) -> ProxyApp:
    """The proxy as an ASGI app; it starts its backend and runtime in the ASGI lifespan.

    Serve it with hypercorn's trio worker (``hypercorn --worker-class trio``), or use
    :func:`~forge_rt.proxy.serve_proxy`, which also owns the runtime outside the server.
    ``client`` replaces the backend the config describes.
    """
    return ProxyApp(config, client=client)


# -- helpers -------------------------------------------------------------------------------


def _bad(message: str, path: str) -> ProxyHTTPError:
    return ProxyHTTPError(
        ErrorKind.BAD_REQUEST,
        f"{message} - at `{path}`",
        code="invalid_request",
        param=path.removeprefix("$.") or None,
    )


_CLOSE = (b"connection", b"close")


def _declares_body(scope: Scope) -> bool:
    """Whether the request says a body follows (a non-zero length, or chunked)."""
    length = header(scope, b"content-length")
    return header(scope, b"transfer-encoding") is not None or (
        length is not None and length.strip() not in (b"", b"0")
    )


def _first_leaf(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups (what a nursery raised)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _check_consistent(request: InferenceRequest) -> None:
    """What each part of a request may be on its own but not together: two tools of one name
    (which would the model's call run?), a tool result answering no call made before it (both
    APIs refuse it; a client that trimmed its history lost the call)."""
    twice = sorted(
        n for n, k in collections.Counter(t.name for t in request.tools).items() if k > 1
    )
    if twice:
        raise _bad(
            f"tool names must be unique; given more than once: {', '.join(twice)}", "$.tools"
        )
    called: set[str] = set()
    for index, message in enumerate(request.messages):
        for call in message.tool_calls or ():
            called.add(call.call_id)
        if message.role is Role.TOOL and message.tool_call_id not in called:
            raise _bad(
                f"the tool result for {message.tool_call_id!r} answers no tool call made before "
                "it; every tool result must follow the assistant message whose call it answers",
                f"$.messages[{index}]",
            )


def _schema_error(exc: msgspec.ValidationError | msgspec.DecodeError) -> ProxyHTTPError:
    if isinstance(exc, msgspec.ValidationError):
        text = str(exc)
        path = text.rsplit(" - at `", 1)[1].rstrip("`") if " - at `" in text else None
        return ProxyHTTPError(
            ErrorKind.BAD_REQUEST,
            f"invalid request: {text}",
            code="invalid_request",
            param=path.removeprefix("$.") if path else None,
        )
    return ProxyHTTPError(
        ErrorKind.BAD_REQUEST,
        f"the request body is not valid JSON: {exc}",
        code="invalid_json",
    )


def _estimate(estimator: TokenEstimator, request: InferenceRequest) -> int:
    tools = sum(
        estimator.count(msgspec.json.encode(t.json_schema()).decode() + t.name + t.description)
        for t in request.tools
    )
    messages: tuple[Message, ...] = request.messages
    return estimator.count_prompt(messages) + tools


def _openai_model(model: str) -> dict[str, Any]:
    return {"id": model, "object": "model", "created": 0, "owned_by": "forge-rt"}


def _anthropic_model(model: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": model,
        "display_name": model,
        "created_at": "1970-01-01T00:00:00Z",
    }
