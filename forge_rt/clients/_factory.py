"""``make_client``: one adapter by name, for the command line and the proxy.

Each kind's options are a typed struct (:class:`OpenAIOptions`, :class:`LlamaServerOptions`,
:class:`OllamaOptions`, :class:`VLLMOptions`, :class:`AnthropicOptions`) mirroring its adapter's
keyword arguments. ``make_client`` checks the options it is given against that struct before
building anything, so an option the kind does not take, a missing required one or a value of the
wrong type is a :class:`~forge_rt.errors.ClientOptionError` naming the option and the kind, not
a ``TypeError`` from deep inside a constructor.

An option left out is not passed at all, so the adapter's own default applies: the structs hold
no defaults of their own, and a test pins their fields and types to the adapters' signatures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import httpx
import msgspec
from msgspec import UNSET, UnsetType

from forge_rt.clients._anthropic import AnthropicClient
from forge_rt.clients._http import HTTPClient
from forge_rt.clients._llamaserver import LlamaServerClient
from forge_rt.clients._ollama import OllamaClient
from forge_rt.clients._openai import OpenAICompatClient
from forge_rt.clients._vllm import VLLMClient
from forge_rt.errors import ClientOptionError

__all__ = [
    "AnthropicOptions",
    "ClientKind",
    "LlamaServerOptions",
    "OllamaOptions",
    "OpenAIOptions",
    "VLLMOptions",
    "make_client",
]

ClientKind = Literal["openai", "llamaserver", "ollama", "vllm", "anthropic"]


class _Options(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options every adapter takes (see :class:`~forge_rt.clients.HTTPClient`)."""

    adapter: ClassVar[type[HTTPClient]]

    headers: Mapping[str, str] | UnsetType | None = UNSET
    connect_timeout: float | UnsetType = UNSET
    read_timeout: float | UnsetType = UNSET
    deadline: float | UnsetType | None = UNSET
    recommended_sampling: bool | UnsetType = UNSET
    transport: httpx.AsyncBaseTransport | UnsetType | None = UNSET

    def given(self) -> dict[str, Any]:
        """The options that were set, by name."""
        return {
            name: value
            for name in self.__struct_fields__
            if (value := getattr(self, name)) is not UNSET
        }

    def client(self, base_url: str) -> HTTPClient:
        """The adapter at ``base_url`` with the options that were set (the rest its defaults)."""
        return self.adapter(base_url, **self.given())

    def __repr__(self) -> str:
        # An API key never shows in a repr (logs, tracebacks).
        shown = ", ".join(
            f"{name}={'***' if name == 'api_key' and value else repr(value)}"
            for name, value in self.given().items()
        )
        return f"{type(self).__name__}({shown})"


class OpenAIOptions(_Options, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options of :class:`~forge_rt.clients.OpenAICompatClient` (kind ``"openai"``)."""

    adapter = OpenAICompatClient

    model: str | UnsetType | None = UNSET
    api_key: str | UnsetType | None = UNSET
    dialect: Literal["openai", "llamacpp", "vllm"] | UnsetType | None = UNSET
    json_schema: bool | UnsetType = UNSET
    reasoning_replay: bool | UnsetType | None = UNSET


class LlamaServerOptions(_Options, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options of :class:`~forge_rt.clients.LlamaServerClient` (kind ``"llamaserver"``)."""

    adapter = LlamaServerClient

    model: str | UnsetType | None = UNSET
    mode: Literal["native", "prompt"] | UnsetType = UNSET
    generation: Literal["chat", "raw"] | UnsetType = UNSET
    cache_prompt: bool | UnsetType = UNSET
    api_key: str | UnsetType | None = UNSET
    reasoning_replay: bool | UnsetType = UNSET


class OllamaOptions(_Options, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options of :class:`~forge_rt.clients.OllamaClient` (kind ``"ollama"``); ``model`` is
    required. Ollama takes no API key: put a proxy's credentials in ``headers``."""

    adapter = OllamaClient

    model: str
    num_ctx: int | UnsetType | None = UNSET
    think: bool | UnsetType | None = UNSET
    keep_alive: str | UnsetType | None = UNSET


class VLLMOptions(_Options, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options of :class:`~forge_rt.clients.VLLMClient` (kind ``"vllm"``)."""

    adapter = VLLMClient

    model: str | UnsetType | None = UNSET
    api_key: str | UnsetType | None = UNSET
    reasoning_replay: bool | UnsetType = UNSET


class AnthropicOptions(_Options, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The options of :class:`~forge_rt.clients.AnthropicClient` (kind ``"anthropic"``);
    ``api_key`` and ``model`` are required."""

    adapter = AnthropicClient

    api_key: str
    model: str
    max_tokens: int | UnsetType = UNSET
    anthropic_version: str | UnsetType = UNSET


_OPTIONS: dict[str, type[_Options]] = {
    "openai": OpenAIOptions,
    "llamaserver": LlamaServerOptions,
    "ollama": OllamaOptions,
    "vllm": VLLMOptions,
    "anthropic": AnthropicOptions,
}


def make_client(kind: ClientKind, base_url: str, **options: object) -> HTTPClient:
    """The adapter for ``kind`` at ``base_url``, built with ``options``.

    ``options`` are the keyword arguments of the kind's adapter, checked against its options
    struct first (``"ollama"``: :class:`OllamaOptions`, and so on). Raises
    :class:`~forge_rt.errors.ClientOptionError` for an option the kind does not take, a
    required one left out, or a value of the wrong type; ``ValueError`` for an unknown kind.
    """
    try:
        spec = _OPTIONS[kind]
    except KeyError:
        raise ValueError(
            f"unknown client kind {kind!r}; choose one of {', '.join(sorted(_OPTIONS))}"
        ) from None
    return _checked(kind, spec, options).client(base_url)


def _checked(kind: str, spec: type[_Options], options: Mapping[str, object]) -> _Options:
    """``options`` as ``spec``, each value checked against its field's type."""
    fields = {f.name: f for f in msgspec.structs.fields(spec)}
    takes = ", ".join(sorted(fields))
    for name in options:
        if name not in fields:
            raise ClientOptionError(
                f"make_client: kind {kind!r} takes no option {name!r}; it takes {takes}",
                kind=kind,
                option=name,
            )
    for field in fields.values():
        if field.required and field.name not in options:
            raise ClientOptionError(
                f"make_client: kind {kind!r} needs option {field.name!r}; pass {field.name}=...",
                kind=kind,
                option=field.name,
            )
    checked: dict[str, Any] = {}
    for name, value in options.items():
        try:
            checked[name] = msgspec.convert(value, fields[name].type)
        except msgspec.ValidationError as exc:
            raise ClientOptionError(
                f"make_client: option {name!r} of kind {kind!r}: {exc}",
                kind=kind,
                option=name,
            ) from exc
    return spec(**checked)
