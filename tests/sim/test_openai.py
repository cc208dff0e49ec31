"""The OpenAI chat-completions endpoint over real HTTP, streamed and not."""

from __future__ import annotations

import httpx
import openai
import pytest
import trio
from sim_helpers import WEATHER_TOOLS, sse_json, sse_payloads

from forge_rt.backends.sim import SimBackend, SimConfig, SimReply, SimToolCall

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


async def test_non_stream_text_reply_is_the_scripted_text(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A scripted text reply comes back verbatim as ``content`` with ``finish_reason`` stop."""
    sim.set_script({"*": ["It is sunny in Paris."]})
    response = await http.post("/v1/chat/completions", json={"messages": USER})
    assert response.status_code == 200
    body = response.json()
    choice = body["choices"][0]
    assert choice["message"]["content"] == "It is sunny in Paris."
    assert choice["finish_reason"] == "stop"
    assert body["model"] == "sim-model"
    assert body["usage"]["prompt_tokens"] > 0
    assert body["usage"]["completion_tokens"] == body["timings"]["predicted_n"]


async def test_non_stream_native_tool_call(sim: SimBackend, http: httpx.AsyncClient) -> None:
    """A scripted native call is returned in ``tool_calls`` with arguments as JSON text."""
    call = SimToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_1")
    sim.set_script({"*": [SimReply(tool_calls=(call,))]})
    response = await http.post(
        "/v1/chat/completions", json={"messages": USER, "tools": WEATHER_TOOLS}
    )
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]


async def test_alias_path_without_v1_serves_the_same_api(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``/chat/completions`` is an alias of ``/v1/chat/completions`` (llama-server has both)."""
    sim.set_script({"*": ["hi"]})
    response = await http.post("/chat/completions", json={"messages": USER})
    assert response.json()["choices"][0]["message"]["content"] == "hi"
    assert sim.stats.requests["/chat/completions"] == 1


async def test_stream_content_arrives_in_small_deltas_then_done(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A stream starts with a role chunk, carries the text in several deltas, ends with [DONE]."""
    text = "The weather in Paris is sunny and warm today."
    sim.set_script({"*": [text]})
    response = await http.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = sse_json(response.text)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert len(pieces) > 5
    assert text == "".join(pieces)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert sse_payloads(response.text)[-1] == "[DONE]"


async def test_stream_tool_call_deltas_repeat_id_and_name(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Streamed tool-call deltas carry index, id and name every time, and arguments in pieces."""
    call = SimToolCall(name="get_weather", arguments={"city": "Paris", "days": 3}, id="call_7")
    sim.set_script({"*": [SimReply(tool_calls=(call,))]})
    response = await http.post(
        "/v1/chat/completions", json={"messages": USER, "tools": WEATHER_TOOLS, "stream": True}
    )
    deltas = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in sse_json(response.text)
        if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
    assert len(deltas) > 3
    assert all(
        (d["index"], d["id"], d["function"]["name"]) == (0, "call_7", "get_weather") for d in deltas
    )
    assert "".join(d["function"]["arguments"] for d in deltas) == '{"city":"Paris","days":3}'


@pytest.mark.parametrize("include_usage", [True, False], ids=["usage", "no-usage"])
async def test_stream_usage_chunk_only_when_asked(
    sim: SimBackend, http: httpx.AsyncClient, include_usage: bool
) -> None:
    """``stream_options.include_usage`` adds a choices-less usage chunk just before [DONE]."""
    sim.set_script({"*": ["hello there"]})
    body = {
        "messages": USER,
        "stream": True,
        "stream_options": {"include_usage": include_usage},
    }
    chunks = sse_json((await http.post("/v1/chat/completions", json=body)).text)
    usage_chunks = [c for c in chunks if "usage" in c]
    if include_usage:
        assert len(usage_chunks) == 1
        assert chunks[-1]["choices"] == []
        assert usage_chunks[0]["usage"]["completion_tokens"] > 0
    else:
        assert usage_chunks == []


async def test_reasoning_is_returned_as_reasoning_content(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A scripted reply's reasoning goes to ``reasoning_content``, apart from the content."""
    sim.set_script({"*": [SimReply(text="Sunny.", reasoning="Paris is in France.")]})
    message = (await http.post("/v1/chat/completions", json={"messages": USER})).json()["choices"][
        0
    ]["message"]
    assert (message["content"], message["reasoning_content"]) == ("Sunny.", "Paris is in France.")


async def test_trailing_assistant_message_is_continued(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A trailing assistant message is a prefill: the reply is only the rest of the text."""
    sim.set_script({"*": ["The weather in Paris is sunny."]})
    messages = [*USER, {"role": "assistant", "content": "The weather in"}]
    body = (await http.post("/v1/chat/completions", json={"messages": messages})).json()
    assert body["choices"][0]["message"]["content"] == " Paris is sunny."


async def test_max_tokens_cuts_the_reply_with_finish_reason_length(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``max_tokens`` caps completion tokens and sets ``finish_reason`` to length."""
    sim.set_script({"*": ["a b c d e f g h"]})
    body = (
        await http.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 3})
    ).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3
    assert body["choices"][0]["message"]["content"] == "a b c"


async def test_keep_alive_serves_many_requests_on_one_connection(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Sequential requests, streamed and not, reuse one kept-alive connection."""
    sim.set_script({"*": ["ok"] * 6})
    connections: list[object] = []

    async def trace(event: str, info: dict[str, object]) -> None:
        if event == "connection.connect_tcp.complete":
            connections.append(info["return_value"])

    for stream in (False, True, False, True, False, True):
        body = {"messages": USER, "stream": stream}
        response = await http.post("/v1/chat/completions", json=body, extensions={"trace": trace})
        assert response.status_code == 200
    assert len(connections) == 1


async def test_malformed_body_is_a_400_naming_the_problem(http: httpx.AsyncClient) -> None:
    """A body that does not fit the schema gets a 400 whose message says what and where."""
    response = await http.post("/v1/chat/completions", json={"messages": [{"content": "x"}]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "Object missing required field `role` - at `$.messages[0]`" in error["message"]


async def test_models_lists_the_model_with_its_context() -> None:
    """``/v1/models`` names the configured model and reports ``max_model_len`` (vLLM)."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(model="tiny", n_ctx=2048)) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            data = (await http.get("/v1/models")).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in data] == [("tiny", 2048)]


async def test_official_sdk_parses_the_completion(sim: SimBackend) -> None:
    """The openai SDK reads text, reasoning, a tool call and usage from the sim's response.

    (The SDK's stream reader leaves its byte generator unfinished after ``[DONE]``, which
    warnings-as-errors rejects, so streams are checked on the raw SSE above instead.)
    """
    call = SimToolCall(name="get_weather", arguments={"city": "Paris"}, id="call_9")
    sim.set_script({"*": [SimReply(text="Checking.", reasoning="Weather.", tool_calls=(call,))]})
    client = openai.AsyncOpenAI(base_url=f"{sim.url}/v1", api_key="unused")
    completion = await client.chat.completions.create(model="m", messages=USER, tools=WEATHER_TOOLS)
    await client.close()
    message = completion.choices[0].message
    assert message.content == "Checking."
    assert message.model_extra == {"reasoning_content": "Weather."}
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()] == [
        ("call_9", "get_weather", '{"city":"Paris"}')
    ]
    assert completion.usage is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 0
