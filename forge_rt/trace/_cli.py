"""``forge-rt replay TRACE`` and ``forge-rt trace show TRACE``: a trace's command line.

Command-line code: it prints through rich. ``replay`` exits 0 when today's guardrails decide
every recorded reply as recorded, 1 when some decision differs (each is listed), 2 when the
trace cannot be read or an option is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from forge_rt._cli_options import command_settings, env_epilog
from forge_rt.errors import ConfigurationError, TraceFormatError
from forge_rt.trace._events import (
    Decision,
    RecordDecision,
    Recorded,
    ReplyReceived,
    RequestSent,
    SlotEvent,
    ToolRan,
    TraceEvent,
    TraceHeader,
    TurnEnded,
    TurnStarted,
    VerdictMade,
)
from forge_rt.trace._reader import read_trace
from forge_rt.trace._replay import Difference, ReplayReport, replay_events

__all__ = ["replay_command", "trace_command"]

_TRACE = click.argument("trace", type=click.Path(exists=True, path_type=Path), metavar="TRACE")


def _read(trace: Path) -> list[TraceEvent]:
    try:
        return read_trace(trace)
    except TraceFormatError as exc:
        raise click.UsageError(str(exc)) from exc


def _overrides(settings: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise click.BadParameter(f"{setting!r} is not KEY=VALUE", param_hint="--set")
        try:
            out[key.strip()] = msgspec.json.decode(value)
        except msgspec.DecodeError as exc:
            raise click.BadParameter(
                f"{setting!r}: the value must be JSON (1, true, null, ...)", param_hint="--set"
            ) from exc
    return out


@click.command(
    name="replay",
    context_settings=command_settings("replay"),
    epilog=env_epilog("replay", example="SET", config=False),
)
@_TRACE
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Replay with this GuardrailOptions field changed (JSON value), e.g. max_retries=1; "
    "repeatable.",
)
def replay_command(trace: Path, settings: tuple[str, ...]) -> None:
    """Re-run today's guardrails over TRACE's recorded replies, with no model.

    TRACE is a trace file or a folder of them. Lists every decision made differently from the
    recorded run. Exit 0: all the same; 1: differences; 2: unreadable trace or bad option.
    """
    events = _read(trace)
    try:
        report = replay_events(events, overrides=_overrides(settings))
    except (ConfigurationError, msgspec.ValidationError) as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from exc
    console = Console(soft_wrap=True, highlight=False)
    _print_report(console, report)
    if not report.same:
        raise SystemExit(1)


def _print_report(console: Console, report: ReplayReport) -> None:
    console.print(
        f"replayed {report.replies} replies and {report.records} tool batches of "
        f"{len(report.actors)} actor(s), {report.turns} turn(s)",
        markup=False,
    )
    if report.schema_only:
        console.print(
            "note: validated against the recorded JSON schema (the pydantic model could not be "
            f"imported here): {', '.join(report.schema_only)}",
            markup=False,
        )
    if report.same:
        console.print("[green]same[/]: every decision is the recorded one")
        return
    table = Table(title=f"{len(report.differences)} decision(s) differ")
    for column in ("actor", "turn", "iter", "what", "recorded", "replayed"):
        table.add_column(column, overflow="fold")
    for diff in report.differences:
        table.add_row(
            escape(diff.actor),
            str(diff.turn),
            str(diff.iteration),
            diff.what,
            escape(_summary(diff.recorded, diff)),
            escape(_summary(diff.replayed, diff)),
        )
    console.print(table)


def _summary(decision: Decision | RecordDecision, diff: Difference) -> str:
    fields = diff.fields()
    values = msgspec.structs.asdict(
        decision.comparable() if isinstance(decision, Decision) else decision
    )
    if isinstance(decision, Decision):
        head = decision.kind + (f" ({decision.reason})" if decision.reason else "")
        if decision.error:
            head += f" {decision.error}"
        calls = ", ".join(f"{c.tool}({_args(c.args)})" for c in decision.calls)
        lines = [head] + ([calls] if calls else [])
        # A changed kind says it all; the other fields matter when the kind stayed the same.
        lines += [
            f"{name}: {_short(values[name], 80)}"
            for name in fields
            if "kind" not in fields and name not in ("reason", "calls", "error")
        ]
        return "\n".join(lines)
    return "; ".join(f"{name}={_short(values[name])}" for name in fields)


def _args(args: dict[str, Any]) -> str:
    return _short(msgspec.json.encode(args).decode(), 80)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@click.group(name="trace", context_settings=command_settings("trace"))
def trace_command() -> None:
    """Look at run traces (forge-rt replay re-runs them through the guardrails)."""


@trace_command.command(
    context_settings=command_settings("trace", "show"),
    epilog=env_epilog("trace", "show", example="ACTOR", config=False),
)
@_TRACE
@click.option("--actor", default=None, help="Show only this actor (workflow or session name).")
@click.option("--full", is_flag=True, help="Do not shorten replies, nudges and tool output.")
@click.option("--slots/--no-slots", default=True, show_default=True, help="Show slot events.")
def show(trace: Path, actor: str | None, full: bool, slots: bool) -> None:
    """Render TRACE (a trace file or a folder of them) turn by turn."""
    events = _read(trace)
    console = Console(highlight=False)  # wrapped inside the tree, never cut off
    limit = 10**9 if full else 200
    trees: dict[str, Tree] = {}
    turns: dict[str, Tree] = {}
    tries: dict[str, Tree] = {}
    for event in events:
        if actor is not None and event.actor != actor:
            continue
        if isinstance(event, TraceHeader):
            trees[event.actor] = _header(event)
            continue
        root = trees[event.actor]
        if isinstance(event, TurnStarted):
            said = "(resumed)" if event.user_text is None else repr(_short(event.user_text, limit))
            turns[event.actor] = root.add(f"[bold]turn {event.turn}[/] user: {escape(said)}")
            continue
        turn = turns.get(event.actor, root)
        if isinstance(event, RequestSent):
            tries[event.actor] = turn.add(
                f"[bold]iteration {event.iteration}[/] request: {event.messages} messages "
                f"#{event.messages_hash}, tools {', '.join(event.tools) or '-'}, constraint "
                f"{event.constraint or 'none'}, max_tokens {event.max_tokens}"
            )
            continue
        node = tries.get(event.actor, turn)
        line = _line(event, limit, slots)
        if line is None:
            continue
        if isinstance(event, ToolRan | Recorded | TurnEnded):
            (turn if isinstance(event, TurnEnded) else node).add(line)
        else:
            node.add(line)
    for tree in trees.values():
        console.print(tree)


def _header(event: TraceHeader) -> Tree:
    options = msgspec.structs.asdict(event.options)
    tree = Tree(
        f"[bold cyan]{escape(event.actor)}[/] workflow {escape(event.workflow)!s} "
        f"(schema {event.schema_version})"
    )
    tree.add(
        escape(
            f"tools: {', '.join(t.name for t in event.tools)}; required: "
            f"{', '.join(event.required_steps) or '-'}; terminal: "
            f"{', '.join(event.terminal_tools) or ('respond' if event.respond_tool else '-')}; "
            f"constraint: {event.constraint or 'none'}"
        )
    )
    tree.add(escape("guardrails: " + ", ".join(f"{k}={v}" for k, v in options.items())))
    return tree


def _line(event: TraceEvent, limit: int, slots: bool) -> str | None:
    match event:
        case SlotEvent():
            if not slots:
                return None
            extra = {
                k: v
                for k, v in msgspec.structs.asdict(event).items()
                if v is not None and k not in ("actor", "t", "kind", "job", "priority")
            }
            detail = " ".join(
                f"{k}={round(v, 3) if isinstance(v, float) else v}" for k, v in extra.items()
            )
            return f"[dim]slot job {event.job} {event.kind} {escape(detail)}[/]"
        case ReplyReceived():
            response = event.response
            if isinstance(response.result, list):
                body = "calls " + ", ".join(f"{c.tool}({_args(c.args)})" for c in response.result)
            else:
                body = repr(_short(response.result.content, limit))
            raw = (
                f" raw {_short(response.raw_text, limit)!r}"
                if response.raw_text and isinstance(response.result, list)
                else ""
            )
            usage = response.usage
            return escape(
                f"reply ({response.finish_reason or '-'}, {usage.prompt_tokens}+"
                f"{usage.completion_tokens} tokens, {response.timings.total_s:.2f} s"
                f"{', constrained' if event.constrained else ''}): {body}{raw}"
            )
        case VerdictMade():
            d = event.decision
            colour = (
                "green"
                if d.kind in ("execute", "text_answer")
                else "red"
                if d.kind == "fatal"
                else "yellow"
            )
            text = (
                d.kind + (f" ({d.reason})" if d.reason else "") + (f" {d.error}" if d.error else "")
            )
            if d.calls:
                text += ": " + ", ".join(f"{c.tool}({_args(c.args)})" for c in d.calls)
            if d.dialects:
                text += f" rescued from {', '.join(d.dialects)}"
            if d.refused:
                text += " refused " + ", ".join(f"{r.tool} ({r.reason})" for r in d.refused)
            lines = [f"[{colour}]verdict {escape(text)}[/]"]
            lines += [f"  nudge: {escape(_short(n, limit))}" for n in d.nudges]
            return "\n".join(lines)
        case ToolRan():
            result = (
                f"{event.error_type}: {event.error}"
                if event.error_type is not None
                else event.output or ""
            )
            return escape(
                f"tool {event.call.tool}({_args(event.call.args)}) -> {_short(result, limit)} "
                + ("[restored]" if event.restored else f"[{event.duration_s:.3f} s]")
            )
        case Recorded():
            r = event.decision
            state = (
                f"done by {r.terminal_tool}"
                if r.done
                else f"fatal {r.fatal}"
                if r.fatal
                else "continue"
            )
            return escape(f"recorded {len(event.calls)} result(s), {r.failed} failed: {state}")
        case TurnEnded():
            how = "[green]ok[/]" if event.ok else f"[red]{escape(event.error_type or '')}[/]"
            return (
                f"turn end {how}: {event.iterations} iterations, {event.inferences} inferences, "
                f"{event.tool_calls} tool calls, {event.prompt_tokens}+{event.completion_tokens} "
                f"tokens, {event.wall_s:.2f} s"
            )
    return None
