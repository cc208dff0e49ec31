"""The proxy's public surface, its configuration, its CLI, and its two backend-side helpers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpcore
import httpx
import pytest
import trio
from click.testing import CliRunner
from hypercorn.trio import serve
from proxy_support import GatedClient, proxy_config, sim_proxy
from pydantic import ValidationError

import forge_rt.proxy
from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.proxy import BackendConfig, KeyProfile, ProxyConfig, build_app, hypercorn_config
from forge_rt.proxy._cli import build_config, proxy_command
from forge_rt.proxy._transport import CoalescingBackend, coalescing_transport

EXPORTED = [
    "NAMED_PRIORITIES",
    "BackendConfig",
    "KeyProfile",
    "ProxyApp",
    "ProxyConfig",
    "ProxyRuntime",
    "ReasoningReplay",
    "RequestWork",
    "build_app",
    "hypercorn_config",
    "load_key_file",
    "open_runtime",
    "serve_proxy",
]


def test_public_surface_is_exactly_the_exported_list() -> None:
    """forge_rt.proxy exports exactly its __all__, and every name in it exists."""
    assert sorted(forge_rt.proxy.__all__) == sorted(EXPORTED)
    public = {n for n in dir(forge_rt.proxy) if not n.startswith("_")}
    assert public == set(EXPORTED)


def test_config_hides_secrets_in_its_repr() -> None:
    """Inbound and backend keys never show in a config's repr."""
    config = ProxyConfig(
        api_keys=(KeyProfile(key="sk-inbound-123456", name="a"),),
        backend=BackendConfig(url="http://127.0.0.1:1", api_key="sk-outbound-654321"),
    )
    assert "sk-inbound" not in repr(config)
    assert "sk-outbound" not in repr(config)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "http://x", "gguf": Path("m.gguf")}, "give one backend"),
        ({"url": "localhost:8080"}, "must start with http"),
        ({"gguf": Path("m.gguf"), "kind": "vllm"}, "managed llama-server"),
        ({"url": "http://x", "embedded_model": "qwen"}, "embedded_model is for"),
        ({"url": "http://x", "kind": "ollama"}, "give model"),
        ({"url": "http://x", "kind": "anthropic", "model": "claude"}, "needs its API key"),
        ({"kind": "ollama", "model": "qwen"}, "give its url"),
    ],
    ids=[
        "two-modes",
        "bad-url",
        "gguf-kind",
        "embedded-with-url",
        "ollama-no-model",
        "anthropic-no-key",
        "ollama-no-url",
    ],
)
def test_backend_config_rejects_contradictions(kwargs: dict[str, object], message: str) -> None:
    """A backend config that names two backends or a bad URL fails at construction."""
    with pytest.raises(ValidationError, match=message):
        BackendConfig(**kwargs)  # type: ignore[arg-type]


def test_backend_mode_follows_what_is_set() -> None:
    """url is external, gguf or model_path managed, nothing the embedded model."""
    assert BackendConfig(url="http://127.0.0.1:1").mode == "external"
    assert BackendConfig(gguf=Path("m.gguf")).mode == "managed"
    assert BackendConfig(model_path="org/model").mode == "managed"
    assert BackendConfig().mode == "embedded"


def test_config_rejects_duplicate_keys_and_bad_origins() -> None:
    """Two profiles with one key, or a CORS origin without a scheme, are errors."""
    with pytest.raises(ValidationError, match="share the same key"):
        ProxyConfig(
            api_keys=(
                KeyProfile(key="sk-same-key-0000", name="a"),
                KeyProfile(key="sk-same-key-0000", name="b"),
            )
        )
    with pytest.raises(ValidationError, match="must be"):
        ProxyConfig(cors_origins=("app.example",))


def test_cli_options_build_the_config() -> None:
    """Command-line options map onto the config, keys and priorities included."""
    config = build_config(
        host="127.0.0.1",
        port=0,
        backend="http://127.0.0.1:8080",
        backend_kind="llamaserver",
        backend_api_key="sk-backend-123",
        model=None,
        gguf=None,
        model_path=None,
        n_ctx=4096,
        parallel=1,
        backend_timeout=120.0,
        api_keys=("sk-inbound-1234",),
        key_file=None,
        cors_origins=(),
        allowed_hosts=("forge.lan",),
        max_body_bytes=1000,
        max_messages=10,
        max_tools=3,
        body_timeout=5.0,
        max_retries=2,
        rescue=True,
        respond_tool=False,
        constrain="auto",
        reasoning_replay="keep-last",
        default_priority="low",
        anonymous_max_priority="high",
        max_queue=8,
        preempt="never",
        deadline=30.0,
        served_model=None,
    )
    assert config.backend.kind == "llamaserver"
    assert config.backend.mode == "external"
    assert [(k.name, k.priority) for k in config.api_keys] == [("default", 20)]
    assert (config.respond_tool, config.constrain, config.max_retries) == (False, "auto", 2)
    assert config.reasoning_replay.value == "keep-last"
    assert (config.allowed_hosts, config.anonymous_max_priority) == (("forge.lan",), 0)
    assert config.backend.timeout_s == 120.0


def test_cli_help_lists_the_backend_options() -> None:
    """`forge-rt proxy --help` documents the backend modes and security options."""
    result = CliRunner().invoke(proxy_command, ["--help"])
    assert result.exit_code == 0
    for option in (
        "--backend sim|local|URL",
        "--backend-kind",
        "--gguf",
        "--model-path",
        "--api-key",
        "--cors-origin",
        "--allowed-host",
        "--anonymous-max-priority",
    ):
        assert option in result.output


def test_cli_refuses_contradictory_options() -> None:
    """Two backends at once is a usage error naming both flags, before anything starts."""
    result = CliRunner().invoke(
        proxy_command, ["--backend", "http://127.0.0.1:1", "--model-path", "org/model"]
    )
    assert result.exit_code == 2
    assert "--model-path and --backend conflict" in result.output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
async def test_cli_serves_until_interrupted(signum: signal.Signals) -> None:
    """The command serves on the printed address and stops cleanly on Ctrl-C or SIGTERM."""
    with trio.fail_after(60):
        async with SimBackend.serve(SimConfig(script={"*": ["from the cli"]})) as sim:
            code = "from forge_rt.proxy._cli import proxy_command; proxy_command()"
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-c", code, "--backend", sim.url, "--port", "0"],
                stderr=subprocess.PIPE,
                env=env,
            )
            assert proc.stderr is not None
            seen = b""
            while b"\n" not in seen.partition(b"Anthropic clients")[2]:
                chunk = await proc.stderr.receive_some(4096)
                assert chunk, f"the proxy exited early: {seen.decode()}"
                seen += chunk
            url = seen.split(b"listening on ")[1].split()[0].decode()
            async with httpx.AsyncClient(base_url=url) as http:
                response = await http.post(
                    "/v1/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                )
            proc.send_signal(signum)
            assert await proc.wait() == 0
    assert response.json()["choices"][0]["message"]["content"] == "from the cli"


class _RecordingStream(httpcore.AsyncNetworkStream):
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 -- httpcore's interface
        self.writes.append(buffer)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 -- httpcore's interface
        return b""

    async def aclose(self) -> None:
        return None


async def test_coalescing_stream_sends_a_request_in_one_write() -> None:
    """Writes wait for the next read, then go out as one write."""
    from forge_rt.proxy._transport import _CoalescingStream

    inner = _RecordingStream()
    stream = _CoalescingStream(inner)
    await stream.write(b"POST / HTTP/1.1\r\n\r\n")
    await stream.write(b'{"a": 1}')
    assert inner.writes == []
    await stream.read(100)
    assert inner.writes == [b'POST / HTTP/1.1\r\n\r\n{"a": 1}']


async def test_coalescing_transport_talks_http() -> None:
    """An httpx client on the coalescing transport gets real responses from a real server."""
    assert isinstance(CoalescingBackend(), httpcore.AsyncNetworkBackend)
    with trio.fail_after(20):
        async with (
            SimBackend.serve(SimConfig(model="coalesced")) as sim,
            httpx.AsyncClient(base_url=sim.url, transport=coalescing_transport()) as http,
        ):
            first = await http.get("/v1/models")
            second = await http.post(
                "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi"}]},
            )
    assert first.json()["data"][0]["id"] == "coalesced"
    assert second.status_code == 200


async def test_build_app_runs_its_own_runtime_under_an_asgi_server() -> None:
    """build_app's app starts and stops its runtime in the ASGI lifespan of any trio server."""
    config = proxy_config()
    app = build_app(config, client=GatedClient(lambda request: "from the lifespan", gated=False))
    stop = trio.Event()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(
                partial(serve, app, hypercorn_config(config), shutdown_trigger=stop.wait)  # type: ignore[arg-type]
            )
            async with httpx.AsyncClient(base_url=binds[0]) as http:
                response = await http.post(
                    "/v1/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                )
            stop.set()
    assert response.json()["choices"][0]["message"]["content"] == "from the lifespan"
    with pytest.raises(RuntimeError, match="runtime is not running"):
        _ = app.runtime


async def test_a_request_the_backend_api_cannot_express_is_a_400() -> None:
    """A field the backend's API lacks (seed, behind an Anthropic backend) is the client's 400."""
    config = SimConfig(script={"*": ["never sent"]}, api_key="sk-backend")
    body = {"model": "m", "seed": 7, "messages": [{"role": "user", "content": "hi"}]}
    with trio.fail_after(20):
        async with (
            sim_proxy(config, kind="anthropic", backend_api_key="sk-backend", model="m") as (
                sim,
                url,
            ),
            httpx.AsyncClient(base_url=url) as http,
        ):
            response = await http.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_by_backend"
    assert error["message"].startswith(
        "the backend cannot take this request: the Anthropic Messages API has no seed (got 7)"
    )
    assert sim.stats.requests["/v1/messages"] == 0  # refused before anything was sent
