"""The front doors: ``WorkflowRunner`` for one call, ``Session`` for a long-running daemon.

``await WorkflowRunner(client).run(workflow, "text")`` spins up an actor system with a SlotWorker
and one WorkflowActor for the call. A ``Session`` keeps one ``ActorSystem``, one shared
SlotWorker and an optional BudgetMonitor, and runs many concurrent workflows (each its own
actor, each a ``WorkflowHandle`` that can take many turns).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import msgspec
import trio

from actors import ActorRef, ActorSystem, quiet_logger
from forge_rt.context import ContextManager
from forge_rt.core import LLMClient, Sampling, Workflow
from forge_rt.errors import ConfigurationError, SessionWorkflowMismatchError, WorkflowCancelledError
from forge_rt.guardrails import (
    Allow,
    ConstraintDecision,
    Deny,
    GuardrailOptions,
    Policy,
    choose_constraint,
    workflow_tool_specs,
    workflow_writes,
)
from forge_rt.runtime._approvals import ApprovalCallback, ApprovalGate, ApprovalRequest, gated
from forge_rt.runtime._budget import BudgetMonitor, BudgetSource
from forge_rt.runtime._durable import SessionLog, decode_state, restored_history
from forge_rt.runtime._fleet import Fleet
from forge_rt.runtime._leases import LeaseKeeper, SessionLease
from forge_rt.runtime._scheduling import DEFAULT_MAX_WAIT_S, PreemptPolicy
from forge_rt.runtime._slot import InferenceSlot, SlotWorker
from forge_rt.runtime._slot_limits import DEFAULT_RETRY, BackendRetry, StallLimits
from forge_rt.runtime._step import RunStats
from forge_rt.runtime._workflow_actor import (
    ChunkSink,
    MessageSink,
    TurnOptions,
    WorkflowActor,
    WorkflowResult,
    _GetHistory,
    _Prewarm,
    _Prewarmed,
    _PrewarmRefused,
    _Turn,
    _TurnFailed,
    unique_actor_name,
)
from forge_rt.store import SessionInfo, SessionStore, store_for
from forge_rt.trace import TraceSink, opened_trace

__all__ = ["Session", "WorkflowHandle", "WorkflowRunner"]

# Each inference's default deadline: well past the longest call the embedded 1.5B makes on the
# 2-core CPU (p95 of a whole run is ~140 s), and the proxy's request deadline too.
DEFAULT_INFERENCE_DEADLINE_S = 600.0

_log = quiet_logger(__name__)


def _decide_constraint(
    workflow: Workflow, client: LLMClient, options: GuardrailOptions
) -> ConstraintDecision:
    """The workflow's constraint, decided once for the actor (narrowed per iteration there),
    in the reply shape of its guardrail options."""
    return choose_constraint(
        workflow.constrain,
        client.capabilities,
        workflow_tool_specs(workflow),
        backend=client.model,
        shape=options.call_shape(writes=workflow_writes(workflow)),
    )


class WorkflowHandle:
    """One running workflow actor: send it turns, cancel a turn, read its history."""

    def __init__(
        self,
        ref: ActorRef[Any],
        name: str,
        workflow: Workflow,
        priority: int,
        *,
        inference_deadline: float | None = None,
        stored: SessionInfo | None = None,
        approvals: ApprovalGate | None = None,
    ) -> None:
        self._ref = ref
        self._inference_deadline = inference_deadline
        self._approvals = approvals or ApprovalGate(
            workflow=workflow.name, actor=name, approve={}, withheld={}, callback=None
        )
        self.name = name
        self.workflow = workflow
        self.priority = priority
        self.stored = stored
        """The session as the store held it when this handle started it (None: a new one)."""
        self.interrupted = stored is not None and stored.status == "in_turn"
        """A turn was running when the process that ran it stopped: ``resume()`` finishes it."""
        self._scope: trio.CancelScope | None = None
        self.last_cancelled: WorkflowCancelledError | None = None
        self.last_stats: RunStats | None = None

    async def send(
        self,
        user_message: str,
        *,
        deadline: float | None = None,
        inference_deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
        on_message: MessageSink | None = None,
        prompt_variables: Mapping[str, str] | None = None,
        priority: int | None = None,
    ) -> WorkflowResult:
        """Run one user turn to its terminal tool; raises the loop's typed errors.

        ``inference_deadline`` bounds each inference (default: the session's, 600 s).
        """
        options = TurnOptions(
            priority=self.priority if priority is None else priority,
            deadline=deadline,
            inference_deadline=(
                self._inference_deadline if inference_deadline is None else inference_deadline
            ),
            on_chunk=on_chunk,
            on_message=on_message,
            prompt_variables=prompt_variables,
        )
        return await self._turn(user_message, options)

    async def prewarm(
        self, *, prompt_variables: Mapping[str, str] | None = None, priority: int | None = None
    ) -> int | None:
        """Process the workflow's system prompt and tools on the backend now, before its first
        turn, so that turn's prompt is mostly cached (a voice assistant's first spoken request
        pays for its user turn only). With ``Session.open(cache_lines=...)`` the prefix stays
        on the workflow's own line; a workflow at urgent priority keeps that line from
        background work. Returns the prompt tokens processed (None if the backend does not
        say). Raises the backend's typed errors, a ``PromptTemplateError`` for a missing prompt
        variable, and ``RuntimeError`` after the first turn, when the history is the prefix.
        """
        reply = await self._ref.ask(
            _Prewarm(prompt_variables, self.priority if priority is None else priority)
        )
        if isinstance(reply, _PrewarmRefused):
            raise reply.error
        assert isinstance(reply, _Prewarmed)
        return reply.prompt_tokens

    async def resume(self, **options: Any) -> WorkflowResult:
        """Continue a cancelled turn from where it stopped (no new user message)."""
        options.setdefault("inference_deadline", self._inference_deadline)
        result = await self._turn(None, TurnOptions(priority=self.priority, **options))
        self.interrupted = False
        return result

    async def _turn(self, user_message: str | None, options: TurnOptions) -> WorkflowResult:
        scope = trio.CancelScope()
        self._scope = scope
        try:
            reply = await self._ref.ask(_Turn(user_message, options, scope))
        except trio.Cancelled:
            scope.cancel()  # the caller went away: stop the loop, its inference and its tools
            raise
        finally:
            self._scope = None
        if isinstance(reply, _TurnFailed):
            self.last_stats = reply.stats
            if isinstance(reply.error, WorkflowCancelledError):
                self.last_cancelled = reply.error
            raise reply.error
        result: WorkflowResult = reply.result
        self.last_stats = result.stats
        return result

    def cancel(self) -> None:
        """Cancel the turn in progress; it raises WorkflowCancelledError (resumable)."""
        if self._scope is not None:
            self._scope.cancel()

    async def history(self, *, persisted: bool = True) -> tuple[Any, ...]:
        """The message history; ``persisted`` leaves out nudges and failed attempts."""
        result: tuple[Any, ...] = await self._ref.ask(_GetHistory(persisted))
        return result

    # Approvals (see runtime/_approvals.py): answered directly, not through the actor's
    # mailbox, which the waiting turn holds.

    def pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """The calls of this workflow waiting for ``approve`` or ``deny`` now."""
        return self._approvals.pending()

    async def next_approval(self) -> ApprovalRequest:
        """The oldest call waiting for approval, waiting until one is (cancellable)."""
        return await self._approvals.next_request()

    def approve(self, call_id: str) -> None:
        """Let the waiting call ``call_id`` run (``ApprovalNotPendingError`` if none waits)."""
        self._approvals.decide(call_id, Allow())

    def deny(self, call_id: str, reason: str) -> None:
        """Decline the waiting call ``call_id``: the model gets "declined: ``reason``" as its
        result, not counted as a tool error (``ApprovalNotPendingError`` if none waits)."""
        self._approvals.decide(call_id, Deny(reason))


class _Defaults(msgspec.Struct, kw_only=True):
    """What a Session's workflows get unless ``start()`` says otherwise."""

    max_iterations: int = 15
    inference_deadline: float | None = DEFAULT_INFERENCE_DEADLINE_S
    sampling: Sampling = msgspec.field(default_factory=Sampling)
    guardrails: GuardrailOptions = msgspec.field(default_factory=GuardrailOptions)
    policy: Policy | None = None
    on_approval: ApprovalCallback | None = None


class Session:
    """Many workflows on one ``ActorSystem``, sharing a SlotWorker -- or a :class:`Fleet` of
    several backends' -- and a BudgetMonitor."""

    def __init__(
        self,
        system: ActorSystem,
        client: LLMClient,
        slot: InferenceSlot,
        budget: BudgetMonitor | None,
        defaults: _Defaults,
        trace: TraceSink | None = None,
        leases: LeaseKeeper | None = None,
    ) -> None:
        self.system = system
        self.client = client
        self.slot = slot
        self.budget = budget
        self.store = None if leases is None else leases.store
        self._defaults = defaults
        self.trace = trace
        self._leases = leases

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        client: LLMClient | None = None,
        *,
        clients: Sequence[LLMClient] = (),
        lanes: int = 1,
        urgent_lanes: int = 0,
        slot_policy: PreemptPolicy | str = PreemptPolicy.ALWAYS,
        max_preemptions: int = 3,
        max_queue: int = 256,
        max_wait_s: float | None = DEFAULT_MAX_WAIT_S,
        cache_lines: int | None = None,
        stall: StallLimits | None = None,
        retry: BackendRetry | None = DEFAULT_RETRY,
        budget_sources: Sequence[BudgetSource] = (),
        budget_interval: float | None = 5.0,
        max_iterations: int = 15,
        inference_deadline: float | None = DEFAULT_INFERENCE_DEADLINE_S,
        sampling: Sampling | None = None,
        guardrails: GuardrailOptions | None = None,
        store: SessionStore | str | os.PathLike[str] | None = None,
        lease: SessionLease | None = None,
        trace: TraceSink | str | os.PathLike[str] | None = None,
        policy: Policy | None = None,
        on_approval: ApprovalCallback | None = None,
    ) -> AsyncIterator[Session]:
        """Start the actors; on exit every workflow, the slot and the monitor are cancelled.

        ``client``: the backend; or ``clients``: several backends, as one :class:`Fleet` (each
        its own SlotWorker with the slot options below; a workflow's calls stay on the backend
        holding its prompt, a new workflow goes to the least loaded one, an urgent call where
        it starts soonest). Exactly one of the two. Backends may serve different models (each
        client names its ``model``): a workflow's calls then go to backends of the model its
        ``start`` asks for. ``lanes``: run up to
        that many calls at once on each backend (a server that batches: vLLM, llama-server
        ``--parallel``), as a fleet of that many lanes over it; ``urgent_lanes`` of them take
        urgent calls only (priority 0 or more urgent): headroom below the server's own limit
        (vLLM's ``max_num_seqs``), so an urgent call cuts no running work.

        ``store``: keep sessions durably -- a :class:`~forge_rt.store.SessionStore`, or where
        one is (an SQLite file path, or a ``postgresql://`` URL: opened here, closed on exit).
        Then each workflow started with a ``name`` is that stored session: every accepted
        message, tool result and control-state change is committed before it is used, and
        after a restart ``start(workflow, name=...)`` carries on from the store
        (``sessions()`` lists what it holds). Several processes may share one store: each
        session is run by one at a time, the one holding its lease (``lease``: this process's
        name and how long a claim lasts unrenewed, :class:`SessionLease`; a session
        another live process runs is a ``SessionLeasedError`` at ``start``), and
        ``orphaned()`` lists the turns of processes that died, for this one to finish.

        ``max_wait_s``: the starvation bound -- a call that has waited this long runs next,
        ahead of more urgent calls that have not (see ``SlotWorker.start``); ``max_queue``: a
        full queue drops its least urgent, youngest call for a more urgent arrival.
        ``cache_lines``: use that many of the backend's KV slots as cache lines (llama-server
        started with ``--parallel`` at least that; see ``SlotWorker.start``). ``stall``: how
        long a running call may produce nothing before it fails with ``InferenceStalledError``
        and the slot moves on (``StallLimits``; on by default). ``retry``: how long a backend
        that is briefly away (refused or reset before the reply, a 503) is ridden out before a
        queued call fails (``BackendRetry``; 30 s by default, ``None`` to fail at once; a
        fleet of several backends moves the call to another at once instead).
        ``inference_deadline``: the default bound on each inference of a turn, queue wait
        included (600 s; ``None`` for none): the last word after the stall limits, for a
        backend that trickles just fast enough to pass them. ``trace``: a folder (one JSONL
        file per workflow, see ``forge_rt.trace``), a ``.jsonl`` file, or a ``TraceSink`` of
        the caller's; every turn's requests, replies, verdicts, tools and slot events go there.
        ``policy``: the tool policy every workflow runs under unless ``start()`` gives its own
        (denied tools withheld, calls to approve paused; see ``guardrails/_policy.py``);
        ``on_approval``: who answers those pauses (without it, ``WorkflowHandle.approve``).
        """
        if (client is None) == (not clients):
            raise ConfigurationError(
                "Session.open needs one backend: give client=, or clients= (several, as a fleet)"
            )
        if lanes < 1 or not 0 <= urgent_lanes < lanes * max(len(clients), 1):
            raise ConfigurationError(
                f"Session.open: lanes must be >= 1 and urgent_lanes fewer than all the lanes; "
                f"got lanes={lanes}, urgent_lanes={urgent_lanes}"
            )
        if lease is not None and store is None:
            raise ConfigurationError("Session.open: a lease needs a store= to hold it in")
        async with AsyncExitStack() as stack:
            if isinstance(store, str | os.PathLike):
                store = await stack.enter_async_context(store_for(store))
            leases = (
                None
                if store is None
                else await stack.enter_async_context(
                    LeaseKeeper(store, lease or SessionLease()).holding()
                )
            )
            sink = await stack.enter_async_context(opened_trace(trace))
            system = await stack.enter_async_context(ActorSystem.open(shutdown="cancel"))
            slot_options: dict[str, Any] = {
                "policy": slot_policy,
                "max_preemptions": max_preemptions,
                "max_queue": max_queue,
                "max_wait_s": max_wait_s,
                "cache_lines": cache_lines,
                "stall": stall,
                "retry": retry,
            }
            backends = list(clients) if client is None else [client]
            slot: InferenceSlot
            if len(backends) > 1 or lanes > 1:
                if len(backends) > 1:
                    # Another backend serves meanwhile: a call a backend fails moves at once,
                    # not after riding out the outage behind every call queued there.
                    slot_options["retry"] = None
                slot = await Fleet.start(
                    system,
                    [b for b in backends for _ in range(lanes)],
                    reserved=urgent_lanes,
                    **slot_options,
                )
            else:
                slot = await SlotWorker.start(system, backends[0], **slot_options)
            budget = (
                await BudgetMonitor.start(system, budget_sources, interval=budget_interval)
                if budget_sources
                else None
            )
            defaults = _Defaults(
                max_iterations=max_iterations,
                inference_deadline=inference_deadline,
                sampling=sampling or Sampling(),
                guardrails=guardrails or GuardrailOptions(),
                policy=policy,
                on_approval=on_approval,
            )
            yield cls(system, slot.client, slot, budget, defaults, trace=sink, leases=leases)

    @classmethod
    def on_slot(cls, slot: SlotWorker) -> Session:
        """A session over a slot already started, in that slot's actor system, with the
        default options: ``await Session.on_slot(slot).run(workflow, "text")`` runs a whole
        workflow turn whose inference calls are scheduled on ``slot`` one by one, interleaved
        with every other caller's.

        Nothing is opened here, so nothing needs closing: ``run`` stops the workflow actor it
        spawned, and the slot lives as long as its actor system. For options (guardrails,
        sampling, budgets, a store, traces) start the session with ``Session.open``.
        """
        return cls(slot.system, slot.client, slot, None, _Defaults())

    async def start(
        self,
        workflow: Workflow,
        *,
        name: str | None = None,
        priority: int = 0,
        max_iterations: int | None = None,
        context: ContextManager | None = None,
        sampling: Sampling | None = None,
        guardrails: GuardrailOptions | None = None,
        resume_from: WorkflowCancelledError | None = None,
        policy: Policy | None = None,
        on_approval: ApprovalCallback | None = None,
        model: str | None = None,
    ) -> WorkflowHandle:
        """Spawn a workflow actor; each ``send`` on the handle is one user turn.

        ``guardrails`` replaces the session's guardrail options for this workflow (e.g.
        ``GuardrailOptions(rescue=False)`` for an ablation).
        ``resume_from`` seeds the actor with a cancelled run's messages, steps and iteration.
        With a store, ``name`` is the stored session's (a new random one if not given): a
        stored session comes back as it was (``handle.interrupted``: resume its turn), and one
        of another workflow is a ``SessionWorkflowMismatchError``.
        ``policy`` / ``on_approval`` replace the session's (see ``open``); a policy that
        denies a tool the workflow cannot do without raises ``PolicyError`` here.
        ``model``: the model its calls ask for, where the session's backends serve several
        (``ModelNotServedError`` here if none serves it; ``None``: the first backend's). Not
        stored: a stored session started again runs on the model its ``start`` names.
        """
        if name is None:
            stored_name = f"{workflow.name}-{uuid.uuid4().hex[:12]}"
            name = stored_name if self.store is not None else unique_actor_name(workflow.name)
        workflow, approvals = gated(
            workflow,
            policy if policy is not None else self._defaults.policy,
            actor=name,
            callback=on_approval if on_approval is not None else self._defaults.on_approval,
        )
        spawn: dict[str, Any] = {
            "max_iterations": max_iterations,
            "context": context,
            "sampling": sampling,
            "guardrails": guardrails,
            "approvals": approvals,
            "model": model,
        }
        if self.store is not None:
            return await self._start_stored(
                workflow, name=name, priority=priority, resume_from=resume_from, spawn=spawn
            )
        ref = await self._spawn(workflow, name, seed=_resume_seed(resume_from), **spawn)
        return WorkflowHandle(
            ref,
            name,
            workflow,
            priority,
            inference_deadline=self._defaults.inference_deadline,
            approvals=approvals,
        )

    async def sessions(self) -> list[SessionInfo]:
        """Every session the store holds, most recently changed first (``status`` ``"in_turn"``:
        a turn was running when its process stopped). Only with ``Session.open(store=...)``."""
        return await self._required_store().sessions()

    async def orphaned(self) -> list[SessionInfo]:
        """The stored sessions left mid-turn that no live process runs -- their process died
        and its lease expired, or it was this process in an earlier life (the same
        ``SessionLease.owner``) -- most recently changed first: ``start`` each and ``resume``
        its turn. Another process may take one first (``start`` then raises
        ``SessionLeasedError``)."""
        leases = self._required_leases()
        return [info for info in await leases.store.sessions() if leases.orphaned(info)]

    async def forget(self, name: str) -> bool:
        """Delete the stored session ``name`` and its lease (stop its workflow first); False
        if none."""
        leases = self._required_leases()
        leases.held.discard(name)
        return await leases.store.delete(name)

    def _required_store(self) -> SessionStore:
        return self._required_leases().store

    def _required_leases(self) -> LeaseKeeper:
        if self._leases is None:
            raise ConfigurationError(
                "this Session keeps no sessions: open it with Session.open(client, store=PATH)"
            )
        return self._leases

    async def _start_stored(
        self,
        workflow: Workflow,
        *,
        name: str,
        priority: int,
        resume_from: WorkflowCancelledError | None,
        spawn: dict[str, Any],
    ) -> WorkflowHandle:
        """``start`` with a store: the stored session ``name`` if there is one, else a new one,
        run here only while this process holds its lease."""
        leases = self._required_leases()
        async with leases.claimed(name):
            store = leases.store
            stored = await store.load(name)
            seed: dict[str, Any]
            log = SessionLog(store, name, workflow.name)
            if stored is not None:
                if stored.info.workflow != workflow.name:
                    raise SessionWorkflowMismatchError(
                        f"session {name!r} in {store.description} is a {stored.info.workflow!r} "
                        f"session; start it with that workflow, not {workflow.name!r}",
                        session=name,
                        stored=stored.info.workflow,
                        requested=workflow.name,
                    )
                if resume_from is not None:
                    raise ConfigurationError(
                        f"session {name!r} is already stored; resume_from seeds only a new session"
                    )
                state = decode_state(stored, store)
                log.version = stored.info.version
                seed = {
                    "seed_messages": restored_history(stored.messages, state),
                    "restored": state,
                }
                _log.info(
                    "session.restored",
                    session=name,
                    messages=stored.info.messages,
                    status=stored.info.status,
                    iteration=state.iteration,
                )
            else:
                seed = _resume_seed(resume_from)
            ref = await self._spawn(workflow, name, seed={**seed, "log": log}, **spawn)
            return WorkflowHandle(
                ref,
                name,
                workflow,
                priority,
                inference_deadline=self._defaults.inference_deadline,
                stored=stored.info if stored is not None else None,
                approvals=spawn["approvals"],
            )

    async def _spawn(
        self,
        workflow: Workflow,
        actor_name: str,
        *,
        max_iterations: int | None,
        context: ContextManager | None,
        sampling: Sampling | None,
        guardrails: GuardrailOptions | None,
        approvals: ApprovalGate,
        model: str | None,
        seed: dict[str, Any],
    ) -> ActorRef[Any]:
        options = guardrails or self._defaults.guardrails
        decision = _decide_constraint(workflow, self.slot.client_for(model), options)
        return await self.system.spawn(
            lambda: WorkflowActor(
                workflow,
                self.slot,
                name=actor_name,
                max_iterations=max_iterations or self._defaults.max_iterations,
                context=context,
                sampling=sampling or self._defaults.sampling,
                guardrail_options=options,
                constraint=decision.constraint,
                constraint_reason=decision.reason,
                budget=self.budget.ref if self.budget is not None else None,
                trace=self.trace,
                approvals=approvals,
                model=model,
                **seed,
            ),
            name=actor_name,
        )

    async def run(
        self,
        workflow: Workflow,
        user_message: str,
        *,
        name: str | None = None,
        priority: int = 0,
        max_iterations: int | None = None,
        context: ContextManager | None = None,
        sampling: Sampling | None = None,
        guardrails: GuardrailOptions | None = None,
        deadline: float | None = None,
        inference_deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
        on_message: MessageSink | None = None,
        prompt_variables: Mapping[str, str] | None = None,
        model: str | None = None,
    ) -> WorkflowResult:
        """Run one turn of ``workflow`` in a fresh actor, then stop it (options as ``start``
        and ``WorkflowHandle.send``)."""
        handle = await self.start(
            workflow,
            name=name,
            priority=priority,
            max_iterations=max_iterations,
            context=context,
            sampling=sampling,
            guardrails=guardrails,
            model=model,
        )
        try:
            return await handle.send(
                user_message,
                deadline=deadline,
                inference_deadline=inference_deadline,
                on_chunk=on_chunk,
                on_message=on_message,
                prompt_variables=prompt_variables,
            )
        finally:
            with trio.CancelScope(shield=True):  # stopping must finish even if we were cancelled
                await self.system.stop(handle._ref, mode="cancel")


def _resume_seed(resume_from: WorkflowCancelledError | None) -> dict[str, Any]:
    """A workflow actor's seed from a cancelled run: its messages, steps and iteration."""
    if resume_from is None:
        return {}
    return {
        "seed_messages": resume_from.messages,
        "completed_steps": resume_from.completed_steps,
        "iteration": resume_from.iteration,
    }


class WorkflowRunner:
    """One call, one workflow: ``await WorkflowRunner(client).run(workflow, "text")``."""

    def __init__(
        self,
        client: LLMClient,
        *,
        max_iterations: int = 15,
        context: ContextManager | None = None,
        sampling: Sampling | None = None,
        guardrails: GuardrailOptions | None = None,
        policy: Policy | None = None,
        on_approval: ApprovalCallback | None = None,
    ) -> None:
        self.client = client
        self._policy = policy  # as Session.open's
        self._on_approval = on_approval
        self._max_iterations = max_iterations
        self._context = context
        self._sampling = sampling
        self._guardrails = guardrails

    async def run(
        self,
        workflow: Workflow,
        user_message: str,
        *,
        priority: int = 0,
        deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
        on_message: MessageSink | None = None,
        prompt_variables: Mapping[str, str] | None = None,
    ) -> WorkflowResult:
        """Run ``workflow`` on ``user_message`` until its terminal tool succeeds."""
        return await self._go(
            workflow,
            user_message,
            None,
            priority=priority,
            deadline=deadline,
            on_chunk=on_chunk,
            on_message=on_message,
            prompt_variables=prompt_variables,
        )

    async def resume(
        self,
        error: WorkflowCancelledError,
        workflow: Workflow,
        *,
        priority: int = 0,
        deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
        on_message: MessageSink | None = None,
    ) -> WorkflowResult:
        """Continue a cancelled run from its messages, completed steps and iteration."""
        return await self._go(
            workflow,
            None,
            error,
            priority=priority,
            deadline=deadline,
            on_chunk=on_chunk,
            on_message=on_message,
            prompt_variables=None,
        )

    async def _go(
        self,
        workflow: Workflow,
        user_message: str | None,
        resume_from: WorkflowCancelledError | None,
        **turn: Any,
    ) -> WorkflowResult:
        async with Session.open(
            self.client,
            max_iterations=self._max_iterations,
            sampling=self._sampling,
            guardrails=self._guardrails,
            policy=self._policy,
            on_approval=self._on_approval,
        ) as session:
            handle = await session.start(
                workflow,
                priority=turn["priority"],
                context=self._context,
                resume_from=resume_from,
            )
            if user_message is None:
                turn.pop("prompt_variables")
                turn.pop("priority")
                return await handle.resume(**turn)
            return await handle.send(user_message, **turn)
