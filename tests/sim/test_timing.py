"""Slots, the per-slot prefix cache and disconnects: the time model, asserted through counts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from sim_helpers import WEATHER_TOOLS, RawClient, delta_text, user

from forge_rt.backends.sim import SimBackend, SimConfig, SimReply, SimToolCall

LONG_TEXT = " ".join(f"word{i}" for i in range(400))


async def _post(http: httpx.AsyncClient, messages: list[dict[str, Any]], **body: Any) -> Any:
    response = await http.post("/v1/chat/completions", json={"messages": messages, **body})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    "reply",
    [
        SimReply(text="It is sunny in Paris today."),
        SimReply(tool_calls=(SimToolCall(name="get_weather", arguments={"city": "Paris"}),)),
    ],
    ids=["text", "tool-call"],
)
async def test_next_turn_prefills_only_what_the_cache_lacks(
    sim: SimBackend, http: httpx.AsyncClient, reply: SimReply
) -> None:
    """A follow-up turn reuses the slot's cache of prompt plus reply; only the new part is prefilled."""
    sim.set_script({"*": [reply, "done"]})
    first = await _post(http, user("weather?"), tools=WEATHER_TOOLS)
    history = [*user("weather?"), first["choices"][0]["message"]]
    if reply.tool_calls:
        history.append({"role": "tool", "tool_call_id": "x", "content": "sunny"})
    else:
        history.append({"role": "user", "content": "thanks"})
    second = await _post(http, history, tools=WEATHER_TOOLS)
    reused = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    assert second["timings"]["cache_n"] == reused
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == reused
    assert second["timings"]["prompt_n"] == second["usage"]["prompt_tokens"] - reused
    slot = sim.stats.slots[0]
    assert (slot.cached_tokens, slot.prefilled_tokens) == (
        reused,
        first["usage"]["prompt_tokens"] + second["timings"]["prompt_n"],
    )


async def test_identical_prompt_still_evaluates_its_last_token(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """As on llama-server, a fully cached prompt re-processes one token."""
    sim.set_script({"*": ["a", "b"]})
    first = await _post(http, user("same"))
    second = await _post(http, user("same"))
    assert first["timings"]["cache_n"] == 0
    assert second["timings"]["prompt_n"] == 1


async def test_a_conversation_returns_to_the_slot_that_caches_it() -> None:
    """Among free slots, the one sharing the longest prefix with the prompt is chosen."""
    config = SimConfig(n_slots=2, script={"*": ["x"] * 4})
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            await _post(http, user("alpha " * 20))
            await _post(http, user("beta " * 20))
            again = await _post(http, user("beta " * 20))
    assert again["timings"]["cache_n"] > 0
    assert [s.requests for s in sim.stats.slots] == [1, 2]


async def test_id_slot_pins_the_slot() -> None:
    """llama-server's ``id_slot`` runs the request on that slot; an unknown slot is a 400."""
    config = SimConfig(n_slots=2, script={"*": ["x"]})
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            await _post(http, user("q"), id_slot=1)
            bad = await http.post(
                "/v1/chat/completions", json={"messages": user("q"), "id_slot": 2}
            )
    assert [s.requests for s in sim.stats.slots] == [0, 1]
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == (
        "id_slot 2 does not exist: this server has slots 0..1"
    )


async def test_prompt_longer_than_the_context_is_refused() -> None:
    """A prompt over ``n_ctx`` tokens gets llama-server's 400 exceed_context_size_error."""
    config = SimConfig(n_ctx=16, script={"*": ["x"]})
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            response = await http.post("/v1/chat/completions", json={"messages": user(LONG_TEXT)})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "exceed_context_size_error"
    assert sim.stats.slots[0].requests == 0


async def test_generation_stops_at_the_context_window() -> None:
    """A reply that would overflow ``n_ctx`` is cut there with finish_reason length."""
    config = SimConfig(n_ctx=64, script={"*": [LONG_TEXT]})
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            body = await _post(http, user("q"))
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["total_tokens"] == 64


def _deltas(raw: bytes) -> list[str]:
    """Content deltas in the complete SSE events of a raw chunked response."""
    events = raw.split(b"\n\n")[:-1]
    lines = [e[e.index(b"data: ") :].decode() for e in events if b"data: " in e]
    return [d for d in map(delta_text, lines) if d]


async def _hang_up_after_first_delta(
    url: str, text: str, started: trio.Event, release: trio.Event
) -> None:
    """Stream a reply until its first content delta, then hang up once ``release`` is set."""
    client = await RawClient.connect(url)
    await client.send("/v1/chat/completions", {"messages": user(text), "stream": True})
    await client.read_until(b'"content":"')
    started.set()
    await release.wait()
    await client.aclose()


async def test_one_slot_serialises_requests_in_arrival_order() -> None:
    """With one busy slot, later requests wait (FIFO) and run only once it is freed."""
    config = SimConfig(
        decode_tps=50,
        script={"first": [LONG_TEXT], "second": ["b"], "third": ["c"]},
    )
    with trio.fail_after(20):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
            trio.open_nursery() as nursery,
        ):
            started, release = trio.Event(), trio.Event()
            nursery.start_soon(_hang_up_after_first_delta, sim.url, "first", started, release)
            await started.wait()
            answers: list[str] = []

            async def ask(text: str) -> None:
                answers.append((await _post(http, user(text)))["choices"][0]["message"]["content"])

            nursery.start_soon(ask, "second")
            await sim.wait_until(lambda s: s.waiting == 1)
            nursery.start_soon(ask, "third")
            await sim.wait_until(lambda s: s.waiting == 2)
            assert answers == []
            release.set()  # the first client hangs up, freeing the slot
    assert answers == ["b", "c"]
    assert [r.conversation for r in sim.stats.replies] == ["first", "second", "third"]
    assert sim.stats.max_concurrent == 3


async def test_disconnect_stops_generation_and_keeps_only_generated_tokens() -> None:
    """A client hanging up mid-stream stops the generation at once, frees the slot, is counted."""
    config = SimConfig(decode_tps=50, script={"*": [LONG_TEXT]})
    with trio.fail_after(20):
        async with SimBackend.serve(config) as sim:
            started, release = trio.Event(), trio.Event()
            release.set()
            await _hang_up_after_first_delta(sim.url, "q", started, release)
            await sim.wait_until(lambda s: s.disconnects == 1)
            slot = sim.stats.slots[0]
            generated = slot.generated_tokens
            assert 0 < generated < 400
            assert not slot.is_processing
            assert sim.stats.completed == 0
            prompt_tokens = slot.prefilled_tokens
            assert slot.cache_tokens == prompt_tokens + generated
            assert sim.stats.replies[-1].completed is False


async def test_continuing_a_cut_reply_reuses_what_was_generated() -> None:
    """After a disconnect, a prefill continuation of the received text is served from cache."""
    config = SimConfig(decode_tps=50, script={"*": [LONG_TEXT, LONG_TEXT]})
    with trio.fail_after(20):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            client = await RawClient.connect(sim.url)
            await client.send("/v1/chat/completions", {"messages": user("q"), "stream": True})
            while len(deltas := _deltas(client.received)) < 5:
                await client.receive()
            await client.aclose()
            received = deltas[:5]
            await sim.wait_until(lambda s: s.disconnects == 1)
            sim.config = sim.config.model_copy(update={"decode_tps": None})
            prefill = "".join(received)
            messages = [*user("q"), {"role": "assistant", "content": prefill}]
            resumed = await _post(http, messages)
    assert resumed["timings"]["prompt_n"] == 1
    assert prefill + resumed["choices"][0]["message"]["content"] == LONG_TEXT


async def test_priority_field_is_recorded(sim: SimBackend, http: httpx.AsyncClient) -> None:
    """vLLM's ``priority`` request field is accepted and recorded in order."""
    sim.set_script({"*": ["a", "b"]})
    await _post(http, user("q"), priority=5)
    await _post(http, user("q"), priority=-1)
    assert sim.stats.priorities == [5, -1]


async def test_config_can_change_between_requests_but_not_its_shape(sim: SimBackend) -> None:
    """Timing and model settings may be replaced while serving; the slot count may not."""
    sim.config = sim.config.model_copy(update={"model": "renamed", "decode_tps": 100.0})
    assert (sim.config.model, sim.config.decode_tps) == ("renamed", 100.0)
    with pytest.raises(ValueError, match=r"^SimConfig\.n_slots cannot change while serving"):
        sim.config = sim.config.model_copy(update={"n_slots": 2})


async def test_config_replacement_is_validated(sim: SimBackend) -> None:
    """A replacement config is validated even when built with ``model_copy``."""
    with pytest.raises(ValueError, match="decode_tps"):
        sim.config = sim.config.model_copy(update={"decode_tps": -1.0})
