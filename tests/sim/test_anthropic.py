"""The Anthropic Messages endpoint over real HTTP, streamed and not, and with the official SDK."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import msgspec
import trio
from sim_helpers import user

from forge_rt.backends.sim import SimBackend, SimConfig, SimReply, SimToolCall

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
]
REPLY = SimReply(
    text="Let me check.",
    reasoning="The user wants weather.",
    tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}, id="toolu_1"),),
)


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, JSON payload) pairs of an Anthropic SSE body."""
    out = []
    for block in text.strip().split("\n\n"):
        name_line, data_line = block.split("\n")
        out.append((name_line.removeprefix("event: "), msgspec.json.decode(data_line[6:])))
    return out


async def test_non_stream_message_has_thinking_text_and_tool_use_blocks(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A reply becomes thinking, text and tool_use blocks with stop_reason tool_use."""
    sim.set_script({"*": [REPLY]})
    body = {"model": "m", "max_tokens": 100, "messages": user("weather?"), "tools": TOOLS}
    message = (await http.post("/v1/messages", json=body)).json()
    assert [b["type"] for b in message["content"]] == ["thinking", "text", "tool_use"]
    assert message["content"][1]["text"] == "Let me check."
    assert message["content"][2] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert message["stop_reason"] == "tool_use"
    assert message["usage"]["output_tokens"] > 0


async def test_stream_emits_the_anthropic_event_sequence(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A stream runs message_start, one start/deltas/stop per block, message_delta, message_stop."""
    sim.set_script({"*": [REPLY]})
    body = {"max_tokens": 100, "messages": user("weather?"), "tools": TOOLS, "stream": True}
    events = _events((await http.post("/v1/messages", json=body)).text)
    names = [name for name, _ in events]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    starts = [p["content_block"]["type"] for n, p in events if n == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    assert names.count("content_block_stop") == 3
    deltas: dict[str, str] = {}
    for name, payload in events:
        if name == "content_block_delta":
            delta = payload["delta"]
            key = {"thinking_delta": "thinking", "text_delta": "text"}.get(delta["type"])
            if key is not None:
                deltas[key] = deltas.get(key, "") + delta[key]
            elif delta["type"] == "input_json_delta":
                deltas["json"] = deltas.get("json", "") + delta["partial_json"]
    assert deltas == {
        "thinking": "The user wants weather.",
        "text": "Let me check.",
        "json": '{"city":"Paris"}',
    }
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


async def test_tool_results_and_prior_calls_are_read_back(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """tool_use and tool_result blocks in the history count as a turn and hit the cache."""
    sim.set_script({"*": [REPLY, "It is sunny."]})
    body: dict[str, Any] = {"max_tokens": 100, "messages": user("weather?"), "tools": TOOLS}
    first = (await http.post("/v1/messages", json=body)).json()
    body["messages"] = [
        *user("weather?"),
        {"role": "assistant", "content": first["content"]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
        },
    ]
    second = (await http.post("/v1/messages", json=body)).json()
    assert second["content"] == [{"type": "text", "text": "It is sunny."}]
    assert second["usage"]["cache_read_input_tokens"] == (
        first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
    )
    assert sim.stats.replies[-1].turn == 1


async def test_api_key_is_checked_only_when_configured() -> None:
    """With ``api_key`` set, a request without the matching x-api-key gets a 401."""
    config = SimConfig(api_key="secret", script={"*": ["ok"]})
    body = {"max_tokens": 10, "messages": user("q")}
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            refused = await http.post("/v1/messages", json=body)
            accepted = await http.post("/v1/messages", json=body, headers={"x-api-key": "secret"})
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    assert accepted.status_code == 200


async def test_official_sdk_reads_streamed_and_plain_messages_alike(sim: SimBackend) -> None:
    """The anthropic SDK assembles the stream into the same message as the plain response."""
    sim.set_script({"*": [REPLY, REPLY]})
    client = anthropic.AsyncAnthropic(base_url=sim.url, api_key="unused")
    kwargs: Any = {"model": "m", "max_tokens": 100, "messages": user("weather?"), "tools": TOOLS}
    plain = await client.messages.create(**kwargs)
    async with client.messages.stream(**kwargs) as stream:
        streamed = await stream.get_final_message()
    await client.close()
    assert [b.model_dump(exclude_none=True) for b in streamed.content] == [
        b.model_dump(exclude_none=True) for b in plain.content
    ]
    assert streamed.stop_reason == plain.stop_reason == "tool_use"
