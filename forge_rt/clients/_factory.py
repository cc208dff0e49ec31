"""``make_client``: one adapter by name, for the command line and the proxy."""

from __future__ import annotations

from typing import Any, Literal

from forge_rt.clients._anthropic import AnthropicClient
from forge_rt.clients._http import HTTPClient
from forge_rt.clients._llamaserver import LlamaServerClient
from forge_rt.clients._ollama import OllamaClient
from forge_rt.clients._openai import OpenAICompatClient
from forge_rt.clients._vllm import VLLMClient

__all__ = ["ClientKind", "make_client"]

ClientKind = Literal["openai", "llamaserver", "ollama", "vllm", "anthropic"]

_KINDS: dict[str, type[HTTPClient]] = {
    "openai": OpenAICompatClient,
    "llamaserver": LlamaServerClient,
    "ollama": OllamaClient,
    "vllm": VLLMClient,
    "anthropic": AnthropicClient,
}


def make_client(kind: ClientKind, base_url: str, **opts: Any) -> HTTPClient:
    """The adapter for ``kind`` at ``base_url``; ``opts`` go to its constructor unchanged."""
    try:
        cls = _KINDS[kind]
    except KeyError:
        raise ValueError(
            f"unknown client kind {kind!r}; choose one of {', '.join(sorted(_KINDS))}"
        ) from None
    return cls(base_url, **opts)
