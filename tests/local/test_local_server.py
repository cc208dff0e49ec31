"""The embedded real model server (llama.cpp + Qwen2.5-Coder-0.5B): start, API, stop. Slow."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
import trio

from forge_rt.backends.local import SERVE_COMMAND, LocalModelServer, prepare_model_async
from forge_rt.backends.managed import ManagedBackend, llama_server_spec

pytestmark = pytest.mark.slow

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


async def _wait_for_exit(pid: int) -> None:
    """Return once ``pid`` (not necessarily our child) has exited, without polling."""
    fd = os.pidfd_open(pid)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


def _exists(pid: int) -> bool:
    """True while ``pid`` is a process (our children are reaped by the time we ask)."""
    return Path(f"/proc/{pid}").exists()


def _only_log(directory: Path) -> str:
    (log,) = directory.iterdir()
    return log.read_text()


async def _refuses_connections(url: str) -> bool:
    async with httpx.AsyncClient() as client:
        try:
            await client.get(url + "/health")
        except httpx.ConnectError:
            return True
    return False


async def test_session_model_is_healthy_with_the_requested_context(
    local_model: LocalModelServer,
) -> None:
    """The session fixture's server answers /health and reports n_ctx 4096 on one slot in /props."""
    with trio.fail_after(30):
        async with httpx.AsyncClient(base_url=local_model.url) as client:
            health = (await client.get("/health")).json()
            props = (await client.get("/props")).json()
    assert health == {"status": "ok"}
    assert (props["default_generation_settings"]["n_ctx"], props["total_slots"]) == (4096, 1)
    assert props["model_path"] == str(local_model.model_path)


async def test_chat_completion_with_tools_answers_in_openai_shape(local_model_url: str) -> None:
    """A chat completion carrying tools comes back as an OpenAI-shaped assistant message."""
    body = {
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [WEATHER_TOOL],
        "max_tokens": 48,
        "temperature": 0,
    }
    with trio.fail_after(120):
        async with httpx.AsyncClient(base_url=local_model_url, timeout=100) as client:
            response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    reply = response.json()
    choice = reply["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] in {"stop", "length", "tool_calls"}
    assert choice["message"]["content"] or choice["message"].get("tool_calls")
    assert reply["usage"]["prompt_tokens"] > 0


async def test_async_start_honours_n_ctx_and_stops_cleanly(tmp_path: Path) -> None:
    """start() serves with the given n_ctx; leaving it ends the child (exit 0) and frees the port."""
    with trio.fail_after(120):
        async with LocalModelServer.start(n_ctx=2048, log_dir=tmp_path) as server:
            async with httpx.AsyncClient(base_url=server.url) as client:
                props = (await client.get("/props")).json()
            pid, url = server.pid, server.url
        assert await _refuses_connections(url)
    assert props["default_generation_settings"]["n_ctx"] == 2048
    assert server.backend.returncode == 0
    assert not _exists(pid)
    assert server.log_path.parent == tmp_path
    assert "serve.stopped" in server.log_path.read_text()


async def test_cancelling_the_caller_stops_the_model_server(tmp_path: Path) -> None:
    """A cancelled caller still stops the server child before the cancellation completes."""
    with trio.fail_after(120):
        with trio.CancelScope() as scope:
            async with LocalModelServer.start(log_dir=tmp_path) as server:
                scope.cancel()
                await trio.sleep_forever()
        assert await _refuses_connections(server.url)
    assert scope.cancelled_caught
    assert server.backend.returncode == 0
    assert not _exists(server.pid)


async def test_managed_llama_server_path_drives_the_embedded_server(tmp_path: Path) -> None:
    """The llama-server launcher runs _serve as its executable: flags map to slots, alias, metrics."""
    with trio.fail_after(120):
        model_path = await prepare_model_async()
        spec = llama_server_spec(
            model_path,
            ctx_size=2048,
            parallel=2,
            threads=2,
            alias="qwen-local",
            executable=SERVE_COMMAND,
        )
        async with (
            ManagedBackend.start(spec, log_path=tmp_path / "llama.log") as backend,
            httpx.AsyncClient(base_url=backend.url) as client,
        ):
            models = (await client.get("/v1/models")).json()
            props = (await client.get("/props")).json()
            slots = (await client.get("/slots")).json()
            metrics = await client.get("/metrics")
    assert [m["id"] for m in models["data"]] == ["qwen-local"]
    assert (props["total_slots"], len(slots)) == (2, 2)
    assert metrics.status_code == 200
    assert "llamacpp:" in metrics.text
    assert backend.returncode == 0


async def test_server_exits_when_its_parent_dies_without_stopping_it(tmp_path: Path) -> None:
    """A parent killed mid-session leaves no model server behind: the child watches its parent."""
    parent = textwrap.dedent(
        f"""
        import os, sys
        from forge_rt.backends.local import LocalModelServer
        with LocalModelServer.start_blocking(log_dir={str(tmp_path)!r}) as server:
            print(server.pid, flush=True)
            os._exit(0)  # dies without leaving the context: no stop is sent
        """
    )
    with trio.fail_after(120):
        result = await trio.run_process(
            [sys.executable, "-c", parent], capture_stdout=True, stderr=subprocess.DEVNULL
        )
        child = int(result.stdout.split()[-1])
        await _wait_for_exit(child)
    log = _only_log(tmp_path)
    assert "serve.parent_gone" in log
    assert "serve.stopped" in log
