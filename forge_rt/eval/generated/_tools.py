"""Generated tools: a per-run backend state, JSON schemas, results in several styles, errors.

A generated case describes its tools as :class:`ToolPlan` values -- name, description, schema
and a handler over a :class:`RunState` -- so the case itself stays plain data. Every run of the
case builds a fresh :class:`RunState` and binds the handlers to it (:func:`bind_tools`); the
judge of that run closes over the same state, so it can read the call log and the records the
tools left behind.

Handlers report "you called me wrong" by raising
:class:`~forge_rt.errors.ToolResolutionError` (fed back to the model without counting against
the tool-error budget), and a simulated outage by raising :class:`ServiceUnavailable` (fed back
as a tool failure that counts).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from forge_rt.core import Capability, ToolDef, ToolSpec

__all__ = [
    "Handler",
    "RunState",
    "ServiceUnavailable",
    "ToolPlan",
    "bind_tools",
    "object_schema",
    "pick_style",
    "render",
    "snake",
]


class ServiceUnavailable(Exception):
    """A generated tool's backend failed this once (a status or error code, no hint); the
    same call succeeds when sent again."""


@dataclass
class RunState:
    """The tool backend of one run: its records, every domain call made, pending outages.

    ``records`` holds the stateful cases' records by id; ``calls`` is every call of a domain
    tool in order, as (tool, arguments), whether it succeeded or not; ``outages`` counts, per
    tool, the calls still to fail with :class:`ServiceUnavailable`; ``created`` counts the
    records this run made (new ids are numbered from it).
    """

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    outages: dict[str, int] = field(default_factory=dict)
    created: int = 0

    def called(self, tool: str) -> list[dict[str, Any]]:
        """The arguments of every call of ``tool``, in order."""
        return [args for name, args in self.calls if name == tool]


Handler = Callable[[RunState, dict[str, Any]], str]


@dataclass(frozen=True)
class ToolPlan:
    """One generated tool: what the model sees (name, description, parameters' schema) and
    the handler that answers its calls. ``writes`` marks a tool that changes the records."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    writes: bool = False


def snake(text: str) -> str:
    """``charge nurse`` -> ``charge_nurse``: a noun as part of a tool or field name."""
    return "_".join(text.lower().replace("-", " ").split())


def object_schema(
    properties: Mapping[str, dict[str, Any]], *, optional: Sequence[str] = ()
) -> dict[str, Any]:
    """An object schema requiring every property but ``optional``, and nothing else."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": [k for k in properties if k not in optional],
        "additionalProperties": False,
    }


STYLES = ("json", "pairs", "lines")


def render(fields: Mapping[str, Any], style: str) -> str:
    """A record as a tool result: JSON, ``key: value`` pairs on one line, or one per line.

    Real tools answer in all three; a model must read the value it needs out of each.
    """
    if style == "json":
        return json.dumps(dict(fields), ensure_ascii=False)
    if style == "lines":
        return "\n".join(f"{k.replace('_', ' ')}: {v}" for k, v in fields.items())
    return ", ".join(f"{k}: {v}" for k, v in fields.items())


def pick_style(rng: random.Random) -> str:
    """One of the result styles of :func:`render`."""
    return rng.choice(STYLES)


def bind_tools(plans: Sequence[ToolPlan], state: RunState) -> list[ToolDef]:
    """The tools of one run: each plan's handler bound to ``state``, every call logged first.

    The callables are async: they do no I/O, and a sync tool would cost a worker thread per
    call (the runtime runs sync tools in one so they cannot stall other actors).
    """
    return [_bind(plan, state) for plan in plans]


def _bind(plan: ToolPlan, state: RunState) -> ToolDef:
    async def tool(**arguments: Any) -> str:
        state.calls.append((plan.name, copy.deepcopy(arguments)))
        return plan.handler(state, arguments)

    tool.__name__ = plan.name
    tool.__doc__ = plan.description
    return ToolDef(
        spec=ToolSpec(name=plan.name, description=plan.description, parameters=plan.parameters),
        callable=tool,
        idempotent=not plan.writes,
        needs=frozenset({Capability.WRITES_STATE}) if plan.writes else frozenset(),
    )
