"""The public surface of ``forge_rt.clients`` is exactly what ``__all__`` says."""

from __future__ import annotations

import forge_rt.clients
from forge_rt.clients import (
    AnthropicClient,
    LlamaServerClient,
    OllamaClient,
    OpenAICompatClient,
    VLLMClient,
    make_client,
)
from forge_rt.core import LLMClient


def test_all_lists_every_public_name_and_only_those() -> None:
    """Every name in ``__all__`` exists, and every public attribute is listed."""
    public = {n for n in vars(forge_rt.clients) if not n.startswith("_")}
    assert sorted(public) == sorted(forge_rt.clients.__all__)


def test_make_client_builds_each_kind_and_each_satisfies_the_protocol() -> None:
    """Each kind maps to its adapter class, and every adapter is an ``LLMClient``."""
    built = {
        "openai": make_client("openai", "http://127.0.0.1:9"),
        "llamaserver": make_client("llamaserver", "http://127.0.0.1:9"),
        "ollama": make_client("ollama", "http://127.0.0.1:9", model="m"),
        "vllm": make_client("vllm", "http://127.0.0.1:9"),
        "anthropic": make_client("anthropic", "http://127.0.0.1:9", api_key="k", model="m"),
    }
    assert {
        "openai": OpenAICompatClient,
        "llamaserver": LlamaServerClient,
        "ollama": OllamaClient,
        "vllm": VLLMClient,
        "anthropic": AnthropicClient,
    } == {k: type(v) for k, v in built.items()}
    assert all(isinstance(c, LLMClient) for c in built.values())


def test_make_client_rejects_an_unknown_kind_naming_the_choices() -> None:
    """A typo in the kind says which kinds exist."""
    import pytest

    with pytest.raises(
        ValueError,
        match=r"^unknown client kind 'lamaserver'; choose one of anthropic, llamaserver, ollama, openai, vllm$",
    ):
        make_client("lamaserver", "http://127.0.0.1:9")  # type: ignore[arg-type]


def test_capabilities_differ_per_backend_as_documented() -> None:
    """llama-server: schema, grammar, prefill, slots; vLLM: schema, priority; Anthropic: none."""
    llama = LlamaServerClient("http://127.0.0.1:9").capabilities
    vllm = VLLMClient("http://127.0.0.1:9").capabilities
    ollama = OllamaClient(model="m").capabilities
    anthropic = AnthropicClient(api_key="k", model="m").capabilities
    openai = OpenAICompatClient("http://127.0.0.1:9").capabilities
    assert (
        llama.json_schema,
        llama.grammar,
        llama.assistant_prefill,
        llama.slots,
        llama.priority_field,
    ) == (True, True, True, True, False)
    assert (vllm.json_schema, vllm.grammar, vllm.priority_field) == (True, False, True)
    assert (ollama.json_schema, ollama.grammar) == (True, False)
    assert (anthropic.json_schema, anthropic.grammar, anthropic.slots) == (False, False, False)
    assert (openai.json_schema, openai.grammar) == (True, False)
    assert not LlamaServerClient("http://127.0.0.1:9", mode="prompt").capabilities.native_tools
