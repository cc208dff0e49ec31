"""A server reading a client's body: one decode against the strict schema, tools built once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from forge_rt.core import ToolSpec
from forge_rt.wire import (
    WireRequest,
    WireTools,
    anthropic_count_tokens_from_wire,
    anthropic_messages_from_wire,
    anthropic_request_from_wire,
    openai_messages_from_wire,
    openai_request_from_wire,
)
from forge_rt.wire._faults import relocated

USER = [{"role": "user", "content": "hi"}]
OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}},
}
ANTHROPIC_TOOL = {"name": "ping", "input_schema": {"type": "object", "properties": {}}}
PING = ToolSpec(name="ping", parameters={"type": "object", "properties": {}})

Reader = Callable[..., WireRequest]


class RecordingMemo:
    """A tool memo that remembers what it built per key and records every key asked for."""

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.builds = 0
        self._built: dict[bytes, WireTools] = {}

    def get(self, key: bytes, build: Callable[[], WireTools]) -> WireTools:
        self.keys.append(key)
        if key not in self._built:
            self.builds += 1
            self._built[key] = build()
        return self._built[key]


class CannedMemo:
    """A tool memo that answers every key with the same tools, never calling ``build``."""

    def __init__(self, tools: WireTools) -> None:
        self.tools = tools

    def get(self, key: bytes, build: Callable[[], WireTools]) -> WireTools:
        return self.tools


def _openai(**fields: Any) -> bytes:
    return msgspec.json.encode({"messages": USER, **fields})


def _anthropic(**fields: Any) -> bytes:
    return msgspec.json.encode({"max_tokens": 8, "messages": USER, **fields})


def test_the_memo_key_is_the_api_and_the_tools_exact_json() -> None:
    """The tools are keyed by the bytes the client sent (spacing included), behind the API name."""
    tools = b'[ {"type": "function", "function": {"name": "ping"}} ]'
    memo = RecordingMemo()
    openai_request_from_wire(
        b'{"messages": [{"role": "user", "content": "hi"}], "tools": ' + tools + b"}", memo
    )
    assert [b"openai" + tools] == memo.keys


def test_the_same_tools_are_built_once_across_requests() -> None:
    """A second request with the same tool list gets the specs built for the first."""
    memo = RecordingMemo()
    first = openai_request_from_wire(_openai(tools=[OPENAI_TOOL]), memo)
    second = openai_request_from_wire(_openai(tools=[OPENAI_TOOL], temperature=0.5), memo)
    assert (memo.builds, first.request.tools is second.request.tools) == (1, True)


def test_a_memo_hit_decodes_nothing_of_the_tools() -> None:
    """On a hit the tools' JSON is never decoded: the body decode kept it raw."""
    canned = WireTools(specs=(PING,))
    wire = openai_request_from_wire(
        _openai(tools=[{"type": "function", "nonsense": 1}]), CannedMemo(canned)
    )
    assert wire.request.tools == (PING,)


def test_the_memo_is_not_asked_when_there_are_no_tools() -> None:
    """An absent or null tool list is no tools, without a memo lookup."""
    memo = RecordingMemo()
    for body in (_openai(), _openai(tools=None)):
        assert openai_request_from_wire(body, memo).request.tools == ()
    assert memo.keys == []


@pytest.mark.parametrize(
    ("read", "body", "message"),
    [
        (
            openai_request_from_wire,
            _openai(tools=5),
            r"^Expected `array`, got `int` - at `\$\.tools`$",
        ),
        (
            openai_request_from_wire,
            _openai(tools=[{"type": "function", "function": {"name": "f", "colour": 1}}]),
            r"^Object contains unknown field `colour` - at `\$\.tools\[0\]\.function`$",
        ),
        (
            anthropic_request_from_wire,
            _anthropic(tools=[{"name": "f", "input_schema": 5}]),
            r"^Expected `object`, got `int` - at `\$\.tools\[0\]\.input_schema`$",
        ),
        (
            anthropic_request_from_wire,
            _anthropic(tools=[{"name": "f", "input_schema": {}, "colour": "red"}]),
            r"^Object contains unknown field `colour` - at `\$\.tools\[0\]`$",
        ),
    ],
    ids=[
        "openai-not-a-list",
        "openai-unknown-field",
        "anthropic-wrong-type",
        "anthropic-unknown-field",
    ],
)
def test_tool_errors_are_located_in_the_whole_body(read: Reader, body: bytes, message: str) -> None:
    """Tools decoded on their own still report where in the body the fault is."""
    with pytest.raises(msgspec.ValidationError, match=message):
        read(body)


@pytest.mark.parametrize(
    "read",
    [
        lambda: openai_request_from_wire(
            _openai(messages=[{"role": "user", "content": "x", "colour": 1}])
        ),
        lambda: openai_messages_from_wire([{"role": "user", "content": "x", "colour": 1}]),
        lambda: anthropic_request_from_wire(
            _anthropic(messages=[{"role": "user", "content": "x", "colour": 1}])
        ),
        lambda: anthropic_messages_from_wire([{"role": "user", "content": "x", "colour": 1}]),
    ],
    ids=["openai-body", "openai-messages", "anthropic-body", "anthropic-messages"],
)
def test_messages_alone_are_held_to_the_same_schema_as_a_body(read: Callable[[], object]) -> None:
    """Whole body or messages alone, an unknown field is msgspec's located error."""
    with pytest.raises(
        msgspec.ValidationError,
        match=r"^Object contains unknown field `colour` - at `\$\.messages\[0\]`$",
    ):
        read()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_openai(n=2), r"^only n=1 is supported: .* - at `\$\.n`$"),
        (_openai(logprobs=True), r"^log-probabilities are not supported - at `\$\.logprobs`$"),
        (
            _openai(modalities=["text", "audio"]),
            r"^audio output is not supported - at `\$\.modalities`$",
        ),
        (
            _openai(functions=[{"name": "f"}]),
            r"^the deprecated functions/function_call .* - at `\$\.functions`$",
        ),
        (
            _openai(web_search_options={}),
            r"^web search is not supported - at `\$\.web_search_options`$",
        ),
    ],
    ids=["n", "logprobs", "audio", "functions", "web-search"],
)
def test_what_a_request_cannot_hold_is_refused_not_dropped(body: bytes, message: str) -> None:
    """A defined feature forge_rt cannot honour is a located error, never a different answer."""
    with pytest.raises(msgspec.ValidationError, match=message):
        openai_request_from_wire(body)


def test_anthropic_mcp_servers_are_refused_where_they_are() -> None:
    """MCP servers run on Anthropic's side; asking for them is a located error."""
    with pytest.raises(
        msgspec.ValidationError, match=r"^MCP servers are not supported - at `\$\.mcp_servers`$"
    ):
        anthropic_request_from_wire(_anthropic(mcp_servers=[{"type": "url"}]))


def test_anthropic_server_tools_are_left_out_and_named() -> None:
    """Web search is not offered to the model; the request says it was dropped."""
    server = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    wire = anthropic_request_from_wire(_anthropic(tools=[server, ANTHROPIC_TOOL]))
    assert (wire.dropped_tools, [t.name for t in wire.request.tools]) == (("web_search",), ["ping"])


def test_anthropic_server_tools_stay_named_on_a_memo_hit() -> None:
    """The dropped names are part of what the memo keeps, so every request reports them."""
    memo = RecordingMemo()
    body = _anthropic(tools=[{"type": "bash_20250124", "name": "bash"}])
    dropped = [anthropic_request_from_wire(body, memo).dropped_tools for _ in range(2)]
    assert (dropped, memo.builds) == ([("bash",), ("bash",)], 1)


def test_count_tokens_reads_the_prompt_without_max_tokens() -> None:
    """A count_tokens body has the prompt and tools of a request, and no max_tokens."""
    body = msgspec.json.encode({"messages": USER, "system": "be brief", "tools": [ANTHROPIC_TOOL]})
    wire = anthropic_count_tokens_from_wire(body)
    assert (
        [m.content for m in wire.request.messages],
        [t.name for t in wire.request.tools],
        wire.request.sampling.max_tokens,
    ) == (["be brief", "hi"], ["ping"], None)


def test_count_tokens_refuses_max_tokens() -> None:
    """count_tokens has its own schema: a Messages-only field is an unknown field there."""
    with pytest.raises(
        msgspec.ValidationError, match=r"^Object contains unknown field `max_tokens`$"
    ):
        anthropic_count_tokens_from_wire(_anthropic())


class _Named(msgspec.Struct):
    name: str


def test_a_part_error_is_relocated_under_its_place_in_the_body() -> None:
    """``$[0].name`` of a part decoded alone reads ``$.tools[0].name`` in the whole body."""
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(b'[{"name": 1}]', type=list[_Named])
    moved = relocated(info.value, "$.tools")
    assert str(moved) == "Expected `str`, got `int` - at `$.tools[0].name`"
