"""Scripted replies: keyed by conversation, consumed in order, loud when they run out."""

from __future__ import annotations

import httpx
import pytest
from sim_helpers import user

from forge_rt.backends.sim import Fault, SimBackend, SimConfig, SimReply


async def _content(http: httpx.AsyncClient, text: str, **headers: str) -> str:
    response = await http.post(
        "/v1/chat/completions", json={"messages": user(text)}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


async def test_replies_are_consumed_in_order_per_first_user_message(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Without a header, the first user message keys the conversation; each has its own cursor."""
    sim.set_script({"alpha": ["a1", "a2"], "beta": ["b1"]})
    assert await _content(http, "alpha") == "a1"
    assert await _content(http, "beta") == "b1"
    assert await _content(http, "alpha") == "a2"


async def test_conversation_header_overrides_the_first_user_message(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``x-sim-conversation`` picks the script list whatever the messages say."""
    sim.set_script({"c1": ["from c1"], "hello": ["from hello"]})
    assert await _content(http, "hello", **{"x-sim-conversation": "c1"}) == "from c1"


async def test_star_list_serves_unknown_conversations(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Conversations without their own list share the ``*`` list, in order."""
    sim.set_script({"known": ["k"], "*": ["d1", "d2"]})
    assert [await _content(http, "x"), await _content(http, "y")] == ["d1", "d2"]


async def test_exhausted_script_is_a_500_naming_the_conversation(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Asking past the end of a list is a test bug: HTTP 500 whose message names the list."""
    sim.set_script({"task": ["only one"]})
    await _content(http, "task")
    response = await http.post("/v1/chat/completions", json={"messages": user("task")})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["type"] == "sim_script_error"
    assert error["message"].startswith(
        "sim script for conversation 'task' is exhausted: all 1 scripted replies were consumed"
    )


async def test_unscripted_conversation_without_default_is_a_500(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A conversation with no list and no ``*`` list gets a 500 listing the known keys."""
    sim.set_script({"task": ["x"]})
    response = await http.post("/v1/chat/completions", json={"messages": user("other")})
    assert response.status_code == 500
    message = response.json()["error"]["message"]
    assert "no replies for conversation 'other'" in message
    assert "['task']" in message


async def test_set_script_restarts_every_conversation(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """Setting a script again starts every cursor from the first reply."""
    sim.set_script({"*": ["first", "second"]})
    assert await _content(http, "q") == "first"
    sim.set_script({"*": ["first", "second"]})
    assert await _content(http, "q") == "first"


async def test_injected_fault_does_not_consume_a_scripted_reply(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A retry after an injected fault gets the reply the failed request would have had."""
    sim.set_script({"*": ["the reply"]})
    sim.inject(Fault.HTTP_503)
    failed = await http.post("/v1/chat/completions", json={"messages": user("q")})
    assert failed.status_code == 503
    assert await _content(http, "q") == "the reply"


async def test_reply_level_fault_is_consumed_with_its_reply(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """A scripted reply that carries a fault fails its request; the next request gets the next."""
    sim.set_script({"*": [SimReply(fault=Fault.HTTP_500), "recovered"]})
    failed = await http.post("/v1/chat/completions", json={"messages": user("q")})
    assert failed.status_code == 500
    assert await _content(http, "q") == "recovered"
    assert sim.stats.faults == {"http_500": 1}


def test_script_strings_become_text_replies() -> None:
    """A plain string in a script is shorthand for ``SimReply(text=...)``."""
    config = SimConfig(script={"*": ["hi", SimReply(text="there")]})
    assert config.script == {"*": [SimReply(text="hi"), SimReply(text="there")]}


def test_rates_over_one_are_rejected() -> None:
    """Failure rates are exclusive outcomes: a sum over 1 fails at construction."""
    from forge_rt.backends.sim import FailureRates

    with pytest.raises(ValueError, match=r"failure rates add up to 1\.200"):
        FailureRates(bare_json=0.6, hermes=0.6)
