"""Which KV slots the proxy's SlotWorker uses as cache lines: those of a server it started."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge_rt.proxy._config import BackendConfig
from forge_rt.proxy._runtime import Backend, cache_lines
from forge_rt.testing import ScriptedClient


@pytest.mark.parametrize(
    ("config", "kind", "mode", "lines"),
    [
        (BackendConfig(n_parallel=4), "llamaserver", "embedded", 4),
        (BackendConfig(gguf=Path("m.gguf"), n_parallel=2), "llamaserver", "managed", 2),
        (BackendConfig(n_parallel=1), "llamaserver", "embedded", None),
        (BackendConfig(url="http://127.0.0.1:8080", n_parallel=4), "llamaserver", "external", None),
        (BackendConfig(model_path="Qwen/x", n_parallel=4), "vllm", "managed", None),
    ],
    ids=["embedded", "managed-llama", "one-slot", "external", "vllm"],
)
def test_the_proxy_uses_the_slots_of_a_llama_server_it_started(
    config: BackendConfig, kind: str, mode: str, lines: int | None
) -> None:
    backend = Backend(client=ScriptedClient(["x"]), kind=kind, url=None, mode=mode)
    assert cache_lines(backend, config) == lines
