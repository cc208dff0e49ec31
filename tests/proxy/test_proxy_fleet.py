"""A proxy in front of several servers of one model: clients spread, a server down is served around."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio
from proxy_support import proxy_config
from pydantic import SecretStr, ValidationError

from forge_rt.backends.sim import SimBackend, SimConfig
from forge_rt.proxy import BackendConfig, KeyProfile, ProxyConfig, serve_proxy
from forge_rt.proxy._cli import build_config, proxy_command

KEYS = {name: f"secret-key-of-{name}" for name in ("ana", "bo", "cy", "di")}
PATH = "/v1/chat/completions"


async def _ask(url: str, who: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(
            f"{url}{PATH}",
            headers={"authorization": f"Bearer {KEYS[who]}"},
            json={"model": "sim-model", "messages": [{"role": "user", "content": "hello"}]},
        )


async def _metrics(url: str) -> str:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(
            f"{url}/metrics", headers={"authorization": f"Bearer {KEYS['ana']}"}
        )
    return response.text


def _value(metrics: str, series: str) -> float:
    (line,) = [line for line in metrics.splitlines() if line.startswith(series + " ")]
    return float(line.split()[-1])


async def test_clients_spread_over_two_servers_and_one_down_is_served_by_the_other() -> None:
    keys = tuple(KeyProfile(key=SecretStr(k), name=n) for n, k in KEYS.items())
    with trio.fail_after(60):
        async with (
            SimBackend.serve(SimConfig()) as first,
            SimBackend.serve(SimConfig()) as second,
        ):
            config = proxy_config(
                backend=BackendConfig(url=first.url, kind="openai"),
                more_backends=(BackendConfig(url=second.url, kind="openai"),),
                api_keys=keys,
            )
            async with serve_proxy(config) as url:
                for who in KEYS:
                    assert (await _ask(url, who)).status_code == 200
                assert (first.stats.requests[PATH], second.stats.requests[PATH]) == (2, 2)
                back = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(lambda: second.restart(until=back))
                    await second.wait_until(lambda stats: stats.restarts > 0)
                    for who in KEYS:  # two of them were at home on the server now down
                        assert (await _ask(url, who)).status_code == 200
                    metrics = await _metrics(url)
                    assert 'forge_proxy_lane_in_rotation{lane="lane0"} 1.0' in metrics
                    assert _value(metrics, 'forge_proxy_lane_failovers_total{lane="lane1"}') >= 1
                    back.set()
                assert first.stats.requests[PATH] == 6
                metrics = await _metrics(url)
                assert 'forge_proxy_lane_completed_total{lane="lane0"} 6.0' in metrics
                assert 'forge_proxy_lane_completed_total{lane="lane1"} 2.0' in metrics


def test_the_command_line_takes_several_backend_urls() -> None:
    args = ["--backend", "http://127.0.0.1:9001", "--backend", "http://127.0.0.1:9002"]
    with proxy_command.make_context("proxy", args) as ctx:
        config = build_config(**ctx.params)
    assert [b.url for b in config.backends] == ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]


def test_several_backends_are_each_a_url() -> None:
    with (
        pytest.raises(ValidationError, match="the embedded one cannot be among them"),
        proxy_command.make_context(
            "proxy", ["--backend", "local", "--backend", "http://127.0.0.1:9002"]
        ) as ctx,
    ):
        build_config(**ctx.params)


async def _chat(url: str, model: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(
            f"{url}{PATH}",
            headers={"authorization": f"Bearer {KEYS['ana']}"},
            json={"model": model, "messages": [{"role": "user", "content": "hello"}]},
        )


async def test_servers_of_different_models_each_answer_the_requests_for_theirs() -> None:
    keys = tuple(KeyProfile(key=SecretStr(k), name=n) for n, k in KEYS.items())
    with trio.fail_after(60):
        async with (
            SimBackend.serve(SimConfig(model="tiny-model")) as tiny,
            SimBackend.serve(SimConfig(model="big-model")) as big,
        ):
            config = proxy_config(
                backend=BackendConfig(url=tiny.url, kind="openai", model="tiny-model"),
                more_backends=(BackendConfig(url=big.url, kind="openai", model="big-model"),),
                api_keys=keys,
            )
            async with serve_proxy(config) as url:
                for model in ("big-model", "big-model", "tiny-model"):
                    response = await _chat(url, model)
                    assert response.status_code == 200
                    assert response.json()["model"] == model
                assert (tiny.stats.requests[PATH], big.stats.requests[PATH]) == (1, 2)
                missing = await _chat(url, "middle-model")
                metrics = await _metrics(url)
                async with httpx.AsyncClient(timeout=30) as http:
                    listed = await http.get(
                        f"{url}/v1/models", headers={"authorization": f"Bearer {KEYS['ana']}"}
                    )
            assert missing.status_code == 404
            error = missing.json()["error"]
            assert (error["code"], error["param"]) == ("model_not_found", "model")
            assert "'tiny-model', 'big-model'" in error["message"]
            assert [m["id"] for m in listed.json()["data"]] == ["tiny-model", "big-model"]
            assert 'forge_proxy_lane_info{lane="lane1",model="big-model"} 1.0' in metrics
            assert (tiny.stats.requests[PATH], big.stats.requests[PATH]) == (1, 2)


def test_a_backend_url_may_name_the_model_it_serves() -> None:
    args = [
        "--backend",
        "tiny-model=http://127.0.0.1:9001",
        "--backend",
        "http://127.0.0.1:9002",
        "--model",
        "big-model",
    ]
    with proxy_command.make_context("proxy", args) as ctx:
        config = build_config(**ctx.params)
    assert [(b.model, b.url) for b in config.backends] == [
        ("tiny-model", "http://127.0.0.1:9001"),
        ("big-model", "http://127.0.0.1:9002"),
    ]


def _config_of(*args: str) -> ProxyConfig:
    with proxy_command.make_context("proxy", list(args)) as ctx:
        return build_config(**ctx.params)


def test_the_proxy_starts_several_of_a_managed_backend_each_on_its_gpu(tmp_path: Path) -> None:
    gguf = tmp_path / "weights.gguf"
    gguf.write_bytes(b"GGUF")
    config = _config_of("--gguf", str(gguf), "--servers", "2", "--server-gpus", "3, 5")
    assert [b.gguf for b in config.backends] == [gguf, gguf]
    assert [config.server_env(i) for i in range(2)] == [
        {"CUDA_VISIBLE_DEVICES": "3"},
        {"CUDA_VISIBLE_DEVICES": "5"},
    ]
    assert len(_config_of("--servers", "3").backends) == 3  # the embedded model, three times
    assert _config_of("--servers", "3").server_env(0) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "http://127.0.0.1:9001", "--servers", "2"], "give each URL"),
        (["--servers", "2", "--server-gpus", "0,1"], "the embedded backend has none to place"),
        (["--gguf", "{gguf}", "--servers", "2", "--server-gpus", "0"], "1 for 2 servers"),
    ],
)
def test_servers_and_their_gpus_are_checked(tmp_path: Path, args: list[str], message: str) -> None:
    gguf = tmp_path / "weights.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ValidationError, match=message):
        _config_of(*[a.format(gguf=gguf) for a in args])
