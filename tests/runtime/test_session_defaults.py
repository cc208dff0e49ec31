"""A Session bounds every inference by default: a backend that never answers (and that the
stall limits were told to ignore) still ends the turn typed, never a hang."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from forge_rt.core import Workflow
from forge_rt.errors import InferenceDeadlineError
from forge_rt.runtime import Session, StallLimits
from forge_rt.testing import ScriptedClient

NO_STALL_WATCH = StallLimits(first_token_s=None, between_chunks_s=None)


def _chat() -> Workflow:
    return Workflow(name="chat", tools=[], system_prompt_template="Chat.", constrain="never")


async def test_the_default_inference_deadline_ends_a_call_that_never_answers(
    autojump_clock: Any,
) -> None:
    client = ScriptedClient(["never"], prefill_s=10_000)
    async with Session.open(client, stall=NO_STALL_WATCH) as session:
        started = trio.current_time()
        with pytest.raises(InferenceDeadlineError) as info:
            await session.run(_chat(), "hi")
    assert info.value.deadline_s == 600.0
    assert trio.current_time() - started == pytest.approx(600.0, abs=1.0)


async def test_a_session_may_set_its_own_default_and_a_turn_its_own(autojump_clock: Any) -> None:
    client = ScriptedClient(["never", "never"], prefill_s=10_000)
    async with Session.open(client, stall=NO_STALL_WATCH, inference_deadline=30.0) as session:
        handle = await session.start(_chat())
        with pytest.raises(InferenceDeadlineError) as default:
            await handle.send("hi")
        with pytest.raises(InferenceDeadlineError) as own:
            await handle.send("again", inference_deadline=5.0)
    assert (default.value.deadline_s, own.value.deadline_s) == (30.0, 5.0)
