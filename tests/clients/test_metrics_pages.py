"""``metrics()`` of the llama-server and vLLM adapters: one Prometheus parser, typed failures."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from scripted_server import Reply, scripted_server

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.clients import LlamaServerClient, VLLMClient
from forge_rt.core import InferenceRequest, Message
from forge_rt.errors import BackendError, FaultKind

VLLM_GAUGES = (
    "vllm:gpu_cache_usage_perc",
    "vllm:kv_cache_usage_perc",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
)


async def test_vllm_metrics_are_the_pages_samples_by_name() -> None:
    """VLLMClient.metrics() reads the sim's vLLM gauges live: KV use after a call, no requests."""
    with trio.fail_after(10):
        async with (
            SimBackend.serve(SimConfig(n_ctx=1000, n_slots=2, script={"*": ["ok"]})) as sim,
            VLLMClient(sim.url) as client,
        ):
            await client.send(InferenceRequest(messages=(Message.user("hello " * 40),)))
            metrics = await client.metrics()
            cached = sum(slot.cache_tokens for slot in sim.stats.slots)
    assert cached > 0
    assert {
        "vllm:gpu_cache_usage_perc": cached / 2000,
        "vllm:kv_cache_usage_perc": cached / 2000,
        "vllm:num_requests_running": 0.0,
        "vllm:num_requests_waiting": 0.0,
    } == {name: metrics[name] for name in VLLM_GAUGES}


async def test_vllm_metrics_keep_the_last_sample_of_a_labelled_name() -> None:
    """A name vLLM repeats with other labels (one per model) keeps the value of its last sample."""
    page = b'vllm:num_requests_running{model_name="a"} 1\nvllm:num_requests_running{model_name="b"} 3\n'
    with trio.fail_after(10):
        async with (
            scripted_server(Reply(parts=[page], content_type="text/plain")) as server,
            VLLMClient(server.url) as client,
        ):
            metrics = await client.metrics()
    assert metrics == {"vllm:num_requests_running": 3.0}


@pytest.mark.parametrize("client_type", [LlamaServerClient, VLLMClient], ids=["llama", "vllm"])
@pytest.mark.parametrize(
    "page",
    [b"<html><body>Sign in to continue</body></html>", b"\xff\xfe not utf-8 \xff"],
    ids=["html", "not-utf-8"],
)
async def test_a_metrics_page_that_is_not_prometheus_text_is_a_malformed_response(
    client_type: Any, page: bytes
) -> None:
    """Both adapters refuse a /metrics that is not Prometheus text with the same typed error."""
    with trio.fail_after(10):
        async with (
            scripted_server(Reply(parts=[page], content_type="text/html")) as server,
            client_type(server.url) as client,
        ):
            with pytest.raises(
                BackendError,
                match=(
                    r"^http://127\.0\.0\.1:\d+/metrics: the backend's response is not a valid "
                    r"reply: not Prometheus text \(.+\); is the base URL pointing at the right "
                    r"kind of server\?$"
                ),
            ) as info:
                await client.metrics()
    assert (FaultKind.MALFORMED_RESPONSE, page.decode(errors="replace")) == (
        info.value.kind,
        info.value.body,
    )
