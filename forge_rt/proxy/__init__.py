"""An OpenAI- and Anthropic-compatible server in front of a local model, with guardrails.

Point any harness (the ``openai`` / ``anthropic`` SDKs, aider, opencode, Continue, Claude Code)
at it and it gets a more reliable model: tool calls validated against the request's tools and
rescued from text, corrective retries done server-side, the synthetic ``respond`` tool, live
streaming of what is already certain, and one shared inference slot with priorities::

    from forge_rt.proxy import BackendConfig, ProxyConfig, serve_proxy

    config = ProxyConfig(port=0, backend=BackendConfig(url="http://127.0.0.1:8080"))
    async with serve_proxy(config) as url:
        ...  # OpenAI clients: base_url=url + "/v1"; Anthropic clients: base_url=url

From the command line: ``forge-rt proxy`` (the embedded model), ``forge-rt proxy --backend
URL --backend-kind llamaserver`` (your server) or ``forge-rt proxy --gguf model.gguf`` (managed).
"""

from forge_rt.proxy._app import ProxyApp as ProxyApp
from forge_rt.proxy._app import build_app as build_app
from forge_rt.proxy._config import NAMED_PRIORITIES as NAMED_PRIORITIES
from forge_rt.proxy._config import BackendConfig as BackendConfig
from forge_rt.proxy._config import KeyProfile as KeyProfile
from forge_rt.proxy._config import ProxyConfig as ProxyConfig
from forge_rt.proxy._config import ReasoningReplay as ReasoningReplay
from forge_rt.proxy._config import load_key_file as load_key_file
from forge_rt.proxy._runtime import ProxyRuntime as ProxyRuntime
from forge_rt.proxy._runtime import open_runtime as open_runtime
from forge_rt.proxy._serve import hypercorn_config as hypercorn_config
from forge_rt.proxy._serve import serve_proxy as serve_proxy
from forge_rt.proxy._work import RequestWork as RequestWork

__all__ = [
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
