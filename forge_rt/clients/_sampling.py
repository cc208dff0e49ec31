"""Model-card sampling defaults, opt-in per client (``recommended_sampling=True``).

Each model family publishes the sampling it was tuned for; running everything at one generic
temperature is a measurable handicap for small models. The map is keyed by model identity in
the three forms a backend reports it -- Ollama tags (``qwen2.5-coder:0.5b``), GGUF file stems
(``qwen2.5-coder-0.5b-instruct-q4_k_m``) and Hugging Face ids
(``Qwen/Qwen2.5-Coder-0.5B-Instruct``) -- all mapping to the same card values. Lookup is exact
after normalising case, a directory prefix, the ``.gguf`` suffix and a split-file suffix: a
guess from a partial name would defeat the point of an explicit opt-in, so an unknown model
raises :class:`~forge_rt.errors.UnsupportedModelError` listing what is known.

Caller values always win field by field (``request.sampling.merged_over(defaults)``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from forge_rt.core import Sampling
from forge_rt.errors import UnsupportedModelError

__all__ = [
    "RECOMMENDED_SAMPLING",
    "has_sampling_defaults",
    "known_models",
    "normalize_model_id",
    "sampling_defaults",
]

# Qwen2.5 and Qwen2.5-Coder instruct models ship generation_config.json with
# temperature 0.7, top_p 0.8, top_k 20, repetition_penalty 1.05, e.g.
# https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct/blob/main/generation_config.json
# https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/generation_config.json
_QWEN25 = Sampling(temperature=0.7, top_p=0.8, top_k=20, repeat_penalty=1.05)

# Qwen3 model card, "Best Practices", thinking mode (the default):
# Temperature=0.6, TopP=0.95, TopK=20, MinP=0 -- https://huggingface.co/Qwen/Qwen3-8B
_QWEN3 = Sampling(temperature=0.6, top_p=0.95, top_k=20, min_p=0.0)

# Llama 3.1 / 3.2 instruct generation_config.json: temperature 0.6, top_p 0.9, e.g.
# https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/generation_config.json
_LLAMA3 = Sampling(temperature=0.6, top_p=0.9)

_GGUF_QUANTS = ("q2_k", "q3_k_m", "q4_0", "q4_k_m", "q5_0", "q5_k_m", "q6_k", "q8_0", "fp16", "f16")
_OLLAMA_QUANTS = ("q4_k_m", "q5_k_m", "q8_0", "fp16")


def _family(
    table: dict[str, Sampling],
    values: Sampling,
    *,
    hf: str,
    ollama: str,
    sizes: tuple[str, ...],
    instruct_suffix: bool = True,
) -> None:
    """Register every identity form of one family: HF ids, GGUF stems, Ollama tags."""
    for size in sizes:
        stem = f"{hf}-{size}-instruct" if instruct_suffix else f"{hf}-{size}"
        table[f"qwen/{stem}" if hf.startswith("qwen") else stem] = values
        table[stem] = values
        table[f"{stem}-gguf"] = values
        for quant in _GGUF_QUANTS:
            table[f"{stem}-{quant}"] = values
        tag = f"{ollama}:{size}"
        table[tag] = values
        if instruct_suffix:
            table[f"{tag}-instruct"] = values
        for quant in _OLLAMA_QUANTS:
            table[f"{tag}-instruct-{quant}" if instruct_suffix else f"{tag}-{quant}"] = values


def _build() -> dict[str, Sampling]:
    table: dict[str, Sampling] = {}
    _family(
        table,
        _QWEN25,
        hf="qwen2.5-coder",
        ollama="qwen2.5-coder",
        sizes=("0.5b", "1.5b", "3b", "7b", "14b", "32b"),
    )
    _family(
        table,
        _QWEN25,
        hf="qwen2.5",
        ollama="qwen2.5",
        sizes=("0.5b", "1.5b", "3b", "7b", "14b", "32b", "72b"),
    )
    _family(
        table,
        _QWEN3,
        hf="qwen3",
        ollama="qwen3",
        sizes=("0.6b", "1.7b", "4b", "8b", "14b", "32b"),
        instruct_suffix=False,
    )
    for stem, tag in (
        ("llama-3.1-8b-instruct", "llama3.1:8b"),
        ("llama-3.2-1b-instruct", "llama3.2:1b"),
        ("llama-3.2-3b-instruct", "llama3.2:3b"),
    ):
        table[f"meta-llama/{stem}"] = _LLAMA3
        table[stem] = _LLAMA3
        table[f"meta-{stem}"] = _LLAMA3
        table[tag] = _LLAMA3
        table[f"{tag}-instruct-q4_k_m"] = _LLAMA3
        for quant in _GGUF_QUANTS:
            table[f"{stem}-{quant}"] = _LLAMA3
            table[f"meta-{stem}-{quant}"] = _LLAMA3
    return table


RECOMMENDED_SAMPLING: Mapping[str, Sampling] = MappingProxyType(_build())
"""Normalised model identity -> the model card's sampling values."""

_SPLIT = re.compile(r"-\d{5}-of-\d{5}$")


def normalize_model_id(model: str) -> str:
    """The lookup form of a model identity: lower case, no directory, ``.gguf`` or split suffix.

    A Hugging Face id keeps its organisation (``qwen/qwen2.5-coder-0.5b-instruct``); a file
    path keeps only its stem.
    """
    name = model.strip().lower()
    if name.endswith(".gguf") or name.startswith(("/", ".", "~")):
        name = name.rsplit("/", 1)[-1]
        name = name.removesuffix(".gguf")
    return _SPLIT.sub("", name)


def has_sampling_defaults(model: str) -> bool:
    """Whether card values are known for ``model``."""
    return normalize_model_id(model) in RECOMMENDED_SAMPLING


def known_models() -> tuple[str, ...]:
    """Every identity with card values, sorted."""
    return tuple(sorted(RECOMMENDED_SAMPLING))


def sampling_defaults(model: str) -> Sampling:
    """The card's sampling for ``model``; :class:`UnsupportedModelError` if there is none."""
    try:
        return RECOMMENDED_SAMPLING[normalize_model_id(model)]
    except KeyError:
        raise UnsupportedModelError(
            f"no recommended sampling is known for model {model!r} (looked up as "
            f"{normalize_model_id(model)!r}); pass explicit Sampling values instead, or turn "
            "recommended_sampling off -- known families: Qwen2.5, Qwen2.5-Coder, Qwen3, "
            "Llama 3.1/3.2 instruct (see forge_rt.clients.known_models())",
            model=model,
            known=known_models(),
        ) from None
