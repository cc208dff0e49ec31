"""What a demo run measured: per-agent outcomes and the figures of the closing summary.

Every figure is measured in the run itself: times to first token from the agents' own streams,
preemptions and slot time from the SlotWorker's statistics, rescues from the replies the
guardrails rescued. Nothing is estimated or assumed.
"""

from __future__ import annotations

import statistics

import msgspec

__all__ = ["AgentOutcome", "DemoReport"]


class AgentOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one agent's run ended, and what it took.

    ``ok`` is true when its terminal tool succeeded (``output`` holds the result); otherwise
    ``error`` names the typed error it ended with. ``ttfts_s`` holds each of its inferences'
    time to first token: from the request (its arrival, for the first) to the first streamed
    token, queueing included.
    """

    name: str
    role: str
    priority: int
    background: bool
    ok: bool
    output: str | None = None
    error: str | None = None
    inferences: int = 0
    tool_calls: int = 0
    nudges: int = 0
    preempted: int = 0
    rescues: dict[str, int] = msgspec.field(default_factory=dict)
    ttfts_s: tuple[float, ...] = ()
    started_s: float | None = None
    ended_s: float | None = None

    @property
    def wall_s(self) -> float | None:
        """Seconds from its request to its last reply."""
        if self.started_s is None or self.ended_s is None:
            return None
        return self.ended_s - self.started_s


class DemoReport(msgspec.Struct, frozen=True, kw_only=True):
    """The measured outcome of one demo run.

    ``contended`` says whether background agents were still running when the voice request
    arrived (otherwise there was nothing to preempt). ``slot_calls`` are the SlotWorker's
    completed inferences and ``slot_busy_s`` its busy time while the agents ran; ``wall_s`` runs
    from the start of the background agents to the end of the last agent, which began
    ``started_at_s`` into the run on the clock the events are stamped with (backend start-up and
    the prewarm come first). Of the ``preemptions``, ``continued`` ones resumed from their
    partial reply and ``restarted`` ones began again, throwing away ``tokens_redecoded``;
    resuming prefilled ``prompt_tokens_reprocessed`` of ``prompt_tokens_resumed``.
    ``voice_idle_ttft_s`` is the voice agent's second question, asked once every agent has
    ended, timed the same way: the run's own idle-slot baseline.
    ``prewarm_tokens``: the voice prefix processed before the run began. ``baseline_calls``:
    the inferences of the prewarm and the idle-slot baseline, counted in ``slot_calls``.
    """

    backend: str
    agents: tuple[AgentOutcome, ...]
    voice_arrived_s: float | None
    contended: bool
    preemptions: int
    continued: int
    restarted: int
    tokens_redecoded: int
    prompt_tokens_reprocessed: int
    prompt_tokens_resumed: int
    prewarm_tokens: int | None
    voice_idle_ttft_s: float | None
    baseline_calls: int
    slot_calls: int
    slot_busy_s: float
    wall_s: float
    started_at_s: float

    @property
    def completions(self) -> int:
        """How many agents' terminal tools succeeded."""
        return sum(1 for a in self.agents if a.ok)

    @property
    def voice(self) -> AgentOutcome:
        """The high-priority agent's outcome."""
        return next(a for a in self.agents if not a.background)

    @property
    def voice_ttft_s(self) -> float | None:
        """Seconds from the voice request's arrival to its first token (None: no token came)."""
        ttfts = self.voice.ttfts_s
        return ttfts[0] if ttfts else None

    @property
    def background_ttft_median_s(self) -> float | None:
        """Median time to first token over every background inference (None: there were none)."""
        values = [t for a in self.agents if a.background for t in a.ttfts_s]
        return statistics.median(values) if values else None

    @property
    def rescues(self) -> dict[str, int]:
        """Rescued calls by dialect over every agent, most frequent first."""
        total: dict[str, int] = {}
        for agent in self.agents:
            for dialect, count in agent.rescues.items():
                total[dialect] = total.get(dialect, 0) + count
        return dict(sorted(total.items(), key=lambda item: (-item[1], item[0])))

    def summary_lines(self) -> list[str]:
        """The closing summary, one figure per line."""
        outcomes = ", ".join(
            f"{a.name} {'done' if a.ok else 'failed (' + (a.error or '?').split(':')[0] + ')'}"
            for a in self.agents
        )
        rescues = self.rescues
        rescue_text = (
            f"{sum(rescues.values())}: " + ", ".join(f"{d} {n}" for d, n in rescues.items())
            if rescues
            else "0 (every call came back well-formed)"
        )
        busy = self.slot_busy_s / self.wall_s if self.wall_s > 0 else 0.0
        return [
            "summary",
            f"  backend        {self.backend}",
            f"  completions    {self.completions} of {len(self.agents)} ({outcomes})",
            f"  voice TTFT     {self._ttft_text()}",
            f"  voice answer   {self._answer_text()}",
            f"  preemptions    {self._preemption_text()}",
            f"  rescues        {rescue_text}",
            f"  nudges         {sum(a.nudges for a in self.agents)}",
            f"  slot           {self.slot_calls} inferences ({self.baseline_calls} for the "
            f"prewarm and the idle baseline), busy {busy:.0%} of the run",
            f"  wall time      {self.wall_s:.1f} s, from {self.started_at_s:.1f} s to "
            f"{self.started_at_s + self.wall_s:.1f} s on the event clock",
        ]

    def _ttft_text(self) -> str:
        """The voice's time to first token under load beside the same on the idle slot."""
        voice, idle = self.voice_ttft_s, self.voice_idle_ttft_s
        if voice is None:
            return "no token: the voice request produced no reply"
        text = f"{voice:.2f} s from arrival to first token"
        if not self.contended:
            text += " (the background agents had already finished)"
        if idle is None:
            return text + "; no idle-slot baseline (its request produced no token)"
        ratio = voice / idle if idle > 0 else float("inf")
        return text + f"; {idle:.2f} s on the idle slot in the same run ({ratio:.2f}x)"

    def _preemption_text(self) -> str:
        """Preemptions and what they cost: tokens decoded twice, prompt prefilled again."""
        text = f"{self.preemptions}"
        if not self.preemptions:
            return text
        text += f" ({self.continued} continued, {self.restarted} restarted); "
        text += f"{self.tokens_redecoded} tokens decoded again, "
        text += (
            f"{self.prompt_tokens_reprocessed} of {self.prompt_tokens_resumed} prompt tokens "
            "prefilled again on resume"
        )
        return text

    def _answer_text(self) -> str:
        """How long the voice request took to be answered, and the answer."""
        voice = self.voice
        wall = voice.wall_s
        if wall is None:
            return "never arrived"
        if voice.ok:
            return f"{wall:.2f} s from arrival to answer: {voice.output}"
        return f"failed after {wall:.2f} s: {voice.error}"
