"""Fleet: several inference backends as one slot, each call placed on one of them.

Each backend (a *lane*) keeps its own SlotWorker: its queue, priorities, preemption and cache
lines, all as on one backend. The fleet only decides where a call goes, from what it sent each
lane and has not heard back about (its calls in flight there, queued or running):

- a call of a workflow (its ``affinity_key``) goes where that workflow's earlier calls went:
  its prompt is in that backend's KV cache;
- a workflow's first call goes to the lane with the least work ahead of it -- the calls in
  flight there as urgent as it or more -- then the fewest calls in flight, then the fewest
  workflows pinned (an idle fleet spreads its conversations, and their caches, over the lanes);
- an urgent call (``priority`` at ``urgent_priority`` or more urgent) goes where it starts
  soonest, whatever its workflow's lane: an idle lane, else the one with the fewest calls as
  urgent as it, where the lane's SlotWorker preempts the less urgent running call. The
  workflow then stays there (its prompt is there now).

A backend that fails a call -- refused, reset, an error status, a stall -- leaves the rotation
for ``rejoin_after_s``, and the call is placed again on another lane. A reply cut part-way
goes on there from the text it had streamed, where that lane's backend takes an assistant
prefill (raw generation makes the prompt portable: all lanes serve the same model) and the
partial text is a beginning its constraint can continue: the caller sees one reply, nothing
taken back (counted: :attr:`Fleet.continued`). Otherwise it restarts there, after a
``ResetChunk`` tells the caller to drop what it streamed (counted: :attr:`Fleet.restarted`). The
calls queued on that lane fail over the same way as their turn comes (a lane of a fleet rides
out no outage by default: the others serve meanwhile). After ``rejoin_after_s`` the lane is in
the rotation again; a call there that fails sends it out again. A prompt too long for the
model (``ContextOverflowError``) is the same on every lane and goes to the caller; so does the
last lane's failure, when none is left.

A server that batches (vLLM, llama-server ``--parallel``) is several lanes over one client:
``Fleet.start(system, [client] * 4, reserved=1)`` runs up to four calls on it at once and keeps
the last lane for urgent calls only -- headroom below the server's own limit (vLLM's
``max_num_seqs``), because once that is full vLLM cannot displace a running request for an
urgent one, and cutting one here costs its work.

Backends may serve different models: each lane serves its client's ``model``. Where the lanes
name two models or more, a call goes only to lanes of the model its request names
(``InferenceRequest.model``; none: the first lane's), everything above holds among those lanes
(a workflow's pin, the least loaded, the urgent call's preemption, failover and continuation
from partial text), and a model no lane serves is a :class:`~forge_rt.errors.ModelNotServedError`
before anything is queued. Where they name one model, or none, every lane serves every call
whatever it names (a client's model name is then a label, as one server takes it).
:meth:`Fleet.client_for` is the client that answers what a model's backend can do
(capabilities, context length); ``client`` is the first lane's.

The inference servers are the distributed engine; the fleet schedules across them and never
re-implements them.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

import msgspec
import structlog
import trio

from actors import ActorSystem
from forge_rt.core import (
    InferenceRequest,
    LLMClient,
    LLMResponse,
    ReasoningDeltaChunk,
    ResetChunk,
    StreamChunk,
    TextDeltaChunk,
    ToolCallDeltaChunk,
)
from forge_rt.errors import BackendFailureError, ContextOverflowError, ModelNotServedError
from forge_rt.runtime._slot import ChunkSink, InferenceSlot, SlotWorker
from forge_rt.runtime._slot_executor import continuation_of, continued_request, with_prefill
from forge_rt.runtime._slot_limits import BackendRetry
from forge_rt.runtime._slot_stats import PriorityWaits, SlotStats

__all__ = ["DEFAULT_REJOIN_AFTER_S", "Fleet", "LaneReport", "slot_report"]

_log = structlog.get_logger(__name__)

DEFAULT_REJOIN_AFTER_S = 5.0
"""How long a backend that failed a call stays out of the rotation before it is tried again."""

PINS_KEPT = 4096
"""Workflows whose lane the fleet remembers, least recently used forgotten first: a chat
daemon's weeks of conversations do not grow it without bound (a forgotten workflow is placed
afresh, and only its cached prompt is lost)."""


class LaneReport(msgspec.Struct, frozen=True, kw_only=True):
    """One backend of a fleet, as ``/metrics`` and a dashboard show it: its SlotWorker's
    ``stats``, the model its client names, the calls the fleet has in flight there, whether it
    is in the rotation, and how often it failed a call and left it."""

    name: str
    model: str | None
    stats: SlotStats
    in_flight: int
    in_rotation: bool
    failovers: int


class Fleet:
    """Several backends' SlotWorkers behind the one ``infer`` a workflow calls (see the module
    docstring). Start one with :meth:`start`, or build it over SlotWorkers already started."""

    def __init__(
        self,
        lanes: Sequence[SlotWorker],
        *,
        urgent_priority: int = 0,
        rejoin_after_s: float = DEFAULT_REJOIN_AFTER_S,
        reserved: int = 0,
    ) -> None:
        if not lanes:
            raise ValueError("a Fleet needs at least one backend")
        if rejoin_after_s < 0:
            raise ValueError(f"rejoin_after_s must be >= 0, got {rejoin_after_s}")
        if not 0 <= reserved < len(lanes):
            raise ValueError(
                f"reserved lanes must be fewer than the {len(lanes)} lanes, got {reserved}"
            )
        self._reserved = frozenset(range(len(lanes) - reserved, len(lanes)))
        self.lanes = tuple(lanes)
        self.models = tuple(dict.fromkeys(m for lane in lanes if (m := lane.client.model)))
        """The models the lanes' clients name, first-named first (empty where none does)."""
        self._by_model = _lanes_by_model(lanes, self.models)
        self.name = "fleet"
        self.client: LLMClient = lanes[0].client
        self.system: ActorSystem = lanes[0].system
        self._urgent = urgent_priority
        self._rejoin_after_s = rejoin_after_s
        self._in_flight: list[Counter[int]] = [Counter() for _ in lanes]  # priority -> calls
        self._out_until = [-math.inf] * len(lanes)  # a lane out of the rotation, until then
        self._pins: OrderedDict[str, int] = OrderedDict()
        self.restarted = 0
        """Calls a failing backend cut or failed, restarted on another."""
        self.continued = 0
        """Calls a failing backend cut mid-reply, continued on another from their partial text."""
        self.failovers = [0] * len(lanes)
        """Per lane: the times it failed a call and left the rotation."""

    @classmethod
    async def start(
        cls,
        system: ActorSystem,
        clients: Sequence[LLMClient],
        *,
        urgent_priority: int = 0,
        rejoin_after_s: float = DEFAULT_REJOIN_AFTER_S,
        reserved: int = 0,
        retry: BackendRetry | None = None,
        **slot_options: Any,
    ) -> Fleet:
        """A SlotWorker per client, named ``lane0``, ``lane1``, ... (``slot_options`` as
        ``SlotWorker.start``'s), as one fleet; the last ``reserved`` lanes take urgent calls
        only. ``retry`` is each lane's (none by default: a call its backend fails moves to
        another lane at once)."""
        lanes = [
            await SlotWorker.start(
                system,
                client,
                name=f"lane{i}",
                urgent_priority=urgent_priority,
                retry=retry,
                **slot_options,
            )
            for i, client in enumerate(clients)
        ]
        return cls(
            lanes,
            urgent_priority=urgent_priority,
            rejoin_after_s=rejoin_after_s,
            reserved=reserved,
        )

    def place(
        self,
        *,
        priority: int = 0,
        affinity_key: str | None = None,
        avoid: frozenset[int] = frozenset(),
        model: str | None = None,
    ) -> int | None:
        """The lane a call at ``priority`` of the workflow ``affinity_key``, asking for
        ``model``, goes to now (see the module docstring; never one of ``avoid`` or out of the
        rotation); the workflow is pinned there. ``None``: no lane is left."""
        now = trio.current_time()
        open_lanes = [
            i for i in self._eligible(priority, avoid, model) if self._out_until[i] <= now
        ]
        if not open_lanes:
            return None
        pinned = self._pins.get(affinity_key) if affinity_key is not None else None
        if pinned in open_lanes and priority > self._urgent:
            self._pins.move_to_end(affinity_key)  # type: ignore[arg-type]
            return pinned
        pins = Counter(self._pins.values())
        ranked = sorted(
            open_lanes,
            key=lambda i: (self._ahead(i, priority), self._total(i), i != pinned, pins[i], i),
        )
        lane = ranked[0]
        if affinity_key is not None:
            self._pins[affinity_key] = lane
            self._pins.move_to_end(affinity_key)
            while len(self._pins) > PINS_KEPT:
                self._pins.popitem(last=False)
        return lane

    def _eligible(self, priority: int, avoid: frozenset[int], model: str | None) -> list[int]:
        """The lanes a call at ``priority`` asking for ``model`` may use, in or out of the
        rotation: lanes of that model, not ``avoid``, and not a reserved lane unless the call
        is urgent."""
        urgent = priority <= self._urgent
        return [
            i
            for i in self._serving(model)
            if i not in avoid and (urgent or i not in self._reserved)
        ]

    def client_for(self, model: str | None) -> LLMClient:
        """The client of the first lane serving ``model`` -- what answers that model's
        capabilities and context length (``ModelNotServedError`` where no lane does)."""
        return self.lanes[self._serving(model)[0]].client

    def _serving(self, model: str | None) -> tuple[int, ...]:
        """The lanes a call asking for ``model`` may go to (see the module docstring)."""
        if model is None or len(self._by_model) == 1:
            return next(iter(self._by_model.values()))  # the first lane's model, or every lane
        lanes = self._by_model.get(model)
        if lanes is None:
            raise ModelNotServedError(
                f"no backend of this fleet serves model {model!r}; it serves "
                f"{', '.join(repr(m) for m in self.models)}",
                model=model,
                served=self.models,
            )
        return lanes

    def lane_of(self, affinity_key: str) -> int | None:
        """The lane ``affinity_key``'s workflow is pinned to, if any."""
        return self._pins.get(affinity_key)

    def in_flight(self) -> tuple[int, ...]:
        """The calls in flight on each lane (queued or running), as the fleet counts them."""
        return tuple(self._total(i) for i in range(len(self.lanes)))

    def in_rotation(self) -> tuple[bool, ...]:
        """Whether each lane is in the rotation now."""
        now = trio.current_time()
        return tuple(until <= now for until in self._out_until)

    async def infer(
        self,
        request: InferenceRequest,
        *,
        priority: int = 0,
        deadline: float | None = None,
        on_chunk: ChunkSink | None = None,
        **options: Any,
    ) -> LLMResponse:
        """Run ``request`` on the lane :meth:`place` picks, and on another if that backend
        fails it (see the module docstring); options as ``SlotWorker.infer``, ``deadline``
        the whole call's, wherever it runs."""
        give_up_at = math.inf if deadline is None else trio.current_time() + deadline
        model = request.model
        self._serving(model)  # a model no lane serves fails before anything is queued
        streamed = _Streamed(on_chunk)
        failed: set[int] = set()
        while True:
            lane = self.place(
                priority=priority,
                affinity_key=options.get("affinity_key"),
                avoid=frozenset(failed),
                model=model,
            )
            if lane is None:  # every lane is out of the rotation: try the one due back first
                eligible = self._eligible(priority, frozenset(failed), model)
                lane = min(eligible, key=lambda i: self._out_until[i])
            attempt, carried = request, ""
            if failed:  # placed again after a failure: go on from the partial reply, or restart
                going_on, why = self._continuation(request, lane, streamed)
                if going_on is None:
                    self.restarted += 1
                    await streamed.reset(
                        f"backend failed; restarted on {self.lanes[lane].name}: {why}"
                    )
                else:
                    self.continued += 1
                    attempt, carried = going_on, streamed.text
            left = None if deadline is None else max(0.0, give_up_at - trio.current_time())
            try:
                response = await self._on_lane(
                    lane, attempt, priority=priority, deadline=left, on_chunk=streamed, **options
                )
            except ContextOverflowError:
                raise  # the same prompt is as long on every backend
            except BackendFailureError as exc:
                failed.add(lane)
                self._leave(lane, exc)
                if self.place(priority=priority, avoid=frozenset(failed), model=model) is None:
                    raise
                continue
            return with_prefill(response, carried)

    def _continuation(
        self, request: InferenceRequest, lane: int, streamed: _Streamed
    ) -> tuple[InferenceRequest | None, str]:
        """``request`` going on, on ``lane``, from the reply ``streamed`` holds so far; or None
        and why it restarts instead."""
        if streamed.continuable and not streamed.text:
            return None, "nothing of the reply had arrived"
        rest, reason = continuation_of(
            request.constraint,
            streamed.text,
            prefill=self.lanes[lane].client.capabilities.assistant_prefill,
            continuable=streamed.continuable,
        )
        if reason is not None:
            return None, reason
        return continued_request(request, streamed.text, rest, streamed.tokens), ""

    async def _on_lane(
        self, lane: int, request: InferenceRequest, *, priority: int, **options: Any
    ) -> LLMResponse:
        counts = self._in_flight[lane]
        counts[priority] += 1
        try:
            return await self.lanes[lane].infer(request, priority=priority, **options)
        finally:
            counts[priority] -= 1
            if not counts[priority]:
                del counts[priority]

    def _leave(self, lane: int, error: BackendFailureError) -> None:
        """Take ``lane`` out of the rotation for ``rejoin_after_s``: its backend failed."""
        self._out_until[lane] = trio.current_time() + self._rejoin_after_s
        self.failovers[lane] += 1
        _log.warning(
            "fleet.backend_left",
            lane=self.lanes[lane].name,
            error=type(error).__name__,
            rejoin_after_s=self._rejoin_after_s,
        )

    async def stats(self) -> SlotStats:
        """The lanes' counters summed, as one slot's (``lane_stats`` for each)."""
        return self.summed(await self.lane_stats())

    def summed(self, lanes: Sequence[SlotStats]) -> SlotStats:
        """``lanes``' stats (one per lane, as :meth:`lane_stats` gives them) as one slot's:
        counters summed, the longest uptime, the waits per priority merged."""
        total = SlotStats(
            name=self.name,
            **{f: 0 for f in _SUMMED},
            running=any(s.running for s in lanes),
            uptime_s=max(s.uptime_s for s in lanes),
            waits={},
        )
        for stats in lanes:
            for field in _SUMMED:
                setattr(total, field, getattr(total, field) + getattr(stats, field))
            for priority, waits in stats.waits.items():
                into = total.waits.setdefault(priority, PriorityWaits())
                into.count += waits.count
                into.total_s += waits.total_s
                into.max_s = max(into.max_s, waits.max_s)
        return total

    async def lane_stats(self) -> list[SlotStats]:
        """Each lane's own stats, in lane order."""
        return [await lane.stats() for lane in self.lanes]

    async def lane_reports(self) -> list[LaneReport]:
        """Each lane as a dashboard shows it (see :class:`LaneReport`), in lane order."""
        rotation = self.in_rotation()
        return [
            LaneReport(
                name=lane.name,
                model=lane.client.model,
                stats=await lane.stats(),
                in_flight=self._total(i),
                in_rotation=rotation[i],
                failovers=self.failovers[i],
            )
            for i, lane in enumerate(self.lanes)
        ]

    async def recheck(self) -> None:
        """Tell every lane's scheduler to try dispatching again (after a budget change)."""
        for lane in self.lanes:
            await lane.recheck()

    def _ahead(self, lane: int, priority: int) -> int:
        """Calls in flight on ``lane`` that run before a new call at ``priority``: those as
        urgent or more (a less urgent running call is preempted)."""
        return sum(n for p, n in self._in_flight[lane].items() if p <= priority)

    def _total(self, lane: int) -> int:
        return sum(self._in_flight[lane].values())


async def slot_report(slot: InferenceSlot) -> tuple[SlotStats, list[LaneReport]]:
    """``slot``'s statistics now, and for a :class:`Fleet` each lane's report (none for one
    backend): one ask of each lane serves the lanes and their sum."""
    if not isinstance(slot, Fleet):
        return await slot.stats(), []
    lanes = await slot.lane_reports()
    return slot.summed([lane.stats for lane in lanes]), lanes


def _lanes_by_model(
    lanes: Sequence[SlotWorker], named: Sequence[str]
) -> dict[str | None, tuple[int, ...]]:
    """The lanes of each of the ``named`` models, in lane order; one entry (``None``) where
    they name one model or none: every lane then serves every call."""
    names = [lane.client.model for lane in lanes]
    if len(named) < 2:
        return {None: tuple(range(len(lanes)))}
    unnamed = [lane.name for lane, name in zip(lanes, names, strict=True) if not name]
    if unnamed:
        raise ValueError(
            f"the backends serve different models ({', '.join(named)}), so each must name its "
            f"model; {', '.join(unnamed)} names none"
        )
    return {model: tuple(i for i, name in enumerate(names) if name == model) for model in named}


_SUMMED = (
    "queue_depth",
    "submitted",
    "completed",
    "failed",
    "abandoned",
    "rejected",
    "evicted",
    "preemptions",
    "continued",
    "restarted",
    "backend_cuts",
    "tokens_redecoded",
    "prompt_tokens_reprocessed",
    "prompt_tokens_resumed",
    "cache_hits",
    "busy_s",
)


class _Streamed:
    """The caller's chunk sink, keeping what of the reply reached it since the last
    ``ResetChunk``: a call placed again on another lane goes on from that text, or first tells
    the caller to drop it."""

    def __init__(self, sink: ChunkSink | None) -> None:
        self._sink = sink
        self._any = False
        self._text: list[str] = []
        self.tokens = 0
        self.continuable = True

    @property
    def text(self) -> str:
        return "".join(self._text)

    async def __call__(self, chunk: StreamChunk) -> None:
        self._any = True
        if isinstance(chunk, ResetChunk):  # a lane restarted the call itself
            self._forget()
        elif isinstance(chunk, TextDeltaChunk):
            self._text.append(chunk.text)
            self.tokens += 1
        elif isinstance(chunk, ToolCallDeltaChunk):
            self.continuable = False
            self.tokens += 1
        elif isinstance(chunk, ReasoningDeltaChunk):
            self.tokens += 1
        if self._sink is not None:
            await self._sink(chunk)

    async def reset(self, reason: str) -> None:
        if self._any and self._sink is not None:
            await self._sink(ResetChunk(reason))
        self._any = False
        self._forget()

    def _forget(self) -> None:
        self._text.clear()
        self.tokens = 0
        self.continuable = True
