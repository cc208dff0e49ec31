"""The proxy in front of the embedded real model (Qwen2.5-Coder-0.5B on llama.cpp): slow tests.

They assert forge_rt's behaviour -- calls written as text come back structured, streams are
well formed, the command with no flags serves the packaged model -- never that the model
answers correctly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import anthropic
import httpx
import openai
import pytest
import trio
from proxy_support import WEATHER_TOOL, WEATHER_TOOL_ANTHROPIC, in_thread, proxy_config

from forge_rt.proxy import BackendConfig, serve_proxy

pytestmark = pytest.mark.slow

WEATHER: list[Any] = [{"role": "user", "content": "What's the weather like in Paris right now?"}]


def _is_weather_call(call: Any) -> bool:
    args = json.loads(call.function.arguments)
    return call.function.name == "get_weather" and isinstance(args.get("city"), str)


async def test_weather_prompt_comes_back_as_a_structured_call(local_model_url: str) -> None:
    """The weather prompt (which this model answers with JSON text) comes back as tool_calls."""
    config = proxy_config(backend=BackendConfig(url=local_model_url, kind="llamaserver"))
    with trio.fail_after(600):
        async with serve_proxy(config) as url:
            with openai.OpenAI(
                base_url=f"{url}/v1", api_key="x", timeout=300, max_retries=0
            ) as sdk:
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=WEATHER, tools=[WEATHER_TOOL], temperature=0
                    )
                )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert all(_is_weather_call(c) for c in choice.message.tool_calls)
    assert not (choice.message.content or "").lstrip().startswith("{")


async def test_streamed_answer_through_the_anthropic_sdk_is_well_formed(
    local_model_url: str,
) -> None:
    """A streamed Anthropic request ends with either a valid tool_use or text, never raw JSON."""
    config = proxy_config(backend=BackendConfig(url=local_model_url, kind="llamaserver"))
    with trio.fail_after(600):
        async with serve_proxy(config) as url:
            with anthropic.Anthropic(base_url=url, api_key="x", timeout=300, max_retries=0) as sdk:

                def run() -> Any:
                    with sdk.messages.stream(
                        model="local",
                        max_tokens=256,
                        messages=WEATHER,
                        tools=[WEATHER_TOOL_ANTHROPIC],  # type: ignore[list-item]
                        extra_body={"temperature": 0},
                    ) as stream:
                        return stream.get_final_message()

                final = await in_thread(run)
    if final.stop_reason == "tool_use":
        calls = [b for b in final.content if b.type == "tool_use"]
        assert calls
        assert all(b.name == "get_weather" for b in calls)  # type: ignore[union-attr]
    else:
        assert final.stop_reason in ("end_turn", "max_tokens")
        text = "".join(b.text for b in final.content if b.type == "text")  # type: ignore[union-attr]
        assert not text.lstrip().startswith("{")


async def test_count_tokens_matches_the_prompt_tokens_the_model_reports(
    local_model_url: str,
) -> None:
    """count_tokens on the embedded model is the backend's own count (``exact``): within 2% of
    the input tokens a streamed request with no tools reports (one inference); with a tool (the
    injected ``respond`` tool counted), the first attempt's prompt, which a retry's nudge can
    only lengthen."""
    config = proxy_config(backend=BackendConfig(url=local_model_url, kind="llamaserver"))
    tools: list[Any] = [WEATHER_TOOL_ANTHROPIC]
    with trio.fail_after(900):
        async with serve_proxy(config) as url:
            with anthropic.Anthropic(base_url=url, api_key="x", timeout=300, max_retries=0) as sdk:
                for offered in ([], tools):
                    counted = await in_thread(
                        lambda offered=offered: sdk.messages.with_raw_response.count_tokens(
                            model="local", messages=WEATHER, tools=offered
                        )
                    )

                    def streamed(offered: list[Any] = offered) -> Any:
                        with sdk.messages.stream(
                            model="local",
                            max_tokens=32,
                            messages=WEATHER,
                            tools=offered,
                            extra_body={"temperature": 0},
                        ) as stream:
                            return stream.get_final_message()

                    final = await in_thread(streamed)
                    assert counted.headers["x-forge-token-count"] == "exact"
                    count = counted.parse().input_tokens
                    usage = final.usage
                    reported = usage.input_tokens + (usage.cache_read_input_tokens or 0)
                    if not offered:  # one inference: exactly what was counted
                        assert abs(count - reported) <= 0.02 * reported, (count, reported)
                    else:  # the first attempt's prompt; a retry (a nudge) only adds to it
                        assert count <= 1.02 * reported, (count, reported)


async def test_proxy_command_with_no_flags_serves_the_embedded_model() -> None:
    """`forge-rt proxy` alone starts the packaged model and answers with structured calls."""
    code = "from forge_rt.proxy._cli import proxy_command; proxy_command()"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with trio.fail_after(900):
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", code, "--port", "0"], stderr=subprocess.PIPE, env=env
        )
        assert proc.stderr is not None
        seen = b""
        while b"\n" not in seen.partition(b"Anthropic clients")[2]:
            chunk = await proc.stderr.receive_some(4096)
            assert chunk, f"the proxy exited early: {seen.decode(errors='replace')}"
            seen += chunk
        url = seen.split(b"listening on ")[1].split()[0].decode()
        with openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=300, max_retries=0) as sdk:
            reply = await in_thread(
                lambda: sdk.chat.completions.create(
                    model="local", messages=WEATHER, tools=[WEATHER_TOOL], temperature=0
                )
            )
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert all(_is_weather_call(c) for c in choice.message.tool_calls)


async def test_managed_backend_is_started_and_stopped_with_the_proxy() -> None:
    """--gguf mode: the proxy starts llama-server on the file, serves it, and stops it."""
    from forge_rt.backends.local import DEFAULT_MODEL, SERVE_COMMAND, prepare_model_async

    with trio.fail_after(900):
        path = await prepare_model_async(DEFAULT_MODEL)
        backend = BackendConfig(gguf=path, executable=SERVE_COMMAND, n_ctx=4096)
        async with serve_proxy(proxy_config(backend=backend)) as url:
            with openai.OpenAI(
                base_url=f"{url}/v1", api_key="x", timeout=300, max_retries=0
            ) as sdk:
                models = await in_thread(lambda: [m.id for m in sdk.models.list()])
                reply = await in_thread(
                    lambda: sdk.chat.completions.create(
                        model="local", messages=WEATHER, tools=[WEATHER_TOOL], temperature=0
                    )
                )
            async with httpx.AsyncClient(base_url=url) as http:
                backend_url = (await http.get("/forge/usage")).json()["backend"]["url"]
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(base_url=backend_url) as http:
                await http.get("/health")
    assert models
    assert reply.choices[0].finish_reason in ("tool_calls", "stop")


async def test_two_managed_servers_run_as_one_fleet() -> None:
    """--servers 2 --gguf: two llama-servers the proxy starts, a client on each."""
    from pydantic import SecretStr

    from forge_rt.backends.local import DEFAULT_MODEL, SERVE_COMMAND, prepare_model_async
    from forge_rt.proxy import KeyProfile

    keys = {"first-user": "key-of-the-first", "second-user": "key-of-the-second"}
    with trio.fail_after(900):
        path = await prepare_model_async(DEFAULT_MODEL)
        config = proxy_config(
            backend=BackendConfig(gguf=path, executable=SERVE_COMMAND, n_ctx=2048),
            servers=2,
            server_gpus=("0", "1"),  # no GPU here: the variable is set and changes nothing
            api_keys=tuple(KeyProfile(key=SecretStr(k), name=n) for n, k in keys.items()),
        )
        async with (
            serve_proxy(config) as url,
            httpx.AsyncClient(base_url=url, timeout=300) as http,
        ):
            for key in keys.values():
                reply = await http.post(
                    "/v1/chat/completions",
                    headers={"authorization": f"Bearer {key}"},
                    json={
                        "model": "local",
                        "max_tokens": 4,
                        "messages": [{"role": "user", "content": "Say hi."}],
                    },
                )
                assert reply.status_code == 200, reply.text
            auth = {"authorization": f"Bearer {keys['first-user']}"}
            metrics = (await http.get("/metrics", headers=auth)).text
    for lane in ("lane0", "lane1"):  # an idle fleet puts its two clients on two servers
        assert f'forge_proxy_lane_completed_total{{lane="{lane}"}} 1.0' in metrics
