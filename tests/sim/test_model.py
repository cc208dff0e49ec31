"""The seeded-random small model: what it intends (the oracle) and how it writes it (dialects)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from sim_helpers import WEATHER_TOOLS, tool_names, user

from forge_rt.backends.sim import (
    Dialect,
    FailureRates,
    RequestView,
    SimBackend,
    SimConfig,
    SimToolCall,
)

LOOKUP_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {"term": {"type": "string", "enum": ["alpha", "beta"]}},
            "required": ["term"],
        },
    },
}


async def _ask(config: SimConfig, messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            response = await http.post("/v1/chat/completions", json={"messages": messages, **body})
    assert response.status_code == 200, response.text
    message: dict[str, Any] = response.json()["choices"][0]["message"]
    return message


TEXT_DIALECTS = {
    "bare_json": '{"name": "get_weather", "arguments": {"city": "example city"}}',
    "fenced_json": (
        '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "example city"\n'
        "  }\n}\n```"
    ),
    "hermes": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "example city"}}\n</tool_call>'
    ),
    "qwen_coder": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nexample city\n</parameter>\n"
        "</function>\n</tool_call>"
    ),
    "mistral": '[TOOL_CALLS]get_weather{"city": "example city"}',
}


@pytest.mark.parametrize("dialect", list(TEXT_DIALECTS))
async def test_text_dialect_renders_the_intended_call_as_documented(dialect: str) -> None:
    """A call dialect writes the intended call as exactly this text in content, with no calls."""
    config = SimConfig(rates=FailureRates(**{dialect: 1.0}))
    message = await _ask(config, user("weather?"), tools=WEATHER_TOOLS)
    assert message.get("tool_calls") is None
    assert message["content"] == TEXT_DIALECTS[dialect]


async def test_bare_text_is_prose_without_a_call() -> None:
    """``bare_text`` is prose that names the tool in words but carries no call syntax."""
    message = await _ask(
        SimConfig(rates=FailureRates(bare_text=1.0)), user("weather?"), tools=WEATHER_TOOLS
    )
    assert message.get("tool_calls") is None
    assert "get weather" in message["content"]
    assert not set("{}<>[]") & set(message["content"])


async def test_unknown_tool_is_a_native_call_to_a_tool_not_offered() -> None:
    """``unknown_tool`` calls natively, with an invented name that is not among the tools."""
    message = await _ask(
        SimConfig(rates=FailureRates(unknown_tool=1.0)), user("weather?"), tools=WEATHER_TOOLS
    )
    name = message["tool_calls"][0]["function"]["name"]
    assert name not in tool_names(WEATHER_TOOLS)
    assert name


async def test_wrong_args_drop_a_required_argument_or_break_its_type() -> None:
    """``wrong_args`` calls the intended tool with arguments its schema rejects."""
    message = await _ask(
        SimConfig(rates=FailureRates(wrong_args=1.0)), user("weather?"), tools=WEATHER_TOOLS
    )
    function = message["tool_calls"][0]["function"]
    args = json.loads(function["arguments"])
    assert function["name"] == "get_weather"
    assert not isinstance(args.get("city"), str)


async def test_premature_terminal_calls_respond_before_the_other_tools() -> None:
    """``premature_terminal`` calls ``respond`` while ``get_weather`` was never called."""
    message = await _ask(
        SimConfig(rates=FailureRates(premature_terminal=1.0)),
        user("weather?"),
        tools=WEATHER_TOOLS,
    )
    function = message["tool_calls"][0]["function"]
    assert function["name"] == "respond"
    assert json.loads(function["arguments"]) == {"message": "All requested steps are complete."}


async def test_dialects_are_recorded_per_reply() -> None:
    """Each reply's dialect and intended call are recorded in ``stats``."""
    config = SimConfig(rates=FailureRates(hermes=1.0))
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            await http.post(
                "/v1/chat/completions", json={"messages": user("w"), "tools": WEATHER_TOOLS}
            )
    assert sim.stats.dialects == {"hermes": 1}
    record = sim.stats.replies[-1]
    assert (record.dialect, record.intent) == (
        Dialect.HERMES,
        SimToolCall(name="get_weather", arguments={"city": "example city"}),
    )
    assert record.content == TEXT_DIALECTS["hermes"]
    assert record.completed


def _call_turn(name: str, arguments: str, index: int) -> list[dict[str, Any]]:
    call = {
        "id": f"c{index}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{index}", "content": "done"},
    ]


async def test_default_oracle_calls_each_tool_once_then_respond() -> None:
    """The perfect model calls the tools in the order offered, keeping ``respond`` for last."""
    tools = [WEATHER_TOOLS[1], WEATHER_TOOLS[0], LOOKUP_TOOL]  # respond offered first
    messages = user("do it")
    called: list[tuple[str, dict[str, Any]]] = []
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig()) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            for turn in range(3):
                body = {"messages": messages, "tools": tools}
                response = await http.post("/v1/chat/completions", json=body)
                function = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]
                called.append((function["name"], json.loads(function["arguments"])))
                messages += _call_turn(function["name"], function["arguments"], turn)
    assert called == [
        ("get_weather", {"city": "example city"}),
        ("lookup", {"term": "alpha"}),
        ("respond", {"message": "All requested steps are complete. done"}),  # relays a result
    ]


async def test_default_oracle_answers_in_text_when_no_respond_tool() -> None:
    """With every tool called and no ``respond`` tool, the perfect model answers in text."""
    messages = user("w") + _call_turn("get_weather", '{"city":"x"}', 0)
    message = await _ask(SimConfig(), messages, tools=[WEATHER_TOOLS[0]])
    assert (message["content"], message.get("tool_calls")) == (
        "All requested steps are complete. done",  # the last tool result, relayed
        None,
    )


@pytest.mark.parametrize(
    ("tool_choice", "expected"),
    [
        ("none", None),
        ({"type": "function", "function": {"name": "respond"}}, "respond"),
    ],
    ids=["none", "forced"],
)
async def test_default_oracle_follows_tool_choice(tool_choice: Any, expected: str | None) -> None:
    """``tool_choice`` none makes it answer in text; naming a function makes it call that one."""
    message = await _ask(SimConfig(), user("w"), tools=WEATHER_TOOLS, tool_choice=tool_choice)
    calls = message.get("tool_calls") or [{"function": {"name": None}}]
    assert calls[0]["function"]["name"] == expected


async def test_custom_oracle_sees_the_request_and_decides() -> None:
    """A user oracle gets the API-independent view and its intent is what the model writes."""
    seen: list[RequestView] = []

    def oracle(view: RequestView) -> SimToolCall | str:
        seen.append(view)
        return SimToolCall(name="lookup", arguments={"term": view.messages[-1].content})

    message = await _ask(SimConfig(oracle=oracle), user("beta"), tools=[LOOKUP_TOOL])
    assert message["tool_calls"][0]["function"]["arguments"] == '{"term":"beta"}'
    assert [(v.api, v.conversation, v.turn, [t.name for t in v.tools]) for v in seen] == [
        ("openai", "beta", 0, ["lookup"])
    ]


async def test_oracle_error_answers_500_and_fails_the_server() -> None:
    """An oracle that raises is a test bug: the client gets a 500, ``serve`` raises the error."""
    statuses: list[int] = []

    def oracle(view: RequestView) -> str:
        raise LookupError("no plan for this request")

    async def serve_and_ask() -> None:
        async with (
            SimBackend.serve(SimConfig(oracle=oracle)) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            response = await http.post("/v1/chat/completions", json={"messages": user("x")})
            statuses.append(response.status_code)
            await trio.sleep_forever()  # the server's failure cancels this block

    with trio.fail_after(10), pytest.raises(LookupError, match=r"^no plan for this request$"):
        await serve_and_ask()
    assert statuses in ([], [500])


MIXED = FailureRates(
    bare_json=0.1,
    fenced_json=0.1,
    hermes=0.1,
    qwen_coder=0.1,
    mistral=0.1,
    bare_text=0.1,
    unknown_tool=0.1,
    wrong_args=0.1,
    premature_terminal=0.1,
)


async def _replies(seed: int, conversations: list[str], concurrent: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    config = SimConfig(seed=seed, rates=MIXED, n_slots=3)
    with trio.fail_after(20):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):

            async def one(conversation: str) -> None:
                body = {"messages": user(conversation), "tools": WEATHER_TOOLS}
                response = await http.post("/v1/chat/completions", json=body)
                message = response.json()["choices"][0]["message"]
                out[conversation] = (message["content"], message.get("tool_calls"))

            if concurrent:
                async with trio.open_nursery() as nursery:
                    for conversation in conversations:
                        nursery.start_soon(one, conversation)
            else:
                for conversation in conversations:
                    await one(conversation)
    return out


CONVERSATIONS = [f"task number {i}" for i in range(16)]


async def test_same_seed_same_replies() -> None:
    """Two servers with the same seed answer the same requests identically."""
    first = await _replies(7, CONVERSATIONS, concurrent=False)
    second = await _replies(7, CONVERSATIONS, concurrent=False)
    assert first == second
    assert len({str(v) for v in first.values()}) > 3  # the rates really mixed the dialects


async def test_other_seed_other_replies() -> None:
    """A different seed draws different renderings for the same requests."""
    assert await _replies(7, CONVERSATIONS, concurrent=False) != await _replies(
        8, CONVERSATIONS, concurrent=False
    )


async def test_concurrency_does_not_change_replies() -> None:
    """Conversations sent all at once get the replies they get one by one."""
    sequential = await _replies(3, CONVERSATIONS, concurrent=False)
    concurrent = await _replies(3, CONVERSATIONS, concurrent=True)
    assert sequential == concurrent
