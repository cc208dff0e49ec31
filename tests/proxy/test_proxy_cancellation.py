"""A proxy client that goes away at any moment leaves nothing open in the proxy.

The client (httpx, in this process) is cancelled at its first scheduling step, then its second,
and so on until its request finishes (see ``leak_support``); each step of the client is a point
where the proxy has got further with the request, so the proxy is abandoned at each of its own
phases too. The proxy notices the disconnect
and abandons its backend call; whatever it opened must be closed by its owner, not left for the
garbage collector -- checked after every replay and once more after proxy and sim are gone.
"""

from __future__ import annotations

import httpx
import pytest
from leak_support import cancel_at_every_step, nothing_left_behind
from proxy_support import sim_proxy

from forge_rt.backends.sim import SimConfig
from forge_rt.clients import cancel_safe_transport

REPLY = "The forecast for Paris is mild, with a light breeze and a few clouds."


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_client_leaving_at_any_step_leaves_nothing_in_the_proxy(stream: bool) -> None:
    """Cancelled while sending, waiting or reading, a request leaks nothing on the proxy side."""
    body = {
        "model": "sim-model",
        "stream": stream,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    with nothing_left_behind("after the sweep"):
        async with (
            sim_proxy(SimConfig(script={"*": [REPLY] * 10_000})) as (_, url),
            # The test's own client is made cancel-safe too, so any leak found is the proxy's.
            httpx.AsyncClient(base_url=url, transport=cancel_safe_transport()) as client,
        ):

            async def call() -> None:
                async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                    async for _ in response.aiter_bytes():
                        pass

            replays = await cancel_at_every_step(call)
            answer = await client.post("/v1/chat/completions", json={**body, "stream": False})
            assert answer.json()["choices"][0]["message"]["content"] == REPLY
    assert replays > 5
