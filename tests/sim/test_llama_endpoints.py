"""llama-server's metadata endpoints: /health, /props, /slots, /metrics, /tokenize, /detokenize."""

from __future__ import annotations

import httpx
import pytest
import trio
from sim_helpers import RawClient, user

from forge_rt.backends.sim import SimBackend, SimConfig


async def test_health_is_ok(http: httpx.AsyncClient) -> None:
    """``/health`` answers ``{"status": "ok"}`` while serving."""
    assert (await http.get("/health")).json() == {"status": "ok"}


async def test_props_report_context_slots_and_model_path() -> None:
    """``/props`` reports n_ctx, the slot count and a model path, as llama-server does."""
    config = SimConfig(model="tiny", n_ctx=4096, n_slots=3)
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            props = (await http.get("/props")).json()
    assert props["default_generation_settings"]["n_ctx"] == 4096
    assert props["total_slots"] == 3
    assert props["model_path"] == "/sim/tiny.gguf"


async def test_slots_show_which_slot_is_processing() -> None:
    """``/slots`` lists each slot with n_ctx and whether it is processing right now."""
    config = SimConfig(n_slots=2, decode_tps=50, script={"*": ["word " * 200]})
    with trio.fail_after(10):
        async with (
            SimBackend.serve(config) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            client = await RawClient.connect(sim.url)
            await client.send("/v1/chat/completions", {"messages": user("q"), "stream": True})
            await client.read_until(b'"content":"')
            busy = (await http.get("/slots")).json()
            await client.aclose()
            await sim.wait_until(lambda s: not any(x.is_processing for x in s.slots))
            idle = (await http.get("/slots")).json()
    assert [(s["id"], s["n_ctx"], s["is_processing"]) for s in busy] == [
        (0, 8192, True),
        (1, 8192, False),
    ]
    assert [s["is_processing"] for s in idle] == [False, False]


async def test_metrics_expose_llama_server_names_with_live_values(
    sim: SimBackend, http: httpx.AsyncClient
) -> None:
    """``/metrics`` is Prometheus text with llama-server's metric names, read from live stats."""
    sim.set_script({"*": ["hello"]})
    await http.post("/v1/chat/completions", json={"messages": user("q")})
    response = await http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in response.text.splitlines()
        if line and not line.startswith("#")
    }
    slot = sim.stats.slots[0]
    assert values["llamacpp:prompt_tokens_total"] == slot.prefilled_tokens
    assert values["llamacpp:tokens_predicted_total"] == slot.generated_tokens
    assert values["llamacpp:requests_processing"] == 0
    assert values["llamacpp:kv_cache_usage_ratio"] == pytest.approx(slot.cache_tokens / 8192)
    assert "vllm:num_requests_waiting" in values


async def test_tokenize_and_detokenize_round_trip(http: httpx.AsyncClient) -> None:
    """``/tokenize`` splits text into ids that ``/detokenize`` turns back into the text."""
    text = "Hello, wonderful world!\n  Indented line."
    tokens = (await http.post("/tokenize", json={"content": text})).json()["tokens"]
    back = (await http.post("/detokenize", json={"tokens": tokens})).json()["content"]
    assert back == text
    assert len(tokens) > len(text.split())


async def test_tokenize_with_pieces_shows_word_pieces(http: httpx.AsyncClient) -> None:
    """``with_pieces`` returns each token's text: words with their leading space, 4-char pieces."""
    response = await http.post("/tokenize", json={"content": "Hi wonderful", "with_pieces": True})
    assert [t["piece"] for t in response.json()["tokens"]] == ["Hi", " won", "derf", "ul"]


async def test_detokenize_unknown_id_is_a_400(http: httpx.AsyncClient) -> None:
    """An id the tokenizer never produced is rejected with a message naming it."""
    response = await http.post("/detokenize", json={"tokens": [999999]})
    assert response.status_code == 400
    assert "token id 999999 was never produced" in response.json()["error"]["message"]


async def test_unknown_path_is_404_and_wrong_method_405(http: httpx.AsyncClient) -> None:
    """Unknown paths get 404; a known path with the wrong method gets 405 and ``allow``."""
    missing = await http.get("/nope")
    wrong = await http.get("/v1/chat/completions")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no such endpoint: GET /nope"
    assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")


async def test_tokens_per_char_sets_the_piece_length() -> None:
    """``tokens_per_char=0.5`` cuts words into 2-character pieces."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(tokens_per_char=0.5)) as sim,
            httpx.AsyncClient(base_url=sim.url) as http,
        ):
            response = await http.post(
                "/tokenize", json={"content": "Hi wonderful", "with_pieces": True}
            )
    assert [t["piece"] for t in response.json()["tokens"]] == ["Hi", " w", "on", "de", "rf", "ul"]
