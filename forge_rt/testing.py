"""Test doubles for forge_rt users: an in-process scripted LLM client that honours trio time.

``ScriptedClient`` implements the :class:`~forge_rt.core.LLMClient` protocol without any
network: each call takes ``prefill_s`` seconds, then streams its reply one token (word) at a time
every ``token_s`` seconds -- on trio's clock, so tests under ``MockClock(autojump_threshold=0)`` are
deterministic and instant. For tests of HTTP behaviour use the simulated backend
(``forge_rt.backends.sim``), which is a real server; for the PostgreSQL session store,
``throwaway_postgres()``, a real PostgreSQL server started for the test and deleted after.
``preempted_reply()`` cuts a background call with an urgent one after a given number of
streamed chunks, for measuring how a preempted reply continues.
"""

from __future__ import annotations

import re
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterator,
    MutableMapping,
    Sequence,
)
from contextlib import aclosing, asynccontextmanager, contextmanager
from typing import Any

import msgspec
import structlog
import trio

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
    Usage,
)
from forge_rt.runtime import SlotWorker
from forge_rt.store._throwaway import throwaway_postgres

__all__ = [
    "Reply",
    "ScriptedCall",
    "ScriptedClient",
    "captured_logs",
    "preempted_reply",
    "throwaway_postgres",
]

Reply = str | list[ToolCall]


@contextmanager
def captured_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """Every event forge_rt logs inside the block, as dicts (``event``, ``log_level`` and the
    event's fields), whether or not the application configured logging -- forge_rt is silent
    until it does, so a test that checks what was logged captures it here."""
    with structlog.testing.capture_logs() as logs:
        yield logs


ReplyFn = Callable[[InferenceRequest], Reply]


class ScriptedCall(msgspec.Struct, kw_only=True):
    """What the client saw of one call: when it started and how it ended."""

    request: InferenceRequest
    started_at: float
    ended_at: float | None = None
    tokens_sent: int = 0
    outcome: str = "running"  # "completed" | "cancelled" | "running"


_TOKEN = re.compile(r"\S+\s*|\s+")


class ScriptedClient:
    """Replies from a list (consumed in order) or a function of the request.

    A text reply streams as text deltas; a list of ``ToolCall`` is returned whole at the end as
    native calls (after ``len(calls) * 8`` token times). ``assistant_prefill`` is honoured: when a
    request continues a text reply, only the rest is generated.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | ReplyFn,
        *,
        prefill_s: float = 0.0,
        token_s: float = 0.0,
        prefill_support: bool = True,
        model: str = "scripted",
        context: int | None = 4096,
    ) -> None:
        self._replies = replies if callable(replies) else list(replies)
        self._prefill_s = prefill_s
        self._token_s = token_s
        self._model = model
        self._context = context
        self._capabilities = ClientCapabilities(
            native_tools=True, assistant_prefill=prefill_support, json_schema=True
        )
        self.calls: list[ScriptedCall] = []

    @property
    def model(self) -> str | None:
        return self._model

    @property
    def capabilities(self) -> ClientCapabilities:
        return self._capabilities

    def _next_reply(self, request: InferenceRequest) -> Reply:
        if callable(self._replies):
            return self._replies(request)
        if not self._replies:
            raise AssertionError("ScriptedClient ran out of replies: the test scripted too few")
        return self._replies.pop(0)

    async def send(self, request: InferenceRequest) -> LLMResponse:
        async with self.stream(request) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, FinalChunk):
                    return chunk.response
        raise AssertionError("unreachable: stream always ends with a final chunk")

    @asynccontextmanager
    async def stream(self, request: InferenceRequest) -> AsyncIterator[AsyncIterator[StreamChunk]]:
        reply = self._next_reply(request)
        record = ScriptedCall(request=request, started_at=trio.current_time())
        self.calls.append(record)
        try:
            async with aclosing(self._generate(request, reply, record)) as chunks:
                yield chunks
        finally:
            if record.outcome == "running":
                record.outcome = "cancelled"
                record.ended_at = trio.current_time()

    async def _generate(
        self, request: InferenceRequest, reply: Reply, record: ScriptedCall
    ) -> AsyncGenerator[StreamChunk, None]:
        start = trio.current_time()
        await trio.sleep(self._prefill_s)
        first: float | None = None
        if isinstance(reply, str):
            prefill = request.assistant_prefill or ""
            if prefill and not reply.startswith(prefill):
                raise AssertionError(f"prefill {prefill!r} does not continue reply {reply!r}")
            rest = reply[len(prefill) :]
            for token in _TOKEN.findall(rest):
                await trio.sleep(self._token_s)
                first = first if first is not None else trio.current_time() - start
                record.tokens_sent += 1
                yield TextDeltaChunk(token)
            result: list[ToolCall] | TextResponse = TextResponse(content=rest)
            raw = rest
            completion = len(_TOKEN.findall(rest))
        else:
            await trio.sleep(self._token_s * 8 * len(reply))
            result, raw, completion = list(reply), "", 8 * len(reply)
        record.outcome = "completed"
        record.ended_at = trio.current_time()
        yield FinalChunk(
            LLMResponse(
                result=result,
                raw_text=raw,
                usage=Usage(
                    prompt_tokens=sum(len(m.content.split()) + 4 for m in request.messages),
                    completion_tokens=completion,
                ),
                timings=Timings(total_s=trio.current_time() - start, first_token_s=first),
                finish_reason="tool_calls" if isinstance(result, list) else "stop",
                model=self._model,
            )
        )

    async def context_length(self) -> int | None:
        return self._context

    async def aclose(self) -> None:
        return None


async def preempted_reply(
    slot: SlotWorker,
    background: InferenceRequest,
    urgent: InferenceRequest,
    *,
    after_chunks: int,
    wait_s: float = 300.0,
) -> str:
    """``background``'s reply text when ``urgent`` preempts it after ``after_chunks`` streamed
    text chunks: ``background`` runs at priority 10, ``urgent`` is sent at priority 0 the moment
    that many chunks have streamed. Raises :class:`trio.TooSlowError` when they have not
    streamed within ``wait_s`` seconds (the reply ended first, or the backend is stuck)."""
    reached = trio.Event()
    seen = 0
    result: dict[str, str] = {}

    async def on_chunk(chunk: StreamChunk) -> None:
        nonlocal seen
        if isinstance(chunk, TextDeltaChunk):
            seen += 1
            if seen == after_chunks:
                reached.set()

    async def run_background() -> None:
        reply = await slot.infer(background, priority=10, on_chunk=on_chunk)
        result["text"] = reply.raw_text

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_background)
        with trio.fail_after(wait_s):
            await reached.wait()
        await slot.infer(urgent, priority=0)
    return result["text"]
