"""Showing the demo: a rich live view on a terminal, plain progress lines anywhere else.

Command-line code: it prints. The live view redraws from the :class:`DemoMonitor` a few times a
second (agents with their state and counters, the slot's queue and preemptions, recent events);
the plain view prints each event as one line, for logs and pipes.
"""

from __future__ import annotations

from types import TracebackType

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from forge_rt.demo._monitor import AgentState, AgentView, DemoEvent, DemoMonitor

__all__ = ["LiveView", "PlainView", "event_line"]

_EVENT_STYLES = {
    "preempted": "yellow",
    "slot": "yellow",
    "rescued": "cyan",
    "nudge": "magenta",
    "tool_error": "red",
    "done": "green",
    "failed": "bold red",
    "arrive": "bold",
    "backend": "dim",
}
_STATE_STYLES = {
    AgentState.WAITING: "dim",
    AgentState.QUEUED: "yellow",
    AgentState.PREFILL: "cyan",
    AgentState.GENERATING: "bold green",
    AgentState.CHECKING: "green",
    AgentState.TOOL: "blue",
    AgentState.DONE: "green",
    AgentState.FAILED: "red",
}
_RECENT = 10


def event_line(event: DemoEvent) -> str:
    """One event as a line: time since the start, who, what."""
    return f"{event.at:7.1f}s  {event.agent:<10}  {event.text}"


class PlainView:
    """Prints every event as a line on ``console`` (no redrawing, no colour codes)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def event(self, event: DemoEvent) -> None:
        """Print the event as one line."""
        self.console.print(event_line(event), markup=False, highlight=False, soft_wrap=True)

    def tick(self, monitor: DemoMonitor) -> None:
        """Nothing to redraw: events were printed as they came."""


class LiveView:
    """A ``rich.live.Live`` table of the agents, the slot and the latest events.

    Use as a context manager around the run; :meth:`tick` redraws. Output written to stderr
    meanwhile (log lines) is printed above the view instead of tearing it.
    """

    def __init__(self, console: Console, title: str) -> None:
        self.console = console
        self.title = title
        self._live = Live(Text(title), console=console, auto_refresh=False, redirect_stderr=True)

    def __enter__(self) -> LiveView:
        self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._live.__exit__(exc_type, exc, tb)

    def event(self, event: DemoEvent) -> None:
        """Events are drawn from the monitor on the next tick."""

    def tick(self, monitor: DemoMonitor) -> None:
        """Redraw the view from the monitor."""
        self._live.update(render(monitor, self.title), refresh=True)


def render(monitor: DemoMonitor, title: str) -> RenderableType:
    """The whole live view for the monitor's current state."""
    table = Table(
        box=box.SIMPLE_HEAD, title=f"{title} · {monitor.now():.1f} s", title_justify="left"
    )
    table.add_column("agent")
    table.add_column("prio", justify="right")
    table.add_column("state")
    table.add_column("calls", justify="right")
    table.add_column("tools", justify="right")
    table.add_column("rescues", justify="right")
    table.add_column("nudges", justify="right")
    table.add_column("preempted", justify="right")
    table.add_column("first token", justify="right")
    for view in monitor.agents.values():
        table.add_row(
            Text(view.name, style="bold" if not view.background else ""),
            str(view.priority),
            Text(view.label(), style=_STATE_STYLES[view.state]),
            str(view.inferences),
            str(view.tool_calls),
            str(sum(view.rescues.values())),
            str(view.nudges),
            str(view.preempted),
            _first_ttft(view),
        )
    events = Text()
    for event in monitor.events[-_RECENT:]:
        events.append(event_line(event) + "\n", style=_EVENT_STYLES.get(event.kind, ""))
    return Group(table, _slot_line(monitor), *_lane_lines(monitor), Text(""), events)


def _first_ttft(view: AgentView) -> str:
    """Its request's time to first token (its first inference, from the request's arrival), or a
    dash: the figure the summary gives for the voice, so the two never disagree."""
    return f"{view.ttfts[0]:.2f} s" if view.ttfts else "-"


def _slot_phase(monitor: DemoMonitor) -> str:
    """What the slot is doing, from the agents' own states (the scheduler knows only "busy"):
    the same words the agent rows use, so the bar never says more than they do."""
    states = {view.state for view in monitor.agents.values()}
    for state in (AgentState.GENERATING, AgentState.PREFILL):
        if state in states:
            return str(state)
    # Running but no agent's call: the prewarm, the idle baseline, or the instant between the
    # scheduler's dispatch and the call reaching the backend.
    return "busy" if monitor.slot is not None and monitor.slot.running else "idle"


def _slot_line(monitor: DemoMonitor) -> Text:
    """The slot's state and counters, and the rescues so far by dialect."""
    stats = monitor.slot
    if stats is None:
        return Text("slot: not started yet", style="dim")
    rescues = monitor.rescues()
    by_dialect = ", ".join(f"{d} {n}" for d, n in rescues.most_common()) or "none yet"
    phase = _slot_phase(monitor)
    return Text.assemble(
        ("slot ", "bold"),
        (phase, "dim" if phase == "idle" else "green"),
        f" · queue {stats.queue_depth} · {stats.completed} inferences done · ",
        (f"preemptions {stats.preemptions}", "yellow" if stats.preemptions else ""),
        f" · busy {stats.busy_fraction:.0%}\n",
        ("rescues ", "bold"),
        (by_dialect, "cyan"),
    )


def _lane_lines(monitor: DemoMonitor) -> list[Text]:
    """One line per backend of a fleet: busy or idle, its calls in flight, whether it takes
    new calls, what it completed."""
    return [
        Text.assemble(
            (f"  {lane.name} ", "bold"),
            ("busy", "green") if lane.stats.running else ("idle", "dim"),
            f" · {lane.in_flight} in flight · {lane.stats.completed} done · ",
            ("in rotation", "") if lane.in_rotation else ("out of rotation", "red"),
            (f" · {lane.failovers} failovers", "yellow") if lane.failovers else "",
        )
        for lane in monitor.lanes
    ]
