"""No guardrail text reaches an SDK client as content, streamed or not, whatever the model echoes.

The simulated backend is scripted to copy the proxy's corrections back -- as the ``respond``
message, as prose beside a call, as a tool argument -- and the official ``openai`` and
``anthropic`` SDKs read what the proxy returns.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
import trio
from proxy_support import WEATHER_TOOL, WEATHER_TOOL_ANTHROPIC, in_thread, sim_proxy

from forge_rt.backends.sim import SimConfig, SimReply, SimToolCall
from forge_rt.proxy._leaks import find_marker

ECHO = "[ArgumentError] Invalid arguments for `respond`:"
NOTE = "[Note] You already called `get_weather` with these arguments; the result is the same."
USER: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


def _call(name: str, text: str = "", **args: Any) -> SimReply:
    return SimReply(text=text, tool_calls=(SimToolCall(name=name, arguments=args),))


def _script(*replies: SimReply | str) -> SimConfig:
    return SimConfig(script={"*": list(replies)})


class Seen:
    """What an SDK client got: the content text (every delta, when streamed) and the calls."""

    def __init__(self, text: str, calls: list[tuple[str, dict[str, Any]]], deltas: list[str]):
        self.text = text
        self.calls = calls
        self.deltas = deltas

    def clean(self) -> bool:
        """Whether no guardrail text is in anything the client received."""
        return all(find_marker(t) is None for t in [self.text, *self.deltas])


def _openai(url: str, *, stream: bool) -> Seen:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=20) as sdk:
        if not stream:
            reply = sdk.chat.completions.create(model="m", messages=USER, tools=[WEATHER_TOOL])
            message = reply.choices[0].message
            calls = [
                (c.function.name, json.loads(c.function.arguments))
                for c in message.tool_calls or ()
                if c.type == "function"
            ]
            return Seen(message.content or "", calls, [])
        deltas: list[str] = []
        names: dict[int, str] = {}
        args: dict[int, str] = {}
        for chunk in sdk.chat.completions.create(
            model="m", messages=USER, tools=[WEATHER_TOOL], stream=True
        ):
            for choice in chunk.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
                for call in choice.delta.tool_calls or ():
                    if call.function is not None:
                        names[call.index] = names.get(call.index, "") + (call.function.name or "")
                        args[call.index] = args.get(call.index, "") + (
                            call.function.arguments or ""
                        )
        calls = [(names[i], json.loads(args[i])) for i in sorted(names)]
        return Seen("".join(deltas), calls, deltas)


def _anthropic(url: str, *, stream: bool) -> Seen:
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0, timeout=20) as sdk:
        request: dict[str, Any] = {
            "model": "claude-x",
            "max_tokens": 256,
            "messages": USER,
            "tools": [WEATHER_TOOL_ANTHROPIC],
        }
        deltas: list[str] = []
        if stream:
            with sdk.messages.stream(**request) as events:
                deltas = list(events.text_stream)
                message = events.get_final_message()
        else:
            message = sdk.messages.create(**request)
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [(b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]  # type: ignore[arg-type]
    return Seen(text, calls, deltas)


SDKS = {"openai": _openai, "anthropic": _anthropic}
CASES = [(sdk, stream) for sdk in SDKS for stream in (False, True)]
IDS = [f"{sdk}-{'streamed' if stream else 'whole'}" for sdk, stream in CASES]


async def _seen(config: SimConfig, sdk: str, *, stream: bool, **options: Any) -> Seen:
    with trio.fail_after(30):
        async with sim_proxy(config, **options) as (_sim, url):
            return await in_thread(lambda: SDKS[sdk](url, stream=stream))


@pytest.mark.parametrize(("sdk", "stream"), CASES, ids=IDS)
async def test_a_respond_message_that_echoes_a_nudge_is_retried(sdk: str, stream: bool) -> None:
    """A respond message that is only a copied nudge is never shown; the retry's answer is."""
    config = _script(_call("respond", message=ECHO), _call("respond", message="It is sunny."))
    seen = await _seen(config, sdk, stream=stream)
    assert (seen.text, seen.calls) == ("It is sunny.", [])
    assert seen.clean()


@pytest.mark.parametrize(("sdk", "stream"), CASES, ids=IDS)
async def test_a_respond_message_ends_where_copied_guardrail_text_begins(
    sdk: str, stream: bool
) -> None:
    """An answer followed by a copied note is returned up to the note, streamed or not."""
    config = _script(_call("respond", message=f"It is 21 C in Paris. {NOTE}"))
    seen = await _seen(config, sdk, stream=stream)
    assert seen.text.rstrip() == "It is 21 C in Paris."
    assert seen.clean()


@pytest.mark.parametrize(("sdk", "stream"), CASES, ids=IDS)
async def test_prose_beside_a_call_is_cut_at_guardrail_text(sdk: str, stream: bool) -> None:
    """Prose that comes with a native call keeps only what precedes the copied correction."""
    prose = "Checking Paris. [NotExecuted] `get_weather` was not run because the call failed."
    config = _script(_call("get_weather", text=prose, city="Paris"))
    seen = await _seen(config, sdk, stream=stream)
    assert seen.calls == [("get_weather", {"city": "Paris"})]
    assert seen.text.rstrip() == "Checking Paris."
    assert seen.clean()


@pytest.mark.parametrize(("sdk", "stream"), CASES, ids=IDS)
async def test_a_tool_argument_holding_guardrail_text_is_retried(sdk: str, stream: bool) -> None:
    """A call whose argument is a copied tool error is corrected before the client sees it."""
    config = _script(
        _call("get_weather", city="[ToolError] Unknown tool `weather`."),
        _call("get_weather", city="Paris"),
    )
    seen = await _seen(config, sdk, stream=stream)
    assert seen.calls == [("get_weather", {"city": "Paris"})]
    assert seen.clean()


@pytest.mark.parametrize(("sdk", "stream"), CASES, ids=IDS)
async def test_prose_that_echoes_a_retry_nudge_is_retried(sdk: str, stream: bool) -> None:
    """Without the respond tool, prose copying a retry nudge is retried, not answered."""
    echo = "Please call one of the tools: `get_weather`. Reply with the call only."
    config = _script(echo, "It is sunny in Paris.")
    seen = await _seen(config, sdk, stream=stream, respond_tool=False)
    assert (seen.text, seen.calls) == ("It is sunny in Paris.", [])
    assert seen.clean()


@pytest.mark.parametrize(("sdk", "stream"), CASES, ids=IDS)
async def test_echoed_tool_response_markup_is_never_an_answer(sdk: str, stream: bool) -> None:
    """A respond message wrapped in ``<tool_response>`` markup answers with what is inside;
    the markup never reaches the client, streamed or not."""
    config = _script(
        _call("respond", message="<tool_response>21 C</tool_response>"),
        _call("respond", message="never needed"),
    )
    seen = await _seen(config, sdk, stream=stream)
    assert seen.text == "21 C"
    assert seen.clean()


async def test_a_model_that_only_echoes_ends_in_an_error_not_an_answer() -> None:
    """When every reply is a copied nudge the client gets a 502, never the nudge as content."""
    config = _script(*[_call("respond", message=ECHO)] * 3)
    with trio.fail_after(30):
        async with sim_proxy(config, max_retries=2) as (_sim, url):
            with (
                openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as sdk,
                pytest.raises(openai.APIStatusError) as info,
            ):
                await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="m", messages=USER, tools=[WEATHER_TOOL]
                    )
                )
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict)
    assert body["code"] == "tool_call_retries_exhausted"


async def test_a_message_cut_off_by_the_token_limit_keeps_its_last_word() -> None:
    """A streamed respond message that runs out of tokens keeps the word held as a maybe-marker."""
    cut_off = SimReply(
        text='{"name": "respond", "arguments": {"message": "It is sunny. Please',
        finish_reason="length",
    )
    seen = await _seen(_script(cut_off), "openai", stream=True)
    assert seen.text == "It is sunny. Please"
