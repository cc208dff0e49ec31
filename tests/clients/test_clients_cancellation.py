"""A call cancelled at any moment closes everything it opened: request body, response, connection.

Each sweep replays one call against the sim over real HTTP, cancelled at its first scheduling
step, then its second, and so on until it finishes uncancelled (see ``leak_support``); after
each replay nothing may be left for the garbage collector to finalise.
"""

from __future__ import annotations

import pytest
import trio
import trio.lowlevel
from leak_support import cancel_at_every_step, nothing_left_behind

from forge_rt.backends.sim import Fault, SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient, make_client
from forge_rt.core import InferenceRequest, Message
from forge_rt.errors import BackendError, FaultKind

REQUEST = InferenceRequest(messages=(Message.user("Weather in Paris?"),))
# Long enough to stream in many chunks, so cancellations land between chunks too.
REPLY = "It is mild in Paris today, with a light breeze from the west and a few clouds."


# One adapter per framing: OpenAI SSE, Ollama NDJSON, Anthropic SSE events.
OPTIONS: dict[str, dict[str, str]] = {
    "llamaserver": {},
    "ollama": {"model": "sim-model"},
    "anthropic": {"model": "sim-model", "api_key": "sk-test"},
}


@pytest.mark.parametrize("kind", sorted(OPTIONS))
async def test_a_whole_call_cancelled_at_any_step_leaves_nothing(kind: str) -> None:
    """``send()`` cancelled while writing its body, awaiting the reply or reading it, leaks nothing."""
    config = SimConfig(script={"*": [REPLY] * 10_000})
    async with (
        SimBackend.serve(config) as sim,
        make_client(kind, sim.url, **OPTIONS[kind]) as client,  # type: ignore[arg-type]
    ):
        replays = await cancel_at_every_step(lambda: client.send(REQUEST))
    assert replays > 5  # the sweep really interrupted the call, more than once


async def test_a_stream_cancelled_at_any_step_leaves_nothing() -> None:
    """A streamed call cancelled before, during or between its chunks leaks nothing.

    The consumer waits once per chunk, as one forwarding each chunk somewhere does, so some
    cancellations land while the body's reader is suspended between two chunks.
    """
    config = SimConfig(script={"*": [REPLY] * 10_000})
    async with SimBackend.serve(config) as sim, LlamaServerClient(sim.url) as client:
        replays = await cancel_at_every_step(lambda: _stream_to_the_end(client, REQUEST))
    assert replays > 20  # past the first chunks: the stream had many


async def test_a_deadline_mid_stream_leaves_nothing(autojump_clock: trio.abc.Clock) -> None:
    """A client deadline that expires while a server drips its reply ends typed and leaks nothing.

    Dripped at 100 bytes/s, the reports on the prompt take about 6 s and each token after them
    about 2 s: the deadline at 20 s falls mid-reply."""
    config = SimConfig(script={"*": [REPLY]}, slow_drip_interval_s=0.01)
    request = InferenceRequest(messages=REQUEST.messages, headers={"x-sim-fault": Fault.SLOW_DRIP})
    async with (
        SimBackend.serve(config) as sim,
        LlamaServerClient(sim.url, deadline=20.0) as client,
    ):
        with nothing_left_behind("after the deadline"), pytest.raises(BackendError) as caught:
            await _stream_to_the_end(client, request)
    assert (caught.value.kind, caught.value.retry_safe) == (FaultKind.DEADLINE, False)  # mid-reply


async def _stream_to_the_end(client: LlamaServerClient, request: InferenceRequest) -> None:
    """Read a whole stream, yielding to the scheduler once per chunk."""
    async with client.stream(request) as chunks:
        async for _ in chunks:
            await trio.lowlevel.checkpoint()
