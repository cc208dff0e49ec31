"""The simulated backend: a real HTTP server on a local port, driven by a model of small LLMs.

:class:`SimBackend` accepts connections in a nursery owned by :meth:`SimBackend.serve`, answers
the OpenAI, llama-server, Ollama and Anthropic endpoints, and runs each inference through one
engine: pick a fault, plan the reply (script or oracle + failure rates), take a slot, pay for
the uncached part of the prompt, then generate token by token, stopping at once if the client
goes away.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio

from actors import quiet_logger
from forge_rt.backends.sim._anthropic import AnthropicCodec
from forge_rt.backends.sim._codec import BadRequest, Codec, StreamEncoder
from forge_rt.backends.sim._config import Fault, SimConfig, SimReply
from forge_rt.backends.sim._generation import Generation, plan_units
from forge_rt.backends.sim._http import Exchange, serve_connection
from forge_rt.backends.sim._metrics import metrics_registry, metrics_text
from forge_rt.backends.sim._model import (
    PlannedReply,
    continue_prefill,
    default_oracle,
    plan_constrained,
    plan_from_intent,
    plan_scripted,
    reply_key,
)
from forge_rt.backends.sim._ollama import OllamaCodec
from forge_rt.backends.sim._openai import OpenAICodec
from forge_rt.backends.sim._slots import Slot, SlotPool, common_prefix
from forge_rt.backends.sim._stats import ReplyRecord, SimStats, SlotStats
from forge_rt.backends.sim._tokens import Tokenizer
from forge_rt.backends.sim._view import RequestView

__all__ = ["SimBackend"]

logger = quiet_logger(__name__)

_encode = msgspec.json.Encoder().encode
FAULT_HEADER = "x-sim-fault"

# Faults that strike before any generation: they hold no slot and consume no scripted reply.
_EARLY_FAULTS = frozenset(
    {Fault.HTTP_500, Fault.HTTP_503, Fault.RESET_BEFORE_FIRST_BYTE, Fault.HANG}
)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> bytes:
    """An error body in llama-server's shape, for the endpoints outside the three chat APIs."""
    return _encode({"error": {"code": status, "message": message, "type": kind}})


async def _send_progress(
    report: tuple[Exchange, StreamEncoder] | None, *, total: int, cached: int, processed: int
) -> None:
    """Send a prompt-progress report on ``report``'s exchange; nothing when none was asked."""
    if report is None:
        return
    ex, encoder = report
    for event in encoder.progress(total=total, cached=cached, processed=processed):
        await ex.event(event)


class _ScriptError(Exception):
    """The script has no reply for a request: a bug in the test, reported as HTTP 500."""


class _OracleError(Exception):
    """The configured oracle raised (the original error is the ``__cause__``)."""


class _Tokenize(msgspec.Struct):
    content: str
    with_pieces: bool = False  # llama-server's add_special is not read: the sim has no BOS token


class _Detokenize(msgspec.Struct):
    tokens: list[int]


class SimBackend:
    """A running simulated model server; create it with :meth:`serve`.

    ``url`` is ``http://HOST:PORT``; ``stats`` is a live :class:`SimStats`; ``config`` may be
    replaced between requests (except ``host``, ``port`` and ``n_slots``).
    """

    def __init__(self, config: SimConfig, nursery: trio.Nursery) -> None:
        self._config = config
        self._nursery = nursery
        self.stats = SimStats(
            slots=[SlotStats(id=i) for i in range(config.n_slots)],
            replies=deque(maxlen=config.reply_log_size),
        )
        self._changed = trio.Event()
        self._pool = SlotPool(self.stats, self._notify)
        self._tokenizer = Tokenizer(config.chars_per_token)
        self._injected: deque[Fault] = deque()
        self._cursors: dict[str, int] = {}
        self._fault_rng = random.Random(config.seed)
        self._ids = itertools.count(1)
        self._started = int(time.time())
        self._port = config.port
        self._serving: trio.CancelScope | None = None
        self._stopped = trio.Event()
        self._registry = metrics_registry(self.stats, lambda: self._config.n_ctx)
        openai, anthropic, ollama = OpenAICodec(), AnthropicCodec(), OllamaCodec()
        self._routes: dict[str, tuple[str, Callable[[Exchange], Awaitable[None]]]] = {
            "/v1/chat/completions": ("POST", lambda ex: self._infer(ex, openai)),
            "/chat/completions": ("POST", lambda ex: self._infer(ex, openai)),
            "/v1/models": ("GET", self._models),
            "/models": ("GET", self._models),
            "/health": ("GET", self._health),
            "/v1/health": ("GET", self._health),
            "/props": ("GET", self._props),
            "/slots": ("GET", self._slots),
            "/metrics": ("GET", self._metrics),
            "/tokenize": ("POST", self._tokenize),
            "/apply-template": ("POST", lambda ex: self._apply_template(ex, openai)),
            "/detokenize": ("POST", self._detokenize),
            "/v1/messages": ("POST", lambda ex: self._infer(ex, anthropic)),
            "/api/chat": ("POST", lambda ex: self._infer(ex, ollama)),
            "/api/tags": ("GET", self._ollama_tags),
            "/api/show": ("POST", self._ollama_show),
            "/api/version": ("GET", self._ollama_version),
        }

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def serve(cls, config: SimConfig | None = None) -> AsyncIterator[SimBackend]:
        """Serve until the block exits; connections and generations are cancelled then.

        An exception raised in the block comes out as itself, not wrapped in the exception
        group of the nursery that runs the server (so ``pytest.raises`` and ``except`` work).
        """
        try:
            async with trio.open_nursery() as nursery:
                sim = cls(config if config is not None else SimConfig(), nursery)
                await sim._listen()
                try:
                    yield sim
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            error: BaseException = group
            while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
                error = error.exceptions[0]
            if isinstance(error, _OracleError) and error.__cause__ is not None:
                error = error.__cause__
            if error is group:
                raise
            raise error from None

    @property
    def port(self) -> int:
        """The TCP port the sim listens on (the same across restarts)."""
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123`` (append ``/v1`` for OpenAI clients)."""
        return f"http://{self._config.host}:{self._port}"

    async def _listen(self) -> None:
        listeners = await trio.open_tcp_listeners(self._port, host=self._config.host)
        listener = listeners[0]
        self._port = listener.socket.getsockname()[1]
        self._stopped = trio.Event()
        self._serving = await self._nursery.start(self._accept, listener)
        logger.info("sim.listening", url=self.url, model=self._config.model)

    async def _accept(
        self, listener: trio.SocketListener, *, task_status: trio.TaskStatus[trio.CancelScope]
    ) -> None:
        try:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as connections:
                    task_status.started(scope)
                    while True:
                        stream = await listener.accept()
                        connections.start_soon(serve_connection, stream, self._handle)
        finally:
            with trio.CancelScope(shield=True):  # the port must be free before restart rebinds it
                await listener.aclose()
            self._stopped.set()

    async def restart(self, downtime: float = 0.0, *, until: trio.Event | None = None) -> None:
        """Stop listening and drop every connection, stay down ``downtime`` seconds, come back.

        Like a real server restart: in-flight requests see their connection close, slot caches
        are emptied, and the sim listens again on the same port. With ``until``, the sim also
        stays down until that event is set (tests use it to act while the server is down;
        ``stats.restarts`` is incremented as soon as it is down). Returns once it listens again.
        """
        assert self._serving is not None
        self._serving.cancel()
        await self._stopped.wait()
        self._drop_caches()
        self.stats.restarts += 1
        self._notify()
        logger.info("sim.restarting", url=self.url, downtime=downtime)
        await trio.sleep(downtime)
        if until is not None:
            await until.wait()
        await self._listen()
        self._notify()

    # -- control -----------------------------------------------------------------------------

    @property
    def config(self) -> SimConfig:
        return self._config

    @config.setter
    def config(self, config: SimConfig) -> None:
        config = SimConfig(**dict(config))  # re-validate: model_copy(update=...) does not
        for name in ("host", "n_slots"):
            if getattr(config, name) != getattr(self._config, name):
                raise ValueError(
                    f"SimConfig.{name} cannot change while serving "
                    f"({getattr(self._config, name)!r} -> {getattr(config, name)!r}); "
                    "start another SimBackend instead"
                )
        if config.port not in (0, self._port):
            raise ValueError(
                f"SimConfig.port cannot change while serving (listening on {self._port})"
            )
        if config.chars_per_token != self._config.chars_per_token:
            self._tokenizer = Tokenizer(config.chars_per_token)
            self._drop_caches()  # cached tokens no longer match the new tokenizer
        if config.reply_log_size != self._config.reply_log_size:
            self.stats.replies = deque(self.stats.replies, maxlen=config.reply_log_size)
        if config.script != self._config.script:
            self._cursors.clear()
        if config.n_ctx != self._config.n_ctx:
            self._registry = metrics_registry(self.stats, lambda: self._config.n_ctx)
        self._config = config

    def _drop_caches(self) -> None:
        for slot in self._pool.slots:
            slot.cache = []
            slot.stats.cache_tokens = 0

    def set_script(self, script: Mapping[str, Sequence[SimReply | str]] | None) -> None:
        """Replace the script (``None``: back to the oracle); every conversation starts over."""
        self.config = self._config.model_copy(update={"script": script})
        self._cursors.clear()

    def inject(self, fault: Fault, *, count: int = 1) -> None:
        """Make the next ``count`` inference requests fail with ``fault``."""
        if count < 1:
            raise ValueError(f"inject count must be at least 1, got {count}")
        self._injected.extend([Fault(fault)] * count)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, predicate: Callable[[SimStats], bool]) -> None:
        """Return once ``predicate(stats)`` holds; re-checked at every state change.

        For tests: ``await sim.wait_until(lambda s: s.waiting == 1)`` orders steps without
        sleeping. Wrap it in ``trio.fail_after`` to bound the wait.
        """
        while not predicate(self.stats):
            await self._changed.wait()

    # -- routing -----------------------------------------------------------------------------

    async def _handle(self, ex: Exchange) -> None:
        self.stats.requests[ex.path] += 1
        route = self._routes.get(ex.path)
        if route is None:
            message = f"no such endpoint: {ex.method} {ex.path}"
            await ex.send(404, _error(404, message, "not_found_error"))
        elif route[0] != ex.method:
            message = f"{ex.path} takes {route[0]}, not {ex.method}"
            await ex.send(405, _error(405, message), headers=[("allow", route[0])])
        else:
            await route[1](ex)

    # -- llama-server / OpenAI metadata endpoints --------------------------------------------

    async def _models(self, ex: Exchange) -> None:
        n_ctx = self._config.n_ctx
        model = {
            "id": self._config.model,
            "object": "model",
            "created": self._started,
            "owned_by": "forge-rt-sim",
            "max_model_len": n_ctx,
            "meta": {"n_ctx_train": n_ctx, "n_ctx": n_ctx},
        }
        await ex.send(200, _encode({"object": "list", "data": [model]}))

    async def _health(self, ex: Exchange) -> None:
        await ex.send(200, b'{"status":"ok"}')

    async def _props(self, ex: Exchange) -> None:
        config = self._config
        props = {
            "default_generation_settings": {"n_ctx": config.n_ctx, "model": config.model},
            "total_slots": config.n_slots,
            "model_path": f"/sim/{config.model}.gguf",
            "chat_template": "chatml",
            "build_info": "forge-rt-sim",
        }
        await ex.send(200, _encode(props))

    async def _slots(self, ex: Exchange) -> None:
        slots = [
            {
                "id": s.id,
                "n_ctx": self._config.n_ctx,
                "is_processing": s.is_processing,
                "cache_tokens": s.cache_tokens,
            }
            for s in self.stats.slots
        ]
        await ex.send(200, _encode(slots))

    async def _metrics(self, ex: Exchange) -> None:
        await ex.send(200, metrics_text(self._registry), "text/plain; version=0.0.4; charset=utf-8")

    async def _tokenize(self, ex: Exchange) -> None:
        try:
            request = msgspec.json.decode(ex.body, type=_Tokenize)
        except msgspec.DecodeError as exc:
            await ex.send(400, _error(400, f"invalid /tokenize body: {exc}"))
            return
        ids = self._tokenizer.encode(request.content)
        if request.with_pieces:
            tokens: list[Any] = [{"id": i, "piece": self._tokenizer.piece(i)} for i in ids]
        else:
            tokens = ids
        await ex.send(200, _encode({"tokens": tokens}))

    async def _apply_template(self, ex: Exchange, codec: Codec) -> None:
        """llama-server's ``/apply-template``: a chat body rendered as the prompt text the sim
        counts (its ``/tokenize`` gives the ``prompt_tokens`` the same request reports)."""
        try:
            view = codec.parse(ex.body, ex.headers)
        except BadRequest as exc:
            await ex.send(exc.status, codec.error(exc.status, str(exc), exc.kind))
            return
        await ex.send(200, _encode({"prompt": "".join(self._tokenizer.prompt(view))}))

    async def _detokenize(self, ex: Exchange) -> None:
        try:
            request = msgspec.json.decode(ex.body, type=_Detokenize)
            content = "".join(self._tokenizer.piece(t) for t in request.tokens)
        except (msgspec.DecodeError, KeyError) as exc:
            await ex.send(400, _error(400, f"invalid /detokenize request: {exc.args[0]}"))
            return
        await ex.send(200, _encode({"content": content}))

    # -- Ollama metadata endpoints ------------------------------------------------------------

    def _ollama_details(self) -> dict[str, Any]:
        return {
            "format": "gguf",
            "family": "sim",
            "parameter_size": "0B",
            "quantization_level": "none",
        }

    async def _ollama_tags(self, ex: Exchange) -> None:
        model = {
            "name": self._config.model,
            "model": self._config.model,
            "modified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._started)),
            "size": 0,
            "digest": "sim",
            "details": self._ollama_details(),
        }
        await ex.send(200, _encode({"models": [model]}))

    async def _ollama_show(self, ex: Exchange) -> None:
        n_ctx = self._config.n_ctx
        show = {
            "modelfile": f"FROM {self._config.model}",
            "parameters": f"num_ctx {n_ctx}",
            "template": "chatml",
            "details": self._ollama_details(),
            "model_info": {"general.architecture": "sim", "sim.context_length": n_ctx},
            "capabilities": ["completion", "tools"],
        }
        await ex.send(200, _encode(show))

    async def _ollama_version(self, ex: Exchange) -> None:
        await ex.send(200, b'{"version":"0.0.0-sim"}')

    # -- inference ---------------------------------------------------------------------------

    async def _infer(self, ex: Exchange, codec: Codec) -> None:
        """Serve one inference request on any API."""
        try:
            view = codec.parse(ex.body, ex.headers)
            self._check(view, ex.headers, codec)
        except BadRequest as exc:
            await ex.send(exc.status, codec.error(exc.status, str(exc), exc.kind))
            return
        stats = self.stats
        stats.in_flight += 1
        stats.max_concurrent = max(stats.max_concurrent, stats.in_flight)
        self._notify()
        try:
            if self._may_wait(view, ex.headers):
                async with trio.open_nursery() as nursery:
                    work = trio.CancelScope()
                    nursery.start_soon(ex.watch_peer, work.cancel)
                    with work:
                        await self._run_to_end(ex, codec, view)
                    nursery.cancel_scope.cancel()
            else:
                await self._run_to_end(ex, codec, view)
        finally:
            stats.in_flight -= 1
            self._notify()

    async def _run_to_end(self, ex: Exchange, codec: Codec, view: RequestView) -> None:
        try:
            await self._run(ex, codec, view)
        except trio.BrokenResourceError:
            ex.peer_gone = True  # a write found the client gone

    def _may_wait(self, view: RequestView, headers: Mapping[str, str]) -> bool:
        """Whether this request can take time, so a hang-up must be watched for while it runs.

        An instant reply on a free slot never waits: a client leaving then is only seen at the
        write, which costs nothing, and skipping the watcher halves the per-request cost.
        """
        config = self._config
        timed = (
            config.prefill_tps is not None
            or config.decode_tps is not None
            or config.first_token_latency_s > 0
        )
        faulty = FAULT_HEADER in headers or bool(self._injected) or bool(config.fault_rates)
        if config.script is not None and not faulty:
            try:
                faulty = self._scripted(view, consume=False).fault is not None
            except _ScriptError:
                faulty = False  # answered at once with a 500
        return timed or faulty or not self._pool.has_free(view.slot_id)

    def _check(self, view: RequestView, headers: Mapping[str, str], codec: Codec) -> None:
        config = self._config
        if config.api_key is not None and not codec.authorised(headers, config.api_key):
            raise BadRequest(
                f"missing or wrong API key for the {codec.api} API on this sim",
                status=401,
                kind="authentication_error",
            )
        if view.slot_id is not None and not 0 <= view.slot_id < config.n_slots:
            raise BadRequest(
                f"id_slot {view.slot_id} does not exist: this server has slots "
                f"0..{config.n_slots - 1}"
            )
        named = headers.get(FAULT_HEADER)
        if named is not None and named not in {f.value for f in Fault}:
            known = ", ".join(f.value for f in Fault)
            raise BadRequest(f"unknown {FAULT_HEADER} value {named!r}; use one of: {known}")
        if view.constraint is not None:
            self.stats.constraints[view.constraint] += 1
        if view.priority is not None:
            self.stats.priorities.append(view.priority)
        if view.api == "ollama":
            wanted = view.num_ctx if view.num_ctx is not None else config.n_ctx
            if self.stats.ollama_num_ctx not in (None, wanted):
                self.stats.ollama_num_ctx_changes += 1
                self._drop_caches()  # Ollama reloads the model: every cached prefix is lost
            self.stats.ollama_num_ctx = wanted

    def _external_fault(self, headers: Mapping[str, str]) -> Fault | None:
        """The fault a request gets from outside the script: header, injection, or rate."""
        named = headers.get(FAULT_HEADER)
        if named is not None:
            return Fault(named)  # checked by _check
        if self._injected:
            return self._injected.popleft()
        rates = self._config.fault_rates
        if rates:
            roll = self._fault_rng.random()
            for fault, rate in rates.items():
                if roll < rate:
                    return fault
                roll -= rate
        return None

    def _scripted(self, view: RequestView, *, consume: bool) -> SimReply:
        script = self._config.script
        assert script is not None
        key = view.conversation if view.conversation in script else "*"
        replies = script.get(key)
        if replies is None:
            raise _ScriptError(
                f"sim script has no replies for conversation {view.conversation!r} and no '*' "
                f"default list (script keys: {sorted(script)}); key a list by the "
                "x-sim-conversation header or the first user message's text"
            )
        cursor = self._cursors.get(key, 0)
        if cursor >= len(replies):
            raise _ScriptError(
                f"sim script for conversation {key!r} is exhausted: all {len(replies)} scripted "
                "replies were consumed; add replies with sim.set_script(...) or check that the "
                "client does not send more requests than the test expects"
            )
        if consume:
            self._cursors[key] = cursor + 1
        return replies[cursor]

    def _plan(self, view: RequestView, *, consume: bool) -> tuple[PlannedReply, Fault | None]:
        config = self._config
        key = reply_key(config.seed, view.conversation, view.turn)
        if config.script is not None:
            reply = self._scripted(view, consume=consume)
            return plan_scripted(reply, key), reply.fault
        oracle = config.oracle if config.oracle is not None else default_oracle
        try:
            intent = oracle(view)
        except Exception as exc:
            raise _OracleError from exc
        if view.constraint is not None:
            return plan_constrained(view, intent), None
        return plan_from_intent(view, intent, config.rates, key), None

    async def _run(self, ex: Exchange, codec: Codec, view: RequestView) -> None:
        fault = self._external_fault(ex.headers)
        if fault in _EARLY_FAULTS:
            await self._early_fault(ex, codec, fault)
            return
        try:
            plan, reply_fault = self._plan(view, consume=fault is None)
        except _ScriptError as exc:
            await ex.send(500, codec.error(500, str(exc), "sim_script_error"))
            return
        except _OracleError as exc:
            # The oracle is the test's code: tell the client, then fail the server loudly.
            error = exc.__cause__
            message = f"sim oracle raised {type(error).__name__}: {error}"
            await ex.send(500, codec.error(500, message, "sim_oracle_error"))
            raise
        self.stats.dialects[plan.dialect] += 1
        if view.prefill:
            plan = continue_prefill(plan, view.prefill)
        if fault is None and reply_fault is not None:
            fault = reply_fault
            if fault in _EARLY_FAULTS:
                await self._early_fault(ex, codec, fault)
                return
        if fault is not None:
            self.stats.faults[fault] += 1
        if fault is Fault.SLOW_DRIP:
            ex.drip = self._config.slow_drip_interval_s
        prompt = self._tokenizer.prompt(view)
        n_ctx = self._config.n_ctx
        if len(prompt) > n_ctx:
            message = (  # llama-server's own words, which clients read the counts from
                f"request ({len(prompt)} tokens) exceeds the available context size "
                f"({n_ctx} tokens), try increasing it"
            )
            await ex.send(400, codec.error(400, message, "exceed_context_size_error"))
            return
        units = plan_units(plan, self._tokenizer)
        limit = n_ctx - len(prompt)
        if view.max_tokens is not None:
            limit = min(limit, view.max_tokens)
        generation = Generation(
            id=f"{codec.id_prefix}sim-{next(self._ids):06d}",
            model=self._config.model,
            plan=plan,
            units=units[:limit],
            truncated=len(units) > limit,
            prompt_tokens=len(prompt),
        )
        completed = False
        try:
            completed = await self._generate(ex, codec, view, generation, prompt, fault)
        finally:
            self.stats.replies.append(
                ReplyRecord(
                    endpoint=ex.path,
                    conversation=view.conversation,
                    turn=view.turn,
                    dialect=plan.dialect,
                    intent=plan.intent,
                    content=plan.content,
                    tool_calls=tuple((c.name, c.arguments) for c in plan.calls),
                    constraint=view.constraint,
                    completed=completed,
                )
            )

    async def _early_fault(self, ex: Exchange, codec: Codec, fault: Fault) -> None:
        self.stats.faults[fault] += 1
        self._notify()
        if fault is Fault.HTTP_500:
            await ex.send(
                500,
                codec.error(
                    500, "simulated internal server error (fault http_500)", "server_error"
                ),
            )
        elif fault is Fault.HTTP_503:
            body = codec.error(
                503, "simulated overload: the server is busy (fault http_503)", "unavailable_error"
            )
            await ex.send(503, body, headers=[("retry-after", "1")])
        elif fault is Fault.RESET_BEFORE_FIRST_BYTE:
            await ex.reset()
        else:  # HANG: answer nothing; the watcher cancels this when the client gives up
            await trio.sleep_forever()

    async def _generate(
        self,
        ex: Exchange,
        codec: Codec,
        view: RequestView,
        gen: Generation,
        prompt: list[str],
        fault: Fault | None,
    ) -> bool:
        """Prefill and decode ``gen`` on a slot; ``True`` if the whole response was sent."""
        slot = await self._pool.acquire(prompt, view.slot_id)
        holding = True
        try:
            encoder = codec.encoder(gen, view) if view.stream else None
            report = (ex, encoder) if encoder is not None and view.return_progress else None
            if report is not None:
                ex.begin_stream(codec.stream_content_type)  # the reports go out during prefill
            await self._prefill(slot, prompt, gen, report, stall=fault is Fault.STALL_IN_PREFILL)
            if encoder is not None:
                if report is None:
                    ex.begin_stream(codec.stream_content_type)
                for event in encoder.open():
                    await ex.event(event)
            self._notify()
            if not await self._decode(ex, slot, gen, encoder, fault):
                return False
            self.stats.completed += 1
            self._pool.release(slot)
            holding = False
            if encoder is not None:
                if fault is Fault.TRUNCATED_JSON:
                    await ex.event(encoder.truncated())
                else:
                    for event in encoder.close():
                        await ex.event(event)
                await ex.end_stream()
                return fault is None or fault is Fault.SLOW_DRIP
            body = codec.response(gen)
            if fault is Fault.RESET_MID_STREAM:
                await ex.send_cut(200, body, len(body) // 2, "application/json")
                return False
            if fault is Fault.TRUNCATED_JSON:
                body = body[: len(body) // 2]
            elif fault is Fault.MALFORMED_SSE:
                body = b"data: " + body + b"\n\n"
            await ex.send(200, body)
            return fault is None or fault is Fault.SLOW_DRIP
        except trio.BrokenResourceError:
            ex.peer_gone = True
            raise
        finally:
            if holding:
                # Stopped early: the cache keeps the prompt and only what was generated.
                if ex.peer_gone:
                    self.stats.disconnects += 1
                self._pool.release(slot)

    async def _prefill(
        self,
        slot: Slot,
        prompt: list[str],
        gen: Generation,
        report: tuple[Exchange, StreamEncoder] | None,
        *,
        stall: bool,
    ) -> None:
        """Pay for the part of ``prompt`` the slot's cache does not hold, then cache it all.

        With ``report`` (the exchange and its encoder), a progress event goes out as prefill
        starts and after each ``prefill_batch`` tokens, the time paid batch by batch, as
        llama-server does; ``stall`` stops it for good after the first report.
        """
        config = self._config
        # Like llama-server, a fully cached prompt still evaluates its last token.
        common = min(common_prefix(slot.cache, prompt), len(prompt) - 1)
        gen.cached_tokens = common
        slot.stats.cached_tokens += common
        slot.stats.prefilled_tokens += len(prompt) - common
        del slot.cache[common:]  # cancelled mid-prefill, the slot keeps only the shared prefix
        slot.stats.cache_tokens = common
        started = trio.current_time()
        total = len(prompt)
        # Reporting, the prompt is read batch by batch, a report after each; else in one go.
        step = config.prefill_batch if report is not None else total
        await _send_progress(report, total=total, cached=common, processed=common)
        if stall:
            await trio.sleep_forever()
        delay = config.first_token_latency_s
        processed = common
        while processed < total:
            batch = min(step, total - processed)
            if config.prefill_tps is not None:
                delay += batch / config.prefill_tps
            if delay:
                await trio.sleep(delay)
            delay = 0.0
            processed += batch
            await _send_progress(report, total=total, cached=common, processed=processed)
        slot.cache = prompt
        slot.stats.cache_tokens = len(prompt)
        gen.prompt_ms = (trio.current_time() - started) * 1000

    async def _decode(
        self,
        ex: Exchange,
        slot: Slot,
        gen: Generation,
        encoder: StreamEncoder | None,
        fault: Fault | None,
    ) -> bool:
        """Generate ``gen``'s tokens into the slot (and the stream); ``False`` if a fault cut it."""
        units = gen.units
        tps = self._config.decode_tps
        started = trio.current_time()
        if tps is None and encoder is None:  # instant and unstreamed: every token at once
            slot.cache.extend(u.piece for u in units)
            slot.stats.generated_tokens += len(units)
            slot.stats.cache_tokens += len(units)
            gen.emitted = len(units)
            return True
        streamed_reset = fault is Fault.RESET_MID_STREAM and encoder is not None
        cut = max(1, len(units) // 2) if streamed_reset else -1
        if cut > len(units):  # nothing to generate: cut right after the stream opened
            await ex.reset()
            return False
        for index, unit in enumerate(units):
            if tps is not None:
                await trio.sleep_until(started + (index + 1) / tps)
            slot.cache.append(unit.piece)
            slot.stats.generated_tokens += 1
            slot.stats.cache_tokens += 1
            gen.emitted = index + 1
            if encoder is None:
                continue
            for event in encoder.delta(unit):
                await ex.event(event)
            if index == 0 and fault is Fault.MALFORMED_SSE:
                await ex.event(encoder.malformed())
            if index + 1 == cut:
                await ex.reset()
                return False
        gen.predicted_ms = (trio.current_time() - started) * 1000
        return True
