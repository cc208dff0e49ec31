"""Run a BFCL case the second way a user has: as a workflow on forge_rt's runtime.

The case's functions become the workflow's tools and the case's user turns go to one
:class:`~forge_rt.runtime.Session` workflow, each turn one ``send`` -- the guarded step, the
respond tool and every guardrail of the ablation as the runtime applies them to any workflow.

- **Single-turn**: every function is a terminal tool that records the call it got and answers
  ``"ok"``; the turn ends with the first reply whose calls ran (all of a parallel reply's calls
  run in one batch), or with an answer (``respond``), which holds no call.
- **Multi-turn**: every function runs on the case's BFCL API instances (BFCL's ``execute``), its
  result goes back to the model, and ``respond`` ends each turn; a turn gets BFCL's step limit
  as its iteration budget, and a turn that runs out of it ends the run ("force-terminated").

A budget that runs out (no valid call, a loop, the iterations) is the model's failure: no
answer, as through the proxy. A backend failure ends the eval.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from forge_rt.core import RESPOND_TOOL_NAME, LLMClient, Sampling, ToolDef, ToolSpec, Workflow
from forge_rt.errors import BudgetExhaustedError
from forge_rt.eval._ablation import Ablation
from forge_rt.eval._runner import add_stats
from forge_rt.eval.bfcl._cases import BfclCase
from forge_rt.eval.bfcl._check import Call, execute_on_instances
from forge_rt.eval.bfcl._drive import MAX_STEPS
from forge_rt.runtime import RunStats, Session, WorkflowResult

__all__ = ["RuntimeOutcome", "run_in_runtime"]

_SYSTEM_PROMPT = "You are a helpful assistant. Use the tools when they fit the request."


class RuntimeOutcome(msgspec.Struct, kw_only=True):
    """What the workflow did: the calls that ran, per turn; each turn's answer; every turn's
    stats together; how it ended.

    ``failure``: the typed error's name and message when a budget ran out (the run then has
    the turns up to the failed one, which is dropped, as BFCL drops a force-terminated turn).
    """

    calls_per_turn: list[list[Call]] = msgspec.field(default_factory=list)
    answers: list[str] = msgspec.field(default_factory=list)
    stats: RunStats = msgspec.field(default_factory=RunStats)
    failure: tuple[str, str] | None = None


def _tool(
    wire: str, function: dict[str, Any], parameters: dict[str, Any], run: Callable[..., str]
) -> ToolDef:
    spec = ToolSpec(name=wire, description=function.get("description", ""), parameters=parameters)
    return ToolDef(spec=spec, callable=run, needs=frozenset())


def _workflow(
    case: BfclCase, ablation: Ablation, log: list[list[Call]], *, instance_prefix: str
) -> Workflow:
    multi = case.check == "multi_turn"
    tools: list[ToolDef] = []
    for wire_tool, function in zip(case.tools, case.functions, strict=True):
        wire = wire_tool["function"]["name"]
        name = case.names[wire]

        def run(_bfcl_function: str = name, **arguments: Any) -> str:
            call = Call(name=_bfcl_function, arguments=arguments)
            log[-1].append(call)
            if not multi:
                return "ok"
            [result] = execute_on_instances(case, [call], prefix=instance_prefix)
            return result

        tools.append(_tool(wire, function, wire_tool["function"]["parameters"], run))
    return Workflow(
        name=f"bfcl-{case.category}",
        tools=tools,
        # Single-turn: any function's call ends the turn, and so does an answer.
        terminal_tool=None
        if multi
        else tuple(dict.fromkeys([*(t.spec.name for t in tools), RESPOND_TOOL_NAME])),
        system_prompt_template=_SYSTEM_PROMPT,
        constrain=ablation.constrain,
    )


def _user_text(turn: tuple[dict[str, Any], ...]) -> str:
    return "\n\n".join(str(m.get("content", "")) for m in turn if m.get("role") == "user")


async def run_in_runtime(
    client: LLMClient,
    case: BfclCase,
    ablation: Ablation,
    *,
    instance_prefix: str,
    trace: Path | None = None,
) -> RuntimeOutcome:
    """Every user turn of ``case`` through one workflow on a fresh session over ``client``;
    ``trace``: where the run's trace goes (every request and raw reply)."""
    outcome = RuntimeOutcome()
    log: list[list[Call]] = []
    workflow = _workflow(case, ablation, log, instance_prefix=instance_prefix)
    async with Session.open(
        client,
        guardrails=ablation.guardrails,
        max_iterations=MAX_STEPS,
        sampling=Sampling(temperature=0.0),
        trace=trace,
    ) as session:
        handle = await session.start(workflow)
        for turn in case.turns:
            log.append([])
            result: WorkflowResult | None = None
            try:
                result = await handle.send(_user_text(turn))
            except BudgetExhaustedError as exc:
                log.pop()
                outcome.failure = (type(exc).__name__, str(exc)[:500])
            finally:
                if handle.last_stats is not None:
                    add_stats(outcome.stats, handle.last_stats)
                    handle.last_stats = None
            if result is None:
                break
            terminal = result.terminal_call
            answered = terminal is None or terminal.tool == RESPOND_TOOL_NAME
            outcome.answers.append(result.output if answered else "")
    outcome.calls_per_turn = log
    return outcome
