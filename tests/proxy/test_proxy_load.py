"""Load: 200 concurrent clients on one proxy, half of them streaming: every one answered."""

from __future__ import annotations

import httpx
import trio
from proxy_support import client_proxy

from forge_rt.testing import ScriptedClient


async def test_two_hundred_concurrent_proxy_clients() -> None:
    client = ScriptedClient(lambda request: "pong")
    statuses: list[int] = []
    body = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
    with trio.fail_after(120):
        async with client_proxy(client, max_queue=256) as url:
            limits = httpx.Limits(max_connections=200)
            async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

                async def one(n: int) -> None:
                    stream = n % 2 == 0
                    response = await http.post(
                        "/v1/chat/completions", json={**body, "stream": stream}
                    )
                    statuses.append(response.status_code)
                    if not stream:
                        assert response.json()["choices"][0]["message"]["content"] == "pong"

                async with trio.open_nursery() as nursery:
                    for n in range(200):
                        nursery.start_soon(one, n)
    assert statuses == [200] * 200
