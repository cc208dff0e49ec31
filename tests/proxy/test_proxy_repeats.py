"""Across requests: a call already answered in the request's history is never returned again."""

from __future__ import annotations

import re
from typing import Any

import httpx
import trio
from proxy_support import WEATHER_TOOL, GatedClient, client_proxy

from forge_rt.core import InferenceRequest, JsonSchemaConstraint, Role, ToolCall

CHAT = "/v1/chat/completions"
USER: dict[str, Any] = {"role": "user", "content": "Weather and forecast for Paris?"}
FORECAST_TOOL = {
    "type": "function",
    "function": {
        "name": "get_forecast",
        "description": "Forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER_TOOL, FORECAST_TOOL]


def _answered(tool: str, args: str, result: str, call_id: str = "call_1") -> list[dict[str, Any]]:
    """A history turn: the assistant called ``tool`` and the client sent its result."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


PARIS_DONE = [USER, *_answered("get_weather", '{"city": "Paris"}', "21 C, clear")]


def _call(tool: str, **args: Any) -> list[ToolCall]:
    return [ToolCall(tool=tool, args=args)]


def _respond(message: str) -> list[ToolCall]:
    return _call("respond", message=message)


def _call_options(request: InferenceRequest) -> list[dict[str, Any]]:
    """The call objects the request's constraint admits, alone or as items of a list (one
    list of every call, or one list per tool)."""
    assert isinstance(request.constraint, JsonSchemaConstraint)
    schema = request.constraint.schema
    branches = schema.get("anyOf", [schema])
    calls = [b for b in branches if b["type"] == "object"]
    if calls:
        return calls  # single calls, beside a list of the same calls
    return [call for listed in branches for call in listed["items"]["anyOf"]]


def _offered(request: InferenceRequest) -> list[str]:
    """The tool names the request's output constraint lets the model call."""
    return [o["properties"]["name"]["const"] for o in _call_options(request)]


async def _post(client: GatedClient, body: dict[str, Any], **options: Any) -> httpx.Response:
    with trio.fail_after(20):
        async with client_proxy(client, **options) as url, httpx.AsyncClient(base_url=url) as http:
            return await http.post(CHAT, json=body)


async def test_a_repeated_call_is_answered_from_the_history() -> None:
    """A reply that only repeats an answered call is answered from the history, unseen."""
    client = GatedClient(
        [_call("get_weather", city="Paris"), _respond("It is 21 C and clear.")], gated=False
    )
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    message = response.json()["choices"][0]["message"]
    assert (message["content"], message.get("tool_calls")) == ("It is 21 C and clear.", None)
    assert response.headers["x-forge-attempts"] == "2"
    replay = client.calls[1].request.messages[len(client.calls[0].request.messages) :]
    assert [(m.role, [c.tool for c in m.tool_calls or ()]) for m in replay] == [
        (Role.ASSISTANT, ["get_weather"]),
        (Role.TOOL, []),
    ]
    assert replay[1].content.startswith("21 C, clear\n[Note] You already called `get_weather`")
    assert "call `respond`" in replay[1].content
    assert "[Note]" not in response.text


async def test_arguments_are_compared_after_validation() -> None:
    """A history call whose arguments validate to the reply's counts as the same call."""
    history = [USER, *_answered("get_forecast", '{"city": "Paris", "days": "3"}', "rain")]
    client = GatedClient(
        [_call("get_forecast", city="Paris", days=3), _respond("Rain.")], gated=False
    )
    response = await _post(client, {"model": "m", "messages": history, "tools": TOOLS})
    assert response.json()["choices"][0]["message"]["content"] == "Rain."
    assert len(client.calls) == 2


async def test_a_repeat_beside_a_fresh_call_is_dropped_and_the_fresh_call_returned() -> None:
    """Only the new call of a reply reaches the client; its repeated sibling is dropped."""
    client = GatedClient(
        [[*_call("get_weather", city="Paris"), *_call("get_forecast", city="Paris")]],
        gated=False,
    )
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_forecast"]
    assert response.headers["x-forge-attempts"] == "1"


async def test_a_repeat_beside_a_respond_answer_leaves_the_answer() -> None:
    """With the respond tool, an answer beside a repeated call is the whole reply."""
    client = GatedClient(
        [[*_call("get_weather", city="Paris"), *_respond("21 C in Paris.")]], gated=False
    )
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    choice = response.json()["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("21 C in Paris.", "stop")
    assert choice["message"].get("tool_calls") is None


async def test_other_arguments_are_a_new_call() -> None:
    """The same tool with other arguments is returned as usual."""
    client = GatedClient([_call("get_weather", city="Lyon")], gated=False)
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == '{"city":"Lyon"}'


async def test_a_call_without_a_result_in_the_history_is_returned() -> None:
    """A call the history made but never answered is not a repeat: it is returned."""
    history = [USER, _answered("get_weather", '{"city": "Paris"}', "unused")[0]]
    history.append({"role": "user", "content": "Go on."})
    client = GatedClient([_call("get_weather", city="Paris")], gated=False)
    response = await _post(client, {"model": "m", "messages": history, "tools": TOOLS})
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"


async def test_insisting_gets_the_loop_warning_and_the_tool_left_out_of_the_constraint() -> None:
    """The second repeat in a request gets the loop guard's warning; the tool leaves the schema."""
    client = GatedClient(
        [
            _call("get_weather", city="Paris"),
            _call("get_weather", city="Paris"),
            _respond("21 C."),
        ],
        gated=False,
    )
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    assert response.json()["choices"][0]["message"]["content"] == "21 C."
    first, second, third = (c.request for c in client.calls)
    assert _offered(first) == _offered(second) == ["get_weather", "get_forecast", "respond"]
    assert _offered(third) == ["get_forecast", "respond"]
    assert [t.name for t in third.tools] == ["get_weather", "get_forecast", "respond"]
    warning = third.messages[-1]
    assert warning.role is Role.TOOL
    assert warning.content.startswith("[LoopError] You called `get_weather`")


async def test_insisting_a_third_time_ends_the_request_with_a_loop_error() -> None:
    """A third repeat in one request is a 502 naming the call; no fourth inference runs."""
    client = GatedClient([_call("get_weather", city="Paris")] * 3, gated=False)
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    assert response.status_code == 502
    assert response.headers["x-should-retry"] == "false"
    error = response.json()["error"]
    assert error["code"] == "tool_call_loop"
    assert error["forge"] == {"tool": "get_weather", "arguments": '{"city":"Paris"}', "repeats": 3}
    assert len(client.calls) == 3


async def test_alternating_repeats_are_bounded_by_the_retry_budget() -> None:
    """Repeats of two different answered calls in turn end once the retry budget is spent."""
    history = [
        *PARIS_DONE,
        *_answered("get_forecast", '{"city": "Paris"}', "rain", call_id="call_2"),
    ]
    weather, forecast = _call("get_weather", city="Paris"), _call("get_forecast", city="Paris")
    client = GatedClient([weather, forecast, weather, forecast], gated=False)
    response = await _post(
        client, {"model": "m", "messages": history, "tools": TOOLS}, max_retries=3
    )
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["code"], error["forge"]["cause"]) == (
        "tool_call_retries_exhausted",
        "calls already answered in the history",
    )
    assert len(client.calls) == 4


async def test_the_repeat_guard_holds_when_streaming() -> None:
    """A streamed request gets the same hidden answer from the history and only the answer."""
    client = GatedClient([_call("get_weather", city="Paris"), _respond("It is 21 C.")], gated=False)
    body = {"model": "m", "messages": PARIS_DONE, "tools": TOOLS, "stream": True}
    response = await _post(client, body)
    assert "It is 21 C." in response.text
    assert "get_weather" not in response.text
    assert len(client.calls) == 2


def _admits_city(request: InferenceRequest, city: str) -> bool:
    """Whether the request's constraint admits get_weather(city=city) as one call."""
    for option in _call_options(request):
        if option["type"] != "object":
            continue
        string = option["properties"]["arguments"]["properties"]["city"]
        if "pattern" not in string or re.fullmatch(string["pattern"], city):
            return True
    return False


async def test_with_no_other_tool_left_the_warned_call_is_excluded_from_the_constraint() -> None:
    """tool_choice=required and one tool: after the loop warning the tool must stay, so the
    constraint excludes the warned call itself and admits the tool with other arguments."""
    paris, lyon = _call("get_weather", city="Paris"), _call("get_weather", city="Lyon")
    client = GatedClient([paris, paris, lyon], gated=False)
    body = {
        "model": "m",
        "messages": PARIS_DONE,
        "tools": [WEATHER_TOOL],
        "tool_choice": "required",
    }
    response = await _post(client, body)
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == '{"city":"Lyon"}'
    first, second, third = (c.request for c in client.calls)
    assert [_admits_city(r, "Paris") for r in (first, second, third)] == [True, True, False]
    assert _admits_city(third, "Lyon")


def _admits_answer(request: InferenceRequest, message: str) -> bool:
    """Whether the request's constraint lets a single respond call carry ``message``."""
    for option in _call_options(request):
        if option["type"] != "object" or option["properties"]["name"]["const"] != "respond":
            continue
        string = option["properties"]["arguments"]["properties"]["message"]
        if "enum" in string:  # an answer held to the request's results
            if message in string["enum"]:
                return True
            continue
        if "pattern" not in string or re.fullmatch(string["pattern"], message):
            return True
    return False


async def test_an_answer_of_markup_is_retried_shown_the_results_and_constrained_away() -> None:
    """The real 0.5B answered "<tool_response>": the retry's correction shows the answer that
    relays the history's result, its constraint admits no answer starting with "<", and the
    client gets the real answer, never the markup."""
    client = GatedClient([_respond("<tool_response>"), _respond("21 C, clear")], gated=False)
    response = await _post(client, {"model": "m", "messages": PARIS_DONE, "tools": TOOLS})
    assert response.json()["choices"][0]["message"]["content"] == "21 C, clear"
    first, second = (c.request for c in client.calls)
    assert _admits_answer(first, "<tool_response>")
    assert not _admits_answer(second, "<tool_response>")
    assert _admits_answer(second, "21 C, clear")
    nudge = second.messages[-1].content
    assert '{"message": "21 C, clear"}' in nudge
    assert "<tool_" not in nudge
    assert "tool_response" not in response.text
