"""Generated cases as Scenarios: seeded per case, fresh tool state per run, a perfect oracle.

Case ``i`` of seed ``s`` draws everything from ``random.Random(f"{s}:{i}")``, so it is the same
whatever ``count`` is asked for (a short suite is a prefix of a long one), and its name
``gen-{s}-{i:03d}`` is a stable id. Shapes are dealt in blocks of six, one of each, shuffled
per block: every shape appears in any six consecutive cases from a multiple of six.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

from forge_rt.backends.sim import Intent, RequestView, SimToolCall
from forge_rt.eval._scenario import Scenario, ScenarioRun
from forge_rt.eval.generated._domains import DOMAINS
from forge_rt.eval.generated._shapes import BUILDERS, SHAPES, Draft
from forge_rt.eval.generated._tools import RunState, ToolPlan, bind_tools
from forge_rt.eval.generated._world import World, make_world
from forge_rt.eval.scenarios._kit import plan_oracle, workflow

__all__ = ["generate_case", "generate_suite"]

MIN_TOOLS = 3
MAX_TOOLS = 12
SLACK_ITERATIONS = 6
"""Iterations a run may take beyond its ideal calls before it ends in MaxIterationsError."""

_PROMPTS = (
    "You are the assistant of {title}. Use the tools to look things up or make changes; "
    "never invent facts. Reply to the user with the respond tool.",
    "You help the staff of {title}. The tools hold the facts: report what they return, "
    "accurately and briefly.",
    "You are a careful operations assistant for {title}. State only what the tools returned, "
    "and answer with the respond tool.",
)
_ERROR = re.compile(r"^\[(\w*Error|NotExecuted)\]")


def generate_suite(seed: int = 0, count: int = 60) -> list[Scenario]:
    """``count`` generated multi-step tool workflows, the same for the same ``seed``.

    Case ``i`` does not depend on ``count``: ``generate_suite(s, 10)`` is a prefix of
    ``generate_suite(s, 60)``. ``tags[0]`` of each is its shape (see
    :mod:`forge_rt.eval.generated._shapes`), the other tags name its features.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return [generate_case(seed, index) for index in range(count)]


def _shape(seed: int, index: int) -> str:
    """The shape of case ``index``: its place in its block of six, shuffled per block."""
    order = list(SHAPES)
    random.Random(f"{seed}:block:{index // len(SHAPES)}").shuffle(order)
    return order[index % len(SHAPES)]


def generate_case(seed: int, index: int) -> Scenario:
    """Case ``index`` of the suite of ``seed`` (see :func:`generate_suite`)."""
    rng = random.Random(f"{seed}:{index}")
    shape = _shape(seed, index)
    domain = rng.choice(DOMAINS)
    world = make_world(rng, domain, code_ids=shape == "recovery")
    draft = BUILDERS[shape](rng, world)
    plans = _tool_set(rng, world, draft)
    name = f"gen-{seed}-{index:03d}"
    prompt = rng.choice(_PROMPTS).format(title=domain.title)
    distractors = len(plans) - len(set(draft.needed))
    tags = (
        shape,
        domain.key,
        *draft.features,
        *(("distractors",) if distractors else ()),
    )

    def build() -> ScenarioRun:
        state = RunState(records=copy.deepcopy(world.records), outages=dict(draft.outages))
        judge = draft.judge
        return ScenarioRun(
            workflow=workflow(name, bind_tools(plans, state), prompt, required=draft.required),
            turns=draft.turns,
            judge=lambda output: judge(state, output),
            state=state,
        )

    return Scenario(
        name=name,
        tags=tags,
        description=f"{draft.description} ({len(plans)} tools)",
        build=build,
        ideal_calls=draft.ideal_calls,
        oracle=_oracle(draft),
        max_iterations=draft.ideal_calls + SLACK_ITERATIONS,
    )


def _tool_set(rng: random.Random, world: World, draft: Draft) -> list[ToolPlan]:
    """The case's tools: the ones it needs and 3-12 in all, the rest other tools of the
    domain (related, working, not needed), in a shuffled order."""
    every = world.plans()
    needed = list(dict.fromkeys(draft.needed))
    spare = [name for name in every if name not in needed]
    low = max(MIN_TOOLS, len(needed))
    total = rng.randint(low, min(MAX_TOOLS, len(needed) + len(spare)))
    chosen = needed + rng.sample(spare, total - len(needed))
    rng.shuffle(chosen)
    return [every[name] for name in chosen]


def _oracle(draft: Draft) -> Callable[[RequestView], Intent]:
    """The perfect model: ``plan_oracle`` over the draft's plans, except that a tool with a
    first try gets that call until one of its calls has failed (what a careful model sends
    before the tool's error tells it the format or the choices)."""
    follow = plan_oracle(*draft.plans)
    if not draft.first_tries:
        return follow
    first_tries: Mapping[str, dict[str, Any]] = draft.first_tries

    def oracle(view: RequestView) -> Intent:
        intent = follow(view)
        if (
            isinstance(intent, SimToolCall)
            and intent.name in first_tries
            and not _has_failed(view, intent.name)
        ):
            return SimToolCall(name=intent.name, arguments=first_tries[intent.name])
        return intent

    return oracle


def _has_failed(view: RequestView, tool: str) -> bool:
    """Whether a call of ``tool`` in the conversation came back as an error."""
    names = {c.id: c.name for m in view.messages for c in m.tool_calls if c.id}
    return any(
        m.role == "tool" and names.get(m.tool_call_id or "") == tool and _ERROR.match(m.content)
        for m in view.messages
    )
