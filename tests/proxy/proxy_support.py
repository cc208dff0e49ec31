"""Helpers for the proxy tests: a step-by-step LLM client, served proxies, SDKs in threads."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, TypeVar

import msgspec
import trio

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.core import (
    ClientCapabilities,
    FinalChunk,
    InferenceRequest,
    LLMResponse,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    Timings,
    ToolCall,
    ToolCallDeltaChunk,
    Usage,
)
from forge_rt.proxy import BackendConfig, ProxyConfig, serve_proxy

T = TypeVar("T")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
WEATHER_TOOL_ANTHROPIC = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
}

_TOKEN = re.compile(r"\S+\s*|\s+")


class CallRecord(msgspec.Struct, kw_only=True):
    """One call the gated client received: its request, tokens sent and how it ended."""

    request: InferenceRequest
    reply: Any = None
    tokens_sent: int = 0
    outcome: str = "running"  # running | completed | cancelled
    ended: trio.Event = msgspec.field(default_factory=trio.Event)


Reply = str | list[ToolCall]


class GatedClient:
    """An LLMClient whose replies stream one token per permit the test grants with ``release``.

    Nothing happens on a timer: a test releases tokens and waits on ``started`` (one record per
    call as it starts), so streaming, preemption and cancellation are observed deterministically
    over real sockets. Text replies honour ``assistant_prefill`` (continuing after a
    preemption); a list of ``ToolCall`` streams as native call deltas, one token per call.
    ``replies`` may be a function of the request.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | Callable[[InferenceRequest], Reply],
        *,
        prefill: bool = True,
        gated: bool = True,
    ) -> None:
        self._replies = replies if callable(replies) else list(replies)
        self._prefill = prefill
        self._gated = gated
        self._permits = trio.Semaphore(0)
        self.calls: list[CallRecord] = []
        self._started_send, self.started = trio.open_memory_channel[CallRecord](100)

    @property
    def model(self) -> str | None:
        return "gated-model"

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities(assistant_prefill=self._prefill, json_schema=True)

    def release(self, tokens: int = 1) -> None:
        """Let ``tokens`` more tokens be generated (by whichever call is running)."""
        for _ in range(tokens):
            self._permits.release()

    def _reply(self, request: InferenceRequest) -> Reply:
        if callable(self._replies):
            return self._replies(request)
        if not self._replies:
            raise AssertionError("GatedClient ran out of replies: the test scripted too few")
        return self._replies.pop(0)

    async def send(self, request: InferenceRequest) -> LLMResponse:
        async with self.stream(request) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, FinalChunk):
                    return chunk.response
        raise AssertionError("unreachable: the stream always ends with a final chunk")

    @asynccontextmanager
    async def stream(self, request: InferenceRequest) -> AsyncIterator[AsyncIterator[StreamChunk]]:
        prefill = request.assistant_prefill or ""
        reply = self._earlier(request)
        if reply is None:
            reply = self._reply(request)
        record = CallRecord(request=request, reply=reply)
        self.calls.append(record)
        self._started_send.send_nowait(record)
        try:
            async with aclosing(self._generate(reply, prefill, record)) as chunks:
                yield chunks
        finally:
            if record.outcome == "running":
                record.outcome = "cancelled"
            record.ended.set()

    def _earlier(self, request: InferenceRequest) -> Reply | None:
        """The reply an earlier call of the same conversation got: the model is deterministic,
        so a preempted call that is re-run (continued or restarted) writes the same reply."""
        for earlier in self.calls:
            if earlier.request.messages == request.messages:
                return earlier.reply  # type: ignore[no-any-return]
        return None

    async def _wait(self) -> None:
        if self._gated:
            await self._permits.acquire()
        else:
            await trio.lowlevel.checkpoint()

    async def _generate(
        self, reply: Reply, prefill: str, record: CallRecord
    ) -> AsyncGenerator[StreamChunk, None]:
        if isinstance(reply, str):
            if prefill and not reply.startswith(prefill):
                raise AssertionError(f"prefill {prefill!r} does not continue {reply!r}")
            rest = reply[len(prefill) :]
            for token in _TOKEN.findall(rest):
                await self._wait()
                record.tokens_sent += 1
                yield TextDeltaChunk(token)
            result: list[ToolCall] | TextResponse = TextResponse(content=rest)
            raw = rest
        else:
            for i, call in enumerate(reply):
                await self._wait()
                record.tokens_sent += 1
                yield ToolCallDeltaChunk(
                    index=i,
                    call_id=call.call_id,
                    name=call.tool,
                    arguments_delta=msgspec.json.encode(call.args).decode(),
                )
            result, raw = list(reply), ""
        record.outcome = "completed"
        yield FinalChunk(
            LLMResponse(
                result=result,
                raw_text=raw,
                usage=Usage(prompt_tokens=10, completion_tokens=max(record.tokens_sent, 1)),
                timings=Timings(total_s=0.0),
                finish_reason="tool_calls" if isinstance(result, list) else "stop",
                model="gated-model",
            )
        )

    async def context_length(self) -> int | None:
        return 4096

    async def aclose(self) -> None:
        return None


def proxy_config(**options: Any) -> ProxyConfig:
    """A proxy config for tests: a free port, short timeouts."""
    options.setdefault("port", 0)
    options.setdefault("graceful_timeout_s", 0.5)
    return ProxyConfig(**options)


@asynccontextmanager
async def sim_proxy(
    sim_config: SimConfig | None = None,
    *,
    kind: str = "llamaserver",
    backend_api_key: str | None = None,
    model: str | None = None,
    **options: Any,
) -> AsyncIterator[tuple[SimBackend, str]]:
    """A simulated backend and a proxy in front of it; yields ``(sim, proxy_url)``."""
    async with SimBackend.serve(sim_config or SimConfig()) as sim:
        backend = BackendConfig(url=sim.url, kind=kind, api_key=backend_api_key, model=model)  # type: ignore[arg-type]
        config = proxy_config(backend=backend, **options)
        async with serve_proxy(config) as url:
            yield sim, url


async def in_thread(fn: Callable[[], T]) -> T:
    """Run a blocking SDK call in a worker thread while the trio loop serves the proxy."""
    return await trio.to_thread.run_sync(fn)


@asynccontextmanager
async def client_proxy(client: Any, **options: Any) -> AsyncIterator[str]:
    """A proxy in front of an in-process client (a GatedClient); yields its URL."""
    async with serve_proxy(proxy_config(**options), client=client) as url:
        yield url


class Deltas:
    """Content deltas a client thread received, handed to the trio side as they arrive."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[str](1000)

    def push(self, text: str) -> None:
        """Called from the client thread for each delta."""
        trio.from_thread.run_sync(self.send.send_nowait, text)

    async def next(self) -> str:
        """The next delta the client received."""
        return await self.receive.receive()

    async def collect(self, count: int) -> str:
        """The next ``count`` deltas, joined."""
        return "".join([await self.next() for _ in range(count)])
