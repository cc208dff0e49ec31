"""Running the demo: three background specialists and a voice request sharing one inference slot.

``run_demo`` opens the backend (the embedded model, the simulated one, or a server you run),
starts one :class:`~forge_rt.runtime.Session` -- one SlotWorker, preemption always -- runs the
researcher, analyst and writer at background priority and, once they are mid-generation, the
voice agent at high priority. It returns a :class:`DemoReport` of what it measured.

A model that fails a task is an outcome, reported per agent. A broken backend is not: a backend
that will not start, or a transport fault mid-run, ends the demo with that typed error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import trio

from actors import quiet_logger
from forge_rt.backends.sim import SimBackend
from forge_rt.clients import LlamaServerClient, make_client
from forge_rt.core import (
    LLMClient,
    Sampling,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
    Workflow,
)
from forge_rt.demo._agents import AGENTS, IDLE_VOICE, AgentSpec
from forge_rt.demo._config import DemoConfig
from forge_rt.demo._monitor import DemoMonitor, EventSink, ObservedClient
from forge_rt.demo._report import AgentOutcome, DemoReport
from forge_rt.demo._sim import demo_sim_config
from forge_rt.errors import (
    BackendFailureError,
    ConstraintUnsupportedError,
    ForgeError,
    WorkflowCancelledError,
)
from forge_rt.runtime import PreemptPolicy, Session, SlotStats, WorkflowHandle, slot_report

__all__ = ["TickSink", "open_backend", "run_demo"]

_log = quiet_logger(__name__)

TickSink = Callable[[DemoMonitor], None]

# Errors that mean the backend (or the set-up) is broken, not that the model failed its task.
_FATAL = (BackendFailureError, ConstraintUnsupportedError)


@asynccontextmanager
async def open_backend(
    config: DemoConfig, *, lines: int | None = None
) -> AsyncIterator[tuple[list[LLMClient], str]]:
    """The demo's clients (``config.servers`` of them) and a line describing the backend; the
    backends stop on exit.

    ``lines``: the embedded and simulated backends start with that many slots (each with the
    whole ``n_ctx``), for the SlotWorker's cache lines. Raises what starting the backend raises
    (``BackendStartError`` and its subclasses, ``ModelPartsMissingError``, ...) for the
    embedded model.
    """
    slots = lines or 1
    shape = "one slot" if slots == 1 else f"one generation at a time over {slots} cache lines"
    each = "" if config.servers == 1 else f"{config.servers} servers as one fleet, each with "
    async with AsyncExitStack() as stack:
        clients: list[LLMClient] = []
        urls: list[str] = []
        for _ in range(config.servers):
            client, url, what = await stack.enter_async_context(_one_backend(config, slots))
            clients.append(client)
            urls.append(url)
        yield clients, f"{what} at {', '.join(urls)}, {each}{shape}"


@asynccontextmanager
async def _one_backend(config: DemoConfig, slots: int) -> AsyncIterator[tuple[LLMClient, str, str]]:
    """One backend of the demo: its client, its URL and what it is."""
    if config.backend == "local":
        from forge_rt.backends.local import DEFAULT_MODEL, LocalModelServer

        async with (
            LocalModelServer.start(
                config.model or DEFAULT_MODEL, n_ctx=config.n_ctx * slots, n_parallel=slots
            ) as server,
            LlamaServerClient(server.url, generation="raw") as client,
        ):
            yield client, server.url, f"embedded {server.model.name} (llama.cpp)"
    elif config.backend == "sim":
        async with (
            SimBackend.serve(demo_sim_config(config, slots=slots)) as sim,
            LlamaServerClient(sim.url) as client,
        ):
            yield client, sim.url, f"simulated 0.5B model (x{config.sim_speed:g} speed)"
    else:
        options: dict[str, object] = {"model": config.model}
        if config.backend_api_key is not None and config.backend_kind != "ollama":
            options["api_key"] = config.backend_api_key.get_secret_value()
        async with make_client(config.backend_kind, config.backend, **options) as client:
            yield client, config.backend, f"{config.backend_kind} server"


async def run_demo(
    config: DemoConfig,
    *,
    on_event: EventSink | None = None,
    on_tick: TickSink | None = None,
    tick_s: float = 0.25,
    agents: Sequence[AgentSpec] = AGENTS,
) -> DemoReport:
    """Run the demo and return what it measured.

    ``on_event`` gets every event as it happens; ``on_tick`` gets the monitor every ``tick_s``
    seconds (a live view redraws from it). ``agents`` must hold exactly one non-background
    agent (the voice request). Raises the typed error of a backend that fails.
    """
    voices = [a for a in agents if not a.background]
    if len(voices) != 1:
        raise ValueError(f"the demo needs exactly one voice agent, got {len(voices)}")
    monitor = DemoMonitor(on_event=on_event)
    demo = _Demo(config, monitor, agents, tick_s)
    report: DemoReport | None = None
    failure: ForgeError | None = None
    async with trio.open_nursery() as nursery:
        if on_tick is not None:
            nursery.start_soon(_tick, monitor, on_tick, tick_s)
        # Caught here and re-raised below so the caller gets the typed error itself rather
        # than an exception group from this nursery.
        try:
            report = await demo.run()
        except ForgeError as exc:
            failure = exc
        finally:
            nursery.cancel_scope.cancel()
    if on_tick is not None:
        on_tick(monitor)
    if failure is not None:
        raise failure
    assert report is not None
    return report


async def _tick(monitor: DemoMonitor, on_tick: TickSink, tick_s: float) -> None:
    """Hand the monitor to ``on_tick`` every ``tick_s`` seconds until cancelled."""
    while True:
        on_tick(monitor)
        await trio.sleep(tick_s)


class _Demo:
    """One run: the backend, the session, the agents and the measurements."""

    def __init__(
        self,
        config: DemoConfig,
        monitor: DemoMonitor,
        agents: Sequence[AgentSpec],
        tick_s: float,
    ) -> None:
        self.config = config
        self.monitor = monitor
        self.agents = list(agents)
        self.tick_s = tick_s
        self.workflows: dict[str, Workflow] = {}
        self.fatal: list[ForgeError] = []
        self.voice_arrived: float | None = None
        self.contended = False
        self.prewarmed: dict[str, WorkflowHandle] = {}
        self.prewarm_tokens: int | None = None
        self.idle_ttft: float | None = None
        self.baseline_calls = 0
        for spec in self.agents:
            workflow = spec.workflow(
                tool_seconds=config.tool_seconds,
                on_tool=monitor.on_tool,
                constrain=config.constrain,
            )
            self.workflows[spec.name] = workflow
            monitor.register(
                spec.name, spec.role, workflow, self._priority(spec), background=spec.background
            )

    def _priority(self, spec: AgentSpec) -> int:
        """The agent's priority: background or voice."""
        return self.config.background_priority if spec.background else self.config.voice_priority

    async def run(self) -> DemoReport:
        """Open the backend and the session, run every agent, measure."""
        config, monitor = self.config, self.monitor
        monitor.note("demo", "backend", f"starting the {config.describe_backend()}")
        lines = config.lines(len(self.agents))
        async with open_backend(config, lines=lines) as (clients, label):
            monitor.note("demo", "backend", f"backend: {label}")
            sampling = Sampling(
                temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed
            )
            tasks = {a.task: a.name for a in self.agents}
            observed = [ObservedClient(client, monitor, tasks) for client in clients]
            async with Session.open(
                clients=observed,
                slot_policy=PreemptPolicy.ALWAYS,
                cache_lines=lines,
                max_iterations=config.max_iterations,
                sampling=sampling,
            ) as session:
                await self._prewarm(session)
                busy_before = (await session.slot.stats()).busy_s
                started = monitor.now()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._poll, session)
                    async with trio.open_nursery() as agents:
                        for spec in self.agents:
                            if spec.background:
                                agents.start_soon(self._agent, session, spec, agents.cancel_scope)
                            else:
                                agents.start_soon(
                                    self._voice, session, spec, agents.cancel_scope, started
                                )
                    nursery.cancel_scope.cancel()
                ended = max(
                    (v.ended_at for v in monitor.agents.values() if v.ended_at), default=started
                )
                run_busy = (await session.slot.stats()).busy_s - busy_before
                if not self.fatal:
                    await self._idle_voice(session)
                stats = await self._refresh(session)
        if self.fatal:
            raise self.fatal[0]
        return DemoReport(
            backend=label,
            agents=tuple(self._outcome(spec) for spec in self.agents),
            voice_arrived_s=None if self.voice_arrived is None else self.voice_arrived - started,
            contended=self.contended,
            preemptions=stats.preemptions,
            continued=stats.continued,
            restarted=stats.restarted,
            tokens_redecoded=stats.tokens_redecoded,
            prompt_tokens_reprocessed=stats.prompt_tokens_reprocessed,
            prompt_tokens_resumed=stats.prompt_tokens_resumed,
            prewarm_tokens=self.prewarm_tokens,
            voice_idle_ttft_s=self.idle_ttft,
            baseline_calls=self.baseline_calls,
            slot_calls=stats.completed,
            slot_busy_s=run_busy,
            wall_s=ended - started,
            started_at_s=started,
        )

    async def _prewarm(self, session: Session) -> None:
        """Start the voice agent's workflow and process its prefix before anything else runs,
        as a voice assistant does when it starts: its line holds the prefix from then on."""
        for spec in self.agents:
            if spec.background:
                continue
            handle = await session.start(
                self.workflows[spec.name], name=spec.name, priority=self._priority(spec)
            )
            self.prewarm_tokens = await handle.prewarm()
            self.baseline_calls += 1
            self.prewarmed[spec.name] = handle
            self.monitor.note(
                spec.name, "prewarm", f"prefix processed: {self.prewarm_tokens} prompt tokens"
            )

    async def _idle_voice(self, session: Session) -> None:
        """The run's baseline: the voice agent's second question, asked on the idle slot."""
        spec = IDLE_VOICE
        handle = await session.start(
            self.workflows[spec.name], name=f"{spec.name}-idle", priority=self._priority(spec)
        )
        arrived = self.monitor.now()
        first: list[float] = []

        async def on_chunk(chunk: StreamChunk) -> None:
            if not first and isinstance(chunk, TextDeltaChunk | ToolCallDeltaChunk):
                first.append(self.monitor.now())

        try:
            result = await handle.send(
                spec.task, deadline=self.config.agent_deadline, on_chunk=on_chunk
            )
        except ForgeError as exc:
            self.monitor.note(spec.name, "idle", f"the idle-slot request failed: {exc}")
            stats = handle.last_stats
            self.baseline_calls += stats.inferences if stats is not None else 0
        else:
            self.baseline_calls += result.stats.inferences
        if first:
            self.idle_ttft = first[0] - arrived

    async def _poll(self, session: Session) -> None:
        """Refresh the monitor's slot statistics (and a fleet's lanes) until cancelled."""
        while True:
            await self._refresh(session)
            await trio.sleep(self.tick_s)

    async def _refresh(self, session: Session) -> SlotStats:
        """The slot's statistics now, given to the monitor with a fleet's lanes."""
        stats, lanes = await slot_report(session.slot)
        self.monitor.lane_reports(lanes)
        self.monitor.slot_stats(stats)
        return stats

    async def _voice(
        self, session: Session, spec: AgentSpec, scope: trio.CancelScope, started: float
    ) -> None:
        """Wait for the trigger (or the fixed time), then run the voice agent."""
        if self.config.voice_at is None:
            # Set once a background agent is mid-generation, or once all of them have ended.
            await self.monitor.voice_trigger.wait()
        else:
            await trio.sleep(max(0.0, started + self.config.voice_at - self.monitor.now()))
        self.voice_arrived = self.monitor.now()
        self.contended = any(
            not view.ended for view in self.monitor.agents.values() if view.background
        )
        await self._agent(session, spec, scope)

    async def _agent(self, session: Session, spec: AgentSpec, scope: trio.CancelScope) -> None:
        """Run one agent's turn; a backend failure cancels the others."""
        monitor = self.monitor
        monitor.begin(spec.name)
        handle = self.prewarmed.get(spec.name) or await session.start(
            self.workflows[spec.name], name=spec.name, priority=self._priority(spec)
        )
        try:
            result = await handle.send(
                spec.task,
                deadline=self.config.agent_deadline,
                on_chunk=monitor.chunk_sink(spec.name),
                on_message=monitor.message_sink(spec.name),
            )
        except _FATAL as exc:
            monitor.fail(spec.name, exc)
            self.fatal.append(exc)
            scope.cancel()  # the backend is broken: the other agents cannot do better
            return
        except WorkflowCancelledError as exc:
            deadline = self.config.agent_deadline
            monitor.fail(spec.name, exc, reason=f"its {deadline:g} s deadline passed")
            return
        except ForgeError as exc:
            monitor.fail(spec.name, exc)  # the model failed its task: an outcome, reported
            return
        monitor.finish(spec.name, result.output)
        _log.debug(  # the demo's own view shows it
            "demo.agent_done",
            agent=spec.name,
            iterations=result.stats.iterations,
            rescued=result.stats.rescued,
        )

    def _outcome(self, spec: AgentSpec) -> AgentOutcome:
        """The agent's outcome from what the monitor saw."""
        view = self.monitor.agents[spec.name]
        return AgentOutcome(
            name=spec.name,
            role=spec.role,
            priority=view.priority,
            background=spec.background,
            ok=view.output is not None,
            output=view.output,
            error=view.failure,
            inferences=view.inferences,
            tool_calls=view.tool_calls,
            nudges=view.nudges,
            preempted=view.preempted,
            rescues=dict(view.rescues),
            ttfts_s=tuple(view.ttfts),
            started_s=view.started_at,
            ended_s=view.ended_at,
        )
