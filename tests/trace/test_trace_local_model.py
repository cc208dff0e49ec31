"""A trace recorded from the embedded real model replays with every decision the same, and a
deliberate guardrail change shows up as the decisions it changes.

The model's replies are whatever they are; the test pins forge_rt's behaviour: the recorded
decisions are reproduced exactly, and the changed budget is reported where it bites.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from forge_rt.clients import LlamaServerClient
from forge_rt.core import Sampling, ToolDef, ToolSpec, Workflow
from forge_rt.errors import MaxIterationsError, ToolExecutionError
from forge_rt.runtime import Session
from forge_rt.trace import ReplyReceived, read_trace, replay

pytestmark = pytest.mark.slow

SAMPLING = Sampling(temperature=0.7, top_p=0.8, top_k=20, max_tokens=48, seed=7)
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def get_weather(city: str) -> str:
    raise RuntimeError(f"the weather service is down (asked for {city})")


def weather() -> Workflow:
    """get_weather is required and always fails: under the constraint the model's first call
    must be get_weather (the answer is not callable yet), so a failed tool batch is certain."""
    return Workflow(
        name="weather",
        tools=[ToolDef(spec=ToolSpec(name="get_weather", parameters=CITY), callable=get_weather)],
        required_steps=["get_weather"],
        system_prompt_template="You answer weather questions with the tools.",
        constrain="always",
    )


async def test_a_real_model_trace_replays_exactly_and_shows_a_changed_budget(
    local_model_url: str, tmp_path: Path
) -> None:
    """Unchanged guardrails: zero differences. No tool-error budget: the failed batch is fatal."""
    with trio.fail_after(600):
        async with (
            LlamaServerClient(local_model_url) as client,
            Session.open(client, sampling=SAMPLING, max_iterations=2, trace=tmp_path) as session,
        ):
            # The tool never works, so the run cannot finish: it ends typed, and is recorded.
            with pytest.raises((ToolExecutionError, MaxIterationsError)):
                await session.run(weather(), "What is the weather in Paris?", name="weather1")
    replies = [e for e in read_trace(tmp_path) if isinstance(e, ReplyReceived)]
    assert replies, "the model replied at least once"
    same = replay(tmp_path)
    assert (True, len(replies)) == (same.same, same.replies)
    changed = replay(tmp_path, overrides={"max_tool_errors": 0})
    assert (
        [
            d.replayed.fatal  # type: ignore[union-attr]
            for d in changed.differences
            if d.what == "record"
        ][:1]
        == ["ToolExecutionError"]
    )
