"""Per-request guardrails: retries with hidden corrections, tool_choice, respond, replay, metrics."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from proxy_support import WEATHER_TOOL, sim_proxy
from pydantic import ValidationError

from forge_rt.backends.sim import Dialect, FailureRates, SimConfig, SimReply, SimToolCall
from forge_rt.core import Message, MessageType, Role
from forge_rt.guardrails._gbnf import Gbnf
from forge_rt.proxy import KeyProfile, ProxyConfig, ReasoningReplay
from forge_rt.proxy._engine import apply_reasoning_replay

CHAT = "/v1/chat/completions"
USER: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]


def _body(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": USER, "tools": [WEATHER_TOOL], **extra}


class Recorder:
    """An oracle that answers from a list and records what each request looked like."""

    def __init__(self, *intents: Any) -> None:
        self.intents = list(intents)
        self.views: list[Any] = []

    def __call__(self, view: Any) -> Any:
        self.views.append(view)
        return self.intents.pop(0)


async def test_bare_text_is_retried_with_a_nudge_the_client_never_sees() -> None:
    """Prose instead of a call gets a corrective turn at the backend; the client gets the call."""
    oracle = Recorder(
        "I will look up the weather for you.",
        SimToolCall(name="get_weather", arguments={"city": "Paris"}),
    )
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), constrain="never") as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    message = response.json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    assert message["content"] is None
    first, second = oracle.views
    assert len(second.messages) == len(first.messages) + 2
    failed, nudge = second.messages[-2:]
    assert (failed.role, failed.content) == ("assistant", "I will look up the weather for you.")
    assert nudge.role == "user"
    assert "get_weather" in nudge.content
    assert "nudge" not in response.text.lower()
    assert nudge.content not in response.text
    assert response.headers["x-forge-rules"] == "retry_nudges=1"


async def test_text_is_the_answer_where_the_constraint_offered_text() -> None:
    """With prose_answers the grammar admits text beside the calls: text without a call is
    the model's answer to the client, as the chat APIs allow under tool_choice auto."""
    oracle = Recorder("No tool of mine forecasts the tide.")
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), prose_answers=True) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "No tool of mine forecasts the tide."
    assert message.get("tool_calls") is None
    assert response.headers["x-forge-attempts"] == "1"
    assert response.headers["x-forge-rules"] == "prose_answers=1"
    [view] = oracle.views
    assert view.constraint == "grammar"


async def test_where_a_call_is_required_the_constraint_offers_no_text() -> None:
    """tool_choice=required: text is never the answer, so the constraint is the calls alone
    (a JSON schema) and the model's text intent comes out as a call."""
    oracle = Recorder("No tool of mine forecasts the tide.")
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), prose_answers=True) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body(tool_choice="required"))
    message = response.json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    [view] = oracle.views
    assert view.grammar is None
    assert view.schema is not None


async def test_unknown_tool_is_corrected_on_the_tool_channel() -> None:
    """A call of a tool that does not exist is answered with a tool error naming real tools."""
    oracle = Recorder(
        SimToolCall(name="weather_lookup", arguments={"city": "Paris"}),
        SimToolCall(name="get_weather", arguments={"city": "Paris"}),
    )
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), constrain="never") as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    assert response.headers["x-forge-attempts"] == "2"
    correction = oracle.views[1].messages[-1]
    assert correction.role == "tool"
    assert "get_weather" in correction.content


async def test_required_tool_choice_offers_no_respond_and_demands_a_call() -> None:
    """tool_choice=required: no respond tool is injected, and prose is retried, not answered."""
    oracle = Recorder("Sunny.", SimToolCall(name="get_weather", arguments={"city": "Paris"}))
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), constrain="never") as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body(tool_choice="required"))
    assert [t.name for t in oracle.views[0].tools] == ["get_weather"]
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"


async def test_named_tool_choice_must_name_a_request_tool() -> None:
    """tool_choice naming a tool the request lacks is a 400 naming the tools."""
    choice = {"type": "function", "function": {"name": "get_time"}}
    with trio.fail_after(20):
        async with sim_proxy(SimConfig()) as (_sim, url), httpx.AsyncClient(base_url=url) as http:
            response = await http.post(CHAT, json=_body(tool_choice=choice))
    assert response.status_code == 400
    assert "get_time" in response.json()["error"]["message"]
    assert "get_weather" in response.json()["error"]["message"]


async def test_a_client_tool_named_respond_is_the_clients_own() -> None:
    """If the client already has a tool called respond, its calls come back as tool calls."""
    tool = {
        "type": "function",
        "function": {
            "name": "respond",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
        },
    }
    script = SimConfig(
        script={
            "*": [SimReply(tool_calls=(SimToolCall(name="respond", arguments={"message": "hi"}),))]
        }
    )
    with trio.fail_after(20):
        async with sim_proxy(script) as (_sim, url), httpx.AsyncClient(base_url=url) as http:
            response = await http.post(CHAT, json={"model": "m", "messages": USER, "tools": [tool]})
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "respond"


async def test_without_respond_tool_prose_is_a_valid_answer() -> None:
    """With the respond tool off, a prose reply is the answer, with no retry."""
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(script={"*": ["It is sunny in Paris."]}), respond_tool=False) as (
                _sim,
                url,
            ),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    assert response.json()["choices"][0]["message"]["content"] == "It is sunny in Paris."
    assert response.headers["x-forge-attempts"] == "1"


async def test_without_respond_tool_a_broken_call_is_still_retried() -> None:
    """With the respond tool off, a reply that is a broken call is still corrected."""
    script = SimConfig(
        script={
            "*": [
                '{"name": "get_weather", "arguments": {"town": "Paris"}}',
                SimReply(
                    tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}),)
                ),
            ]
        }
    )
    with trio.fail_after(20):
        async with (
            sim_proxy(script, respond_tool=False) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert response.headers["x-forge-attempts"] == "2"


async def test_constrained_decoding_sends_the_call_schema_and_reads_the_reply() -> None:
    """constrain=auto sends the tool-call schema; the constrained JSON comes back as a call."""
    oracle = Recorder(SimToolCall(name="get_weather", arguments={"city": "Paris"}))
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), constrain="auto") as (sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
            dialects = [r.dialect for r in sim.stats.replies]
    assert oracle.views[0].constraint is not None
    assert dialects == [Dialect.CONSTRAINED]
    [call] = response.json()["choices"][0]["message"]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (
        "get_weather",
        {"city": "Paris"},
    )


def test_reasoning_replay_policies() -> None:
    """none drops earlier reasoning, keep-last keeps the latest block, full keeps every one."""
    history = [
        Message.user("q1"),
        Message(role=Role.ASSISTANT, content="think 1", type=MessageType.REASONING),
        Message.assistant_text("a1"),
        Message.user("q2"),
        Message(role=Role.ASSISTANT, content="think 2", type=MessageType.REASONING),
        Message.assistant_text("a2"),
    ]

    def kept(policy: ReasoningReplay) -> list[str]:
        out = apply_reasoning_replay(history, policy)
        return [m.content for m in out if m.type is MessageType.REASONING]

    assert kept(ReasoningReplay.NONE) == []
    assert kept(ReasoningReplay.KEEP_LAST) == ["think 2"]
    assert kept(ReasoningReplay.FULL) == ["think 1", "think 2"]


@pytest.mark.parametrize(
    ("policy", "seen"),
    [(ReasoningReplay.NONE, None), (ReasoningReplay.FULL, "I considered the sky.")],
    ids=["none", "full"],
)
async def test_reasoning_replay_reaches_the_backend_per_policy(
    policy: ReasoningReplay, seen: str | None
) -> None:
    """The backend sees a history reply's reasoning only when the policy replays it."""
    oracle = Recorder("answer")
    messages = [
        *USER,
        {"role": "assistant", "content": "Sunny.", "reasoning_content": "I considered the sky."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), reasoning_replay=policy) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            await http.post(CHAT, json={"model": "m", "messages": messages})
    assistant = next(m for m in oracle.views[0].messages if m.role == "assistant")
    assert assistant.reasoning == seen


async def test_metrics_count_retries_rescues_and_requests() -> None:
    """/metrics counts the requests, the rescued dialect and the retry one took."""
    weather = SimToolCall(name="get_weather", arguments={"city": "Paris"})
    config = SimConfig(
        # Request 1: a call written as bare JSON (rescued). Request 2: prose, retried -- the
        # retry is constrained (escalation), so it is not a rescue.
        oracle=Recorder(weather, "Let me see.", weather),
        rates=FailureRates(bare_json=1.0),
    )
    with trio.fail_after(20):
        async with (
            # Escalated to a JSON schema: a grammar that admits text has its calls read by
            # rescue parsing, which would count the escalated call as a rescue too.
            sim_proxy(config, constrain="never", prose_answers=False) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            await http.post(CHAT, json=_body())
            await http.post(CHAT, json=_body())
            metrics = (await http.get("/metrics")).text
    assert 'forge_proxy_retries_total{reason="no_call"} 1.0' in metrics
    assert 'forge_proxy_rule_verdicts_total{rule="retry_nudges"} 1.0' in metrics
    assert 'forge_proxy_rescues_total{dialect="bare_json"} 1.0' in metrics
    assert (
        'forge_proxy_requests_total{api="openai",endpoint="/v1/chat/completions",'
        'status="200",stream="false"} 2.0'
    ) in metrics
    assert "forge_proxy_queue_depth 0.0" in metrics
    assert "forge_proxy_request_duration_seconds_bucket" in metrics


async def test_usage_reports_context_and_each_clients_tokens() -> None:
    """/forge/usage shows the backend's context, the sources read and tokens per API key."""
    keys = (KeyProfile(key="sk-research-012345", name="research"),)
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(script={"*": ["ok"]}, n_ctx=8192), api_keys=keys) as (
                _sim,
                url,
            ),
            httpx.AsyncClient(base_url=url, headers={"x-api-key": "sk-research-012345"}) as http,
        ):
            await http.post(CHAT, json={"model": "m", "messages": USER})
            usage = (await http.get("/forge/usage")).json()
    assert usage["context_tokens"] == 8192
    assert usage["sources"]["llama-server"]["available"] is True
    assert usage["clients"]["research"] > 0
    assert usage["slot"]["completed"] == 1


async def test_prose_beside_a_native_call_reaches_both_apis() -> None:
    """Text the model wrote next to a valid call is kept: content with tool_calls, a text block."""
    reply = SimReply(
        text="Let me check that.",
        tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}),),
    )
    anthropic_tool = {
        "name": "get_weather",
        "input_schema": WEATHER_TOOL["function"]["parameters"],
    }
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(script={"*": [reply, reply]})) as (
                _sim,
                url,
            ),
            httpx.AsyncClient(base_url=url) as http,
        ):
            openai_reply = (await http.post(CHAT, json=_body())).json()
            anthropic_reply = (
                await http.post(
                    "/v1/messages",
                    json={
                        "model": "m",
                        "max_tokens": 64,
                        "messages": USER,
                        "tools": [anthropic_tool],
                    },
                )
            ).json()
    message = openai_reply["choices"][0]["message"]
    assert message["content"] == "Let me check that."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    assert [b["type"] for b in anthropic_reply["content"]] == ["text", "tool_use"]
    assert anthropic_reply["content"][0]["text"] == "Let me check that."


async def test_a_repeated_tool_list_is_compiled_once() -> None:
    """The same tools in every request are compiled into validators once, then reused."""
    with trio.fail_after(20):
        async with (
            sim_proxy(
                SimConfig(
                    script={
                        "*": [
                            SimReply(
                                tool_calls=(
                                    SimToolCall(name="respond", arguments={"message": "hi"}),
                                )
                            )
                        ]
                        * 3
                    }
                )
            ) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            for _ in range(3):
                assert (await http.post(CHAT, json=_body())).status_code == 200
            metrics = (await http.get("/metrics")).text
    assert "forge_proxy_tool_specs_compiled_total 1.0" in metrics
    assert "forge_proxy_tool_specs_reused_total 2.0" in metrics


async def test_a_rule_named_in_rules_off_is_off_for_every_request() -> None:
    """``rules_off`` turns guardrail rules off by name: without ``retry_nudges`` prose is
    the answer, not sent back, and the backend is asked once."""
    oracle = Recorder("The barometer says rain by noon.")
    with trio.fail_after(20):
        async with (
            sim_proxy(
                SimConfig(oracle=oracle),
                constrain="never",
                prose_answers=False,
                rules_off=("retry_nudges",),
            ) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "The barometer says rain by noon."
    assert len(oracle.views) == 1


def test_an_unknown_rule_in_rules_off_is_refused_with_the_real_names() -> None:
    with pytest.raises(
        ValidationError, match=r"unknown guardrail rule 'retry_nudge'.*retry_nudges"
    ):
        ProxyConfig(rules_off=("retry_nudge",))


async def test_a_call_of_an_unrelated_tool_is_drawn_again_without_it() -> None:
    """A first call of a tool that shares no word with the request is not answered by a note
    (a small model copies the note into its answer): the same history is sent again, the
    tool left out of the grammar, and the model's own answer goes to the client."""
    tide = {
        "type": "function",
        "function": {
            "name": "tide_table",
            "description": "Predict the tide heights of a harbour on a given date.",
            "parameters": {
                "type": "object",
                "properties": {"harbour": {"type": "string"}},
                "required": ["harbour"],
            },
        },
    }
    oracle = Recorder(
        SimToolCall(name="tide_table", arguments={"harbour": "Vesk"}),
        SimToolCall(name="respond", arguments={"message": "I do not know who painted it."}),
    )
    question = [{"role": "user", "content": "Who painted the chapel ceiling in Vesk?"}]
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), prose_answers=True) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(
                CHAT, json={"model": "m", "messages": question, "tools": [tide]}
            )
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "I do not know who painted it."
    assert message.get("tool_calls") is None
    first, second = oracle.views
    assert second.messages == first.messages
    assert first.grammar is not None
    assert second.grammar is not None
    assert "tide_table" in first.grammar
    assert "tide_table" not in second.grammar
    assert "unrelated_tools=1" in response.headers["x-forge-rules"]


async def test_by_default_a_constrained_reply_is_a_list_of_one_tool_s_calls() -> None:
    """The proxy's default shape (``fan_out``): one list per tool, so a request for the same
    call over several items gets every item in one reply, and a mixed list is not offered."""
    harbour = {
        "type": "function",
        "function": {
            "name": "tide_table",
            "description": "Tide heights of a harbour.",
            "parameters": {
                "type": "object",
                "properties": {"harbour": {"type": "string"}},
                "required": ["harbour"],
            },
        },
    }
    cities = ("Vesk", "Orl", "Tamsby")
    listed = [{"name": "get_weather", "arguments": {"city": city}} for city in cities]
    oracle = Recorder(json.dumps(listed))  # the list as the model writes it under the grammar
    ask = [{"role": "user", "content": "Weather in Vesk, Orl and Tamsby?"}]
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle)) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            body = {"model": "m", "messages": ask, "tools": [WEATHER_TOOL, harbour]}
            response = await http.post(CHAT, json=body)
    calls = response.json()["choices"][0]["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == list(cities)
    [view] = oracle.views
    assert view.grammar is not None
    grammar = Gbnf(view.grammar)
    weather = {"name": "get_weather", "arguments": {"city": "Orl"}}
    tide = {"name": "tide_table", "arguments": {"harbour": "Orl"}}
    assert grammar.accepts(json.dumps([weather, weather]))
    assert not grammar.accepts(json.dumps([weather, tide]))


async def test_a_looping_answer_is_stopped_for_a_client_that_does_not_stream() -> None:
    """The proxy reads the backend's stream even when the client asked for one whole reply, so
    a respond message that writes the same sentences over and over is stopped there and
    answered once, not run to the token cap and sent back; the answer says it was stopped."""
    once = "The ferry to Orl left at nine. It came back empty."
    oracle = Recorder(SimToolCall(name="respond", arguments={"message": " ".join([once] * 40)}))
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle)) as (_sim, url),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post(CHAT, json=_body())
    streamed = [view.stream for view in oracle.views]
    assert streamed == [True]
    assert response.json()["choices"][0]["message"]["content"] == once
    assert response.headers["x-forge-attempts"] == "1"
    assert response.headers["x-forge-repetition-stops"] == "1"


RAMBLE = " ".join(["The quays of Orl keep no berth tables I can read."] * 3)


async def _cut_at_the_limit(rules_off: tuple[str, ...]) -> tuple[httpx.Response, Recorder]:
    """A prose answer cut at the client's ``max_tokens``, for a client that does not stream."""
    oracle = Recorder(*[RAMBLE] * 4)
    with trio.fail_after(20):
        async with (
            sim_proxy(SimConfig(oracle=oracle), prose_answers=True, rules_off=rules_off) as (
                _sim,
                url,
            ),
            httpx.AsyncClient(base_url=url) as http,
        ):
            return await http.post(CHAT, json=_body(max_tokens=12)), oracle


async def test_an_answer_cut_at_the_token_limit_is_the_answer_with_cut_answers() -> None:
    """The client gets the text so far with ``finish_reason: length``, as a streaming client
    sees it, after one reply."""
    response, oracle = await _cut_at_the_limit(())
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert RAMBLE.startswith(choice["message"]["content"])
    assert 0 < len(choice["message"]["content"]) < len(RAMBLE)
    assert len(oracle.views) == 1
    assert response.headers["x-forge-rules"] == "cut_answers=1"


async def test_without_cut_answers_an_answer_cut_at_the_limit_is_asked_for_again() -> None:
    response, oracle = await _cut_at_the_limit(("cut_answers",))
    assert len(oracle.views) == 4
    assert response.status_code == 502
