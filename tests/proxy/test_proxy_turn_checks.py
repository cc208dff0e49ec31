"""The whole-turn checks across requests: the request's history is the turn so far, so an
answer that leaves a listed item out, or uses nothing the tools returned, is sent back once,
out of the client's sight."""

from __future__ import annotations

from typing import Any

import httpx
import trio
from proxy_support import WEATHER_TOOL, GatedClient, client_proxy

from forge_rt.core import ToolCall

CHAT = "/v1/chat/completions"


def _turn(question: str, city: str, result: str) -> list[dict[str, Any]]:
    """The user's question, a get_weather call for ``city`` and the client's result."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'},
    }
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]


async def _post(client: GatedClient, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "m", "messages": messages, "tools": [WEATHER_TOOL]}
    with trio.fail_after(20):
        async with client_proxy(client) as url, httpx.AsyncClient(base_url=url) as http:
            return await http.post(CHAT, json=body)


def _respond(message: str) -> list[ToolCall]:
    return [ToolCall(tool="respond", args={"message": message})]


async def test_an_answer_for_one_of_two_asked_cities_gets_the_other_city_looked_up() -> None:
    """ "Oslo or Cairo?" with Oslo answered in the history: the answer about Oslo alone is sent
    back with Cairo's call, and the client gets that call to run."""
    history = _turn("Which is warmer right now, Oslo or Cairo?", "Oslo", "Weather in Oslo: 3C")
    client = GatedClient(
        [_respond("Weather in Oslo: 3C"), [ToolCall(tool="get_weather", args={"city": "Cairo"})]],
        gated=False,
    )
    response = await _post(client, history)
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert (call["function"]["name"], call["function"]["arguments"]) == (
        "get_weather",
        '{"city":"Cairo"}',
    )
    assert response.headers["x-forge-attempts"] == "2"
    [correction] = client.calls[1].request.messages[len(client.calls[0].request.messages) + 1 :]
    assert correction.content.startswith("[CoverageError] Your request names 'Oslo' and 'Cairo'")
    assert "CoverageError" not in response.text


async def test_an_answer_from_nowhere_after_the_history_results_is_sent_back_once() -> None:
    history = _turn("What is the weather in Rome?", "Rome", "Weather in Rome: 24C, sunny")
    client = GatedClient(
        [_respond("You complete your request."), _respond("It is 24C and sunny in Rome.")],
        gated=False,
    )
    response = await _post(client, history)
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "It is 24C and sunny in Rome."
    assert response.headers["x-forge-attempts"] == "2"
    assert "AnswerError" not in response.text


async def test_an_answer_that_covers_the_turn_is_returned_at_once() -> None:
    history = _turn("What is the weather in Rome?", "Rome", "Weather in Rome: 24C, sunny")
    client = GatedClient([_respond("24C and sunny.")], gated=False)
    response = await _post(client, history)
    assert response.json()["choices"][0]["message"]["content"] == "24C and sunny."
    assert response.headers["x-forge-attempts"] == "1"
