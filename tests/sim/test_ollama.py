"""The Ollama chat endpoint: NDJSON streaming by default, arguments as objects, num_ctx reloads."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
from sim_helpers import WEATHER_TOOLS, user

from forge_rt.backends.sim import SimBackend, SimReply, SimToolCall

CALL = SimReply(tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}),))


async def test_non_stream_tool_call_arguments_are_an_object(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """With ``stream: false`` one JSON object comes back, tool-call arguments as an object."""
    sim.set_script({"*": [CALL]})
    body = {"model": "m", "messages": user("w"), "tools": WEATHER_TOOLS, "stream": False}
    reply = (await http.post("/api/chat", json=body)).json()
    assert reply["done"] is True
    assert reply["message"]["tool_calls"] == [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]
    assert reply["prompt_eval_count"] > 0
    assert reply["eval_count"] > 0


async def test_streams_ndjson_by_default_with_each_call_in_one_chunk(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Without ``stream``, Ollama streams NDJSON: text deltas, whole tool calls, a done line."""
    sim.set_script({"*": [SimReply(text="Checking now.", tool_calls=CALL.tool_calls)]})
    response = await http.post("/api/chat", json={"messages": user("w"), "tools": WEATHER_TOOLS})
    assert response.headers["content-type"] == "application/x-ndjson"
    lines: list[dict[str, Any]] = [msgspec.json.decode(x) for x in response.text.splitlines()]
    text = "".join(line["message"]["content"] for line in lines)
    calls = [c for line in lines for c in line["message"].get("tool_calls", [])]
    assert text == "Checking now."
    assert calls == [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    assert [line["done"] for line in lines].count(True) == 1
    assert lines[-1]["done"] is True
    assert lines[-1]["done_reason"] == "stop"


async def test_num_ctx_changes_are_counted_and_drop_the_cache(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Each change of ``options.num_ctx`` counts as a model reload and empties the slot cache."""
    sim.set_script({"*": ["a", "b", "c", "d"]})
    for num_ctx in (4096, 4096, 8192):
        body = {"messages": user("q"), "stream": False, "options": {"num_ctx": num_ctx}}
        await http.post("/api/chat", json=body)
    assert sim.stats.ollama_num_ctx_changes == 1
    assert sim.stats.ollama_num_ctx == 8192
    reloaded = sim.stats.slots[0]
    assert reloaded.cached_tokens > 0  # the second request reused the first one's cache
    body = {"messages": user("q"), "stream": False, "options": {"num_ctx": 8192}}
    before = reloaded.cached_tokens
    await http.post("/api/chat", json=body)
    assert reloaded.cached_tokens > before  # same num_ctx again: the cache is back in use


async def test_history_tool_calls_count_as_turns(sim: SimBackend, http: httpx.AsyncClient) -> None:
    """Assistant tool calls and tool results in the history are read as earlier turns."""
    sim.set_script({"*": ["It is sunny."]})
    messages = [
        *user("w"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
    reply = (await http.post("/api/chat", json={"messages": messages, "stream": False})).json()
    assert reply["message"]["content"] == "It is sunny."
    assert sim.stats.replies[-1].turn == 1


async def test_tags_and_show_describe_the_model(http: httpx.AsyncClient) -> None:
    """``/api/tags`` lists the model; ``/api/show`` reports its context length."""
    tags = (await http.get("/api/tags")).json()
    show = (await http.post("/api/show", json={"model": "sim-model"})).json()
    assert [m["name"] for m in tags["models"]] == ["sim-model"]
    assert show["model_info"]["sim.context_length"] == 8192
    assert "tools" in show["capabilities"]
