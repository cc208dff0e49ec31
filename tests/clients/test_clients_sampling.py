"""Opt-in model-card sampling: exact lookup, caller values win, unknown models refused."""

from __future__ import annotations

import pytest

from forge_rt.clients import LlamaServerClient, OpenAICompatClient, known_models, sampling_defaults
from forge_rt.clients._sampling import has_sampling_defaults, normalize_model_id
from forge_rt.core import InferenceRequest, Sampling
from forge_rt.errors import UnsupportedModelError

QWEN_CODER = Sampling(temperature=0.7, top_p=0.8, top_k=20, repeat_penalty=1.05)


@pytest.mark.parametrize(
    "identity",
    [
        "qwen2.5-coder:0.5b",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "/models/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
        "qwen2.5-coder-0.5b-instruct-q4_k_m-00001-of-00003.gguf",
    ],
    ids=["ollama-tag", "hf-id", "gguf-stem", "gguf-path", "split-gguf"],
)
def test_every_identity_form_of_qwen_coder_gets_the_card_values(identity: str) -> None:
    """Ollama tags, HF ids, GGUF stems and paths of one model all map to its card values."""
    assert sampling_defaults(identity) == QWEN_CODER


def test_normalize_keeps_the_hf_organisation_but_drops_a_file_directory() -> None:
    """An HF id keeps ``org/``; a file path keeps only its stem."""
    assert (
        normalize_model_id("Qwen/Qwen3-8B"),
        normalize_model_id("./weights/Qwen3-8B-Q4_K_M.gguf"),
    ) == ("qwen/qwen3-8b", "qwen3-8b-q4_k_m")


def test_unknown_model_raises_with_the_known_list() -> None:
    """No guessing from a partial name: an unknown model is refused, listing what is known."""
    with pytest.raises(
        UnsupportedModelError, match=r"^no recommended sampling is known for model 'qwen2.5-coder'"
    ) as info:
        sampling_defaults("qwen2.5-coder")
    assert info.value.model == "qwen2.5-coder"
    assert known_models() == info.value.known
    assert not has_sampling_defaults("qwen2.5-coder")


def test_caller_values_win_field_by_field_over_the_card() -> None:
    """Merging keeps every explicit caller field and fills only the unset ones."""
    merged = Sampling(temperature=0.1, max_tokens=64).merged_over(QWEN_CODER)
    assert (
        Sampling(temperature=0.1, top_p=0.8, top_k=20, repeat_penalty=1.05, max_tokens=64) == merged
    )


def test_client_opting_in_for_an_unknown_model_fails_at_construction() -> None:
    """``recommended_sampling=True`` with a model the map lacks raises before any call."""
    with pytest.raises(UnsupportedModelError):
        OpenAICompatClient("http://127.0.0.1:9", model="mystery-7b", recommended_sampling=True)


async def test_client_without_model_refuses_opt_in_it_cannot_resolve() -> None:
    """A generic client that cannot ask its server for the model says to pass ``model=``."""
    client = OpenAICompatClient("http://127.0.0.1:9", recommended_sampling=True)
    with pytest.raises(ValueError, match=r"needs model=\.\.\. to use recommended_sampling"):
        await client._sampling(InferenceRequest(messages=()))
    await client.aclose()


def test_llamaserver_client_opting_in_for_a_known_model_is_accepted() -> None:
    """A known GGUF stem passes the construction check."""
    client = LlamaServerClient(
        "http://127.0.0.1:9", model="qwen2.5-coder-0.5b-instruct-q4_k_m", recommended_sampling=True
    )
    assert client.model == "qwen2.5-coder-0.5b-instruct-q4_k_m"
