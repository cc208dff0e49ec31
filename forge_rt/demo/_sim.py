"""The simulated backend the demo runs on with ``--backend sim``: the 0.5B model's speed and habits.

Speed is what Qwen2.5-Coder-0.5B measured on two CPU cores (about 160 prompt and 41 generated
tokens per second, one slot, a prefix cache), scaled by ``sim_speed``. Behaviour: a perfect model
follows each agent's plan, and the seeded failure rates render its calls the ways the real 0.5B
model writes them -- mostly as JSON text, in fences or tags, sometimes as prose or with a wrong
argument -- so the guardrails have something to rescue. Replies are seeded per conversation and
turn, so a run's content is the same every time; only its timing varies.
"""

from __future__ import annotations

from collections.abc import Sequence

from forge_rt.backends.sim import (
    FailureRates,
    Intent,
    Oracle,
    RequestView,
    SimConfig,
    SimToolCall,
)
from forge_rt.demo._agents import AGENTS, IDLE_VOICE, AgentSpec, agent_by_task
from forge_rt.demo._config import DemoConfig

__all__ = ["DECODE_TPS", "DEMO_RATES", "PROMPT_TPS", "demo_sim_config", "plan_oracle"]

PROMPT_TPS = 160.0
"""Prompt tokens per second of the 0.5B model on two CPU cores (LOCAL_MODEL.md)."""
DECODE_TPS = 41.0
"""Generated tokens per second of the 0.5B model on two CPU cores."""

DEMO_RATES = FailureRates(
    bare_json=0.30,
    fenced_json=0.15,
    hermes=0.10,
    qwen_coder=0.05,
    bare_text=0.08,
    unknown_tool=0.04,
    wrong_args=0.04,
)
"""How often a call is written wrong; the remaining 24% are native calls."""


def plan_oracle(agents: Sequence[AgentSpec] = AGENTS) -> Oracle:
    """An oracle that makes each agent's next planned call (the conversation is its task).

    A step counts as done once its tool's expected output (the tools are deterministic) is in
    the history, so a call the guardrails rejected, or a tool error, is simply tried again.
    """
    by_task = agent_by_task(agents)

    def oracle(view: RequestView) -> Intent:
        if not view.conversation:
            return "ok"  # a prefix prewarm: no user turn yet, and one token is all it asks for
        agent = by_task.get(view.conversation)
        if agent is None:
            raise LookupError(
                f"the demo's simulated model has no plan for the conversation "
                f"{view.conversation!r}; it knows the tasks {sorted(by_task)}"
            )
        seen = {m.content for m in view.messages if m.role == "tool"}
        expected = agent.expected_results()
        step = next((i for i, out in enumerate(expected) if out not in seen), len(expected))
        planned = agent.plan[min(step, len(agent.plan) - 1)]
        return SimToolCall(name=planned.tool, arguments=planned.args)

    return oracle


def demo_sim_config(config: DemoConfig, *, slots: int = 1) -> SimConfig:
    """The :class:`SimConfig` of a demo run: ``slots`` KV slots (generating one at a time, as
    the SlotWorker runs them), 0.5B timing x ``sim_speed``, the plans."""
    return SimConfig(
        model="sim-qwen2.5-coder-0.5b",
        n_ctx=config.n_ctx,
        n_slots=slots,
        prefill_tps=PROMPT_TPS * config.sim_speed,
        decode_tps=DECODE_TPS * config.sim_speed,
        seed=config.seed,
        oracle=plan_oracle((*AGENTS, IDLE_VOICE)),
        rates=DEMO_RATES,
    )
