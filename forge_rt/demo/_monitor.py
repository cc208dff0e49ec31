"""Watching the demo's agents from outside: state, counters, time to first token, events.

Everything here is read from what the runtime already hands its callers -- the stream chunks
(``on_chunk``), the history messages (``on_message``), the tools' own calls and the slot's
statistics -- so the view shows what happened without reaching into the actors. One slot serves
every agent, which makes preemption visible from outside too: when one agent receives a token
while another was mid-generation, the other was preempted.
"""

from __future__ import annotations

import collections
import enum
import functools
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import msgspec
import trio

from forge_rt.core import (
    BackendChunk,
    ClientCapabilities,
    FinalChunk,
    InferenceRequest,
    LLMClient,
    LLMResponse,
    Message,
    MessageType,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    TextResponse,
    ToolCallDeltaChunk,
    ToolSpec,
    Workflow,
)
from forge_rt.guardrails import rescue, workflow_tool_specs
from forge_rt.runtime import LaneReport, SlotStats

__all__ = ["AgentState", "AgentView", "DemoEvent", "DemoMonitor", "EventSink", "ObservedClient"]

_CONTENT = (TextDeltaChunk, ReasoningDeltaChunk, ToolCallDeltaChunk)
_NUDGES = frozenset(
    {MessageType.RETRY_NUDGE, MessageType.STEP_NUDGE, MessageType.PREREQUISITE_NUDGE}
)
_TAG = re.compile(r"^\[(\w+)\]")
_MID_GENERATION_TOKENS = 3


class AgentState(enum.StrEnum):
    """What an agent is doing right now, as the live view shows it."""

    WAITING = "waiting"
    QUEUED = "queued"
    PREFILL = "reading prompt"
    GENERATING = "generating"
    CHECKING = "checking reply"
    TOOL = "running tool"
    DONE = "done"
    FAILED = "failed"


class DemoEvent(msgspec.Struct, frozen=True):
    """One line of the demo's event log; ``at`` is seconds since the demo started."""

    at: float
    agent: str
    kind: str
    text: str


EventSink = Callable[[DemoEvent], None]


class AgentView:
    """One agent's live state and running counters."""

    def __init__(self, name: str, role: str, priority: int, *, background: bool) -> None:
        self.name = name
        self.role = role
        self.priority = priority
        self.background = background
        self.state = AgentState.WAITING
        self.tool: str | None = None
        self.tokens = 0  # streamed in the current call
        self.inferences = 0
        self.tool_calls = 0
        self.tool_errors = 0
        self.nudges = 0
        self.preempted = 0
        self.preempted_now = False
        self.rescues: collections.Counter[str] = collections.Counter()
        self.ttfts: list[float] = []
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.output: str | None = None
        self.error: BaseException | None = None
        self.failure: str | None = None  # "ErrorType: why", for the report
        self.tools: tuple[ToolSpec, ...] = ()
        self._requested_at: float | None = None
        self._first_seen = False
        self._last_response: LLMResponse | None = None
        self._constrained = False
        self._judged = False

    @property
    def ended(self) -> bool:
        """Whether the run is over (done or failed)."""
        return self.state in (AgentState.DONE, AgentState.FAILED)

    def label(self) -> str:
        """The state as a short phrase: ``generating (12 tok)``, ``running tool get_brief``."""
        if self.state is AgentState.GENERATING:
            return f"generating ({self.tokens} tok)"
        if self.state is AgentState.QUEUED and self.preempted_now:
            return "queued (preempted)"
        if self.state is AgentState.TOOL and self.tool is not None:
            return f"running tool {self.tool}"
        if self.state is AgentState.FAILED and self.error is not None:
            return f"failed: {type(self.error).__name__}"
        return str(self.state)


class DemoMonitor:
    """Tracks every agent of one demo run and turns what they do into events.

    Register each agent with its workflow, pass :meth:`on_chunk` / :meth:`on_message` (bound
    to the agent with :meth:`chunk_sink` / :meth:`message_sink`) to its turn and
    :meth:`on_tool` to its tools; call :meth:`begin`, then :meth:`finish` or :meth:`fail`.
    ``voice_trigger`` is set once a background agent is mid-generation after the first
    background inference has finished (or once every background agent has ended).
    """

    def __init__(self, *, on_event: EventSink | None = None) -> None:
        self.agents: dict[str, AgentView] = {}
        self.events: list[DemoEvent] = []
        self.slot: SlotStats | None = None
        self.lanes: Sequence[LaneReport] = ()
        """Each backend of a fleet, as its last poll found it (none with one backend)."""
        self.voice_trigger = trio.Event()
        self._on_event = on_event
        self._t0 = trio.current_time()

    # --- set-up -------------------------------------------------------------------------------

    def register(
        self, name: str, role: str, workflow: Workflow, priority: int, *, background: bool
    ) -> AgentView:
        """Add an agent (in the waiting state)."""
        view = AgentView(name, role, priority, background=background)
        view.tools = workflow_tool_specs(workflow)
        self.agents[name] = view
        return view

    def now(self) -> float:
        """Seconds since the monitor was created."""
        return trio.current_time() - self._t0

    def note(self, agent: str, kind: str, text: str) -> None:
        """Record one event and pass it to the event sink."""
        event = DemoEvent(at=self.now(), agent=agent, kind=kind, text=text)
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)

    # --- an agent's life ----------------------------------------------------------------------

    def begin(self, name: str) -> None:
        """The agent's request arrives; its first call's time to first token counts from now."""
        view = self.agents[name]
        view.started_at = self.now()
        view.state = AgentState.QUEUED
        view._requested_at = trio.current_time()
        kind = "start" if view.background else "arrive"
        self.note(
            name, kind, f"{'started' if view.background else 'arrived'} at priority {view.priority}"
        )

    def finish(self, name: str, output: str) -> None:
        """The agent's terminal tool succeeded with ``output``."""
        view = self.agents[name]
        view.state, view.output, view.ended_at = AgentState.DONE, output, self.now()
        self.note(name, "done", f"done: {_short(output, 60)}")
        self._maybe_trigger()

    def fail(self, name: str, error: BaseException, *, reason: str | None = None) -> None:
        """The agent's run ended with a typed error (``reason`` says it better, if given)."""
        view = self.agents[name]
        view.state, view.error, view.ended_at = AgentState.FAILED, error, self.now()
        view.failure = f"{type(error).__name__}: {reason or error}"
        self.note(
            name, "failed", f"failed: {type(error).__name__}: {_short(reason or str(error), 70)}"
        )
        self._maybe_trigger()

    def slot_stats(self, stats: SlotStats) -> None:
        """A fresh snapshot of the slot's queue and counters."""
        self.slot = stats

    def lane_reports(self, lanes: Sequence[LaneReport]) -> None:
        """A fresh snapshot of each backend of a fleet."""
        self.lanes = lanes

    # --- hooks the runtime calls --------------------------------------------------------------

    def chunk_sink(self, name: str) -> Callable[[StreamChunk], Awaitable[None]]:
        """The ``on_chunk`` callback of agent ``name``'s turn."""

        async def sink(chunk: StreamChunk) -> None:
            self.on_chunk(name, chunk)

        return sink

    def message_sink(self, name: str) -> Callable[[Message], None]:
        """The ``on_message`` callback of agent ``name``'s turn."""
        return functools.partial(self.on_message, name)

    def on_tool(self, agent: str, tool: str) -> None:
        """A tool of ``agent`` starts running."""
        view = self.agents[agent]
        view.state, view.tool = AgentState.TOOL, tool
        view.tool_calls += 1

    def on_attempt(self, name: str, *, constrained: bool = False) -> None:
        """An inference of agent ``name`` starts on the backend (it has the slot);
        ``constrained``: under a tool-call constraint, so its calls are not rescues."""
        view = self.agents[name]
        view.state, view.tokens, view.preempted_now = AgentState.PREFILL, 0, False
        view._constrained = constrained

    def on_attempt_cancelled(self, name: str) -> None:
        """An inference of agent ``name`` was cancelled on the backend mid-way.

        While the agent's run goes on and a higher-priority agent is active, that is a
        preemption (the slot re-queues the call); otherwise its own deadline or the end of the
        demo cancelled it.
        """
        view = self.agents[name]
        if view.ended:
            return
        urgent = [
            a.name
            for a in self.agents.values()
            if a.priority < view.priority and a.started_at is not None and not a.ended
        ]
        if not urgent:
            return
        tokens = view.tokens
        view.preempted += 1
        view.preempted_now = True
        view.state, view.tokens = AgentState.QUEUED, 0
        self.note(
            name,
            "preempted",
            f"preempted by {', '.join(urgent)} after {tokens} generated tokens; its call is "
            "re-queued",
        )

    def on_chunk(self, name: str, chunk: StreamChunk) -> None:
        """One stream chunk of agent ``name``'s current inference."""
        view = self.agents[name]
        now = trio.current_time()
        if isinstance(chunk, _CONTENT):
            if not view._first_seen:
                view._first_seen = True
                if view._requested_at is not None:
                    view.ttfts.append(now - view._requested_at)
            if not view.preempted_now:  # a token read late, after its attempt was cut off
                view.state = AgentState.GENERATING
                view.tokens += 1
            self._maybe_trigger()
        elif isinstance(chunk, ResetChunk):
            view.tokens = 0
            if view.state is AgentState.GENERATING:
                view.state = AgentState.QUEUED
        elif isinstance(chunk, FinalChunk):
            view.inferences += 1
            view.state = AgentState.CHECKING
            view._last_response = chunk.response
            view._judged = False

    def on_message(self, name: str, message: Message) -> None:
        """One message appended to agent ``name``'s history."""
        view = self.agents[name]
        if message.type is MessageType.TOOL_CALL and not message.transient:
            self._count_rescue(view)
        elif message.type in _NUDGES and message.transient:
            if not view._judged:
                view._judged = True
                view.nudges += 1
                self.note(name, "nudge", f"nudged: {_nudge_label(message.content)}")
        elif message.type is MessageType.TOOL_RESULT:
            tag = _TAG.match(message.content)
            if tag is not None:
                view.tool_errors += 1
                self.note(name, "tool_error", f"tool {message.tool_name} said: {tag.group(1)}")
        if message.type not in (
            MessageType.TOOL_CALL,
            MessageType.REASONING,
            MessageType.TEXT_RESPONSE,
        ):
            # The loop asks for its next inference right after this message.
            if view.inferences or view._first_seen:
                view._requested_at = trio.current_time()
                view._first_seen = False
            view.tokens = 0
            view.tool = None
            view.preempted_now = False
            if not view.ended:
                view.state = AgentState.QUEUED

    # --- inference from outside ---------------------------------------------------------------

    def _count_rescue(self, view: AgentView) -> None:
        """Count the dialects of calls rescued from the last text reply, now that they run."""
        response = view._last_response
        if response is None or not isinstance(response.result, TextResponse):
            return
        if view._constrained:
            return  # the constraint made the call; nothing was rescued
        found = rescue(response.result.content, view.tools)
        if not found.dialects:
            return
        counts = collections.Counter(str(d) for d in found.dialects)
        view.rescues.update(counts)
        listed = ", ".join(f"{d} x{n}" if n > 1 else d for d, n in counts.items())
        self.note(view.name, "rescued", f"rescued call(s) written as {listed}")

    def _maybe_trigger(self) -> None:
        """Set the voice trigger once its condition holds (see the class docstring)."""
        if self.voice_trigger.is_set():
            return
        background = [a for a in self.agents.values() if a.background]
        if all(a.ended for a in background):
            self.voice_trigger.set()
            return
        warmed = any(a.inferences for a in background)
        busy = any(
            a.state is AgentState.GENERATING and a.tokens >= _MID_GENERATION_TOKENS
            for a in background
        )
        if warmed and busy:
            self.voice_trigger.set()

    # --- results ------------------------------------------------------------------------------

    def background_ttfts(self) -> list[float]:
        """Every background inference's time to first token, in seconds."""
        return [t for a in self.agents.values() if a.background for t in a.ttfts]

    def rescues(self) -> collections.Counter[str]:
        """Rescued calls by dialect, over every agent."""
        total: collections.Counter[str] = collections.Counter()
        for view in self.agents.values():
            total.update(view.rescues)
        return total


def _short(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _nudge_label(content: str) -> str:
    """A nudge's kind: its ``[Tag]``, else its first sentence."""
    tag = _TAG.match(content)
    if tag is not None:
        return tag.group(1)
    return _short(content.split(".")[0], 48)


class ObservedClient:
    """An :class:`~forge_rt.core.LLMClient` that tells a monitor when calls run.

    The SlotWorker streams every attempt through ``stream``; wrapping the client shows which
    agent holds the slot (its prompt being read, then tokens) and which attempts were cut off,
    exactly, without reaching into the scheduler. Agents are recognised by their task, the
    request's first user message.
    """

    def __init__(self, inner: LLMClient, monitor: DemoMonitor, agent_of_task: dict[str, str]):
        self._inner = inner
        self._monitor = monitor
        self._agent_of_task = agent_of_task

    @property
    def model(self) -> str | None:
        return self._inner.model

    @property
    def capabilities(self) -> ClientCapabilities:
        return self._inner.capabilities

    async def send(self, request: InferenceRequest) -> LLMResponse:
        agent = self._agent(request)
        if agent is not None:
            self._monitor.on_attempt(agent, constrained=request.constraint is not None)
        return await self._inner.send(request)

    @asynccontextmanager
    async def stream(self, request: InferenceRequest) -> AsyncIterator[AsyncIterator[BackendChunk]]:
        agent = self._agent(request)
        if agent is not None:
            self._monitor.on_attempt(agent, constrained=request.constraint is not None)
        try:
            async with self._inner.stream(request) as chunks:
                yield chunks
        except trio.Cancelled:
            if agent is not None:
                self._monitor.on_attempt_cancelled(agent)  # noted, never handled: it propagates
            raise

    async def context_length(self) -> int | None:
        return await self._inner.context_length()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _agent(self, request: InferenceRequest) -> str | None:
        """The agent whose task is the request's first user message; None for the run's own
        requests that are no agent's turn (the voice prewarm, the idle-slot baseline)."""
        task = next((m.content for m in request.messages if m.type is MessageType.USER_INPUT), None)
        return None if task is None else self._agent_of_task.get(task)
