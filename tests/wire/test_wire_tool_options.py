"""Inbound tool options: parallel calls allowed or not, and schema keywords validation ignores."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from forge_rt.wire import anthropic_request_from_wire, openai_request_from_wire

USER = [{"role": "user", "content": "hi"}]
PARAMS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "optional": False},
        "limit": {"type": "integer", "optional": True, "uniqueItems": False},
    },
    "required": ["query"],
}


def _openai(**fields: Any) -> bytes:
    tool = {"type": "function", "function": {"name": "search", "parameters": PARAMS}}
    return msgspec.json.encode({"messages": USER, "tools": [tool], **fields})


def _anthropic(**fields: Any) -> bytes:
    tool = {"name": "search", "input_schema": PARAMS}
    return msgspec.json.encode({"messages": USER, "max_tokens": 8, "tools": [tool], **fields})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [({}, None), ({"parallel_tool_calls": True}, True), ({"parallel_tool_calls": False}, False)],
    ids=["unsaid", "allowed", "refused"],
)
def test_openai_parallel_tool_calls_is_read(fields: dict[str, Any], expected: bool | None) -> None:
    """OpenAI's parallel_tool_calls reaches the request as given (None when absent)."""
    assert openai_request_from_wire(_openai(**fields)).parallel_tool_calls is expected


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, None),
        ({"type": "auto"}, None),
        ({"type": "auto", "disable_parallel_tool_use": True}, False),
        ({"type": "any", "disable_parallel_tool_use": False}, True),
    ],
    ids=["no-choice", "unsaid", "disabled", "enabled"],
)
def test_anthropic_disable_parallel_tool_use_is_read(
    choice: dict[str, Any] | None, expected: bool | None
) -> None:
    """Anthropic's tool_choice.disable_parallel_tool_use reaches the request negated."""
    fields = {} if choice is None else {"tool_choice": choice}
    assert anthropic_request_from_wire(_anthropic(**fields)).parallel_tool_calls is expected


@pytest.mark.parametrize("read", [openai_request_from_wire, anthropic_request_from_wire])
def test_unknown_schema_keywords_are_accepted_and_named(read: Any) -> None:
    """A tool schema with keywords forge_rt does not enforce is read, the keywords named."""
    body = _openai() if read is openai_request_from_wire else _anthropic()
    wire = read(body)
    assert [t.name for t in wire.request.tools] == ["search"]
    assert wire.ignored_schema_keywords == ("optional", "uniqueItems")
    assert wire.request.tools[0].json_schema() == PARAMS
