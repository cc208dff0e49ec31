"""What a proxy is told to be: where it listens, who may call it, which backend, which guardrails.

Everything lives in one frozen :class:`ProxyConfig` (pydantic: the CLI and users build it by hand,
so a bad value fails at construction naming the field). API keys are ``SecretStr`` so a config
that gets logged or printed never shows them; the same holds for the backend's own key.
"""

from __future__ import annotations

import enum
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from forge_rt.core import ConstrainMode
from forge_rt.errors import ConfigurationError
from forge_rt.guardrails import Policy, rule_named
from forge_rt.proxy._policy import proxy_policy
from forge_rt.runtime import PreemptPolicy

__all__ = [
    "NAMED_PRIORITIES",
    "BackendConfig",
    "BackendKindName",
    "KeyProfile",
    "ProxyConfig",
    "ReasoningReplay",
    "load_key_file",
]

BackendKindName = Literal["openai", "llamaserver", "ollama", "vllm", "anthropic"]

NAMED_PRIORITIES: dict[str, int] = {"high": 0, "normal": 10, "low": 20}
"""Names the ``x-forge-priority`` header and key files accept for numeric priorities.

Lower numbers run first (the SlotWorker's convention): ``high`` preempts ``normal`` preempts
``low``. Any integer is accepted too.
"""


class ReasoningReplay(enum.StrEnum):
    """Which reasoning from the client's history is sent back to the backend.

    ``none`` keeps every earlier reasoning block out of the backend's prompt (fewest tokens),
    ``keep-last`` keeps only the latest one, ``full`` replays them all.
    """

    NONE = "none"
    KEEP_LAST = "keep-last"
    FULL = "full"


def _priority(value: object) -> object:
    if isinstance(value, str) and value in NAMED_PRIORITIES:
        return NAMED_PRIORITIES[value]
    return value


class KeyProfile(BaseModel):
    """One inbound API key: who it is (``name``, for logs and metrics) and its priority.

    ``priority`` is what the key's requests get; ``max_priority`` is the most urgent value the
    key may ask for with an ``x-forge-priority`` header (default: its own ``priority``, so a
    key can lower its urgency but never raise it above what it was given).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: SecretStr
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    priority: int = NAMED_PRIORITIES["normal"]
    max_priority: int | None = None

    @field_validator("priority", "max_priority", mode="before")
    @classmethod
    def _named(cls, value: object) -> object:
        return _priority(value)

    @field_validator("key")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 8:
            raise ValueError("an API key must be at least 8 characters long")
        return value

    @property
    def most_urgent(self) -> int:
        """The smallest priority number this key may request."""
        return self.priority if self.max_priority is None else self.max_priority


class _KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: list[KeyProfile]


def load_key_file(path: Path) -> tuple[KeyProfile, ...]:
    """Read API keys from a TOML file with one ``[[keys]]`` table per key::

        [[keys]]
        name = "voice"
        key = "sk-voice-0123456789"
        priority = "high"

        [[keys]]
        name = "research"
        key = "sk-research-0123456789"
        priority = "low"

    Raises ``ValueError`` naming the file when it cannot be read or a key is invalid.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"API key file {path}: cannot read it: {exc}") from exc
    try:
        parsed = _KeyFile.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"API key file {path}: {exc}") from exc
    if not parsed.keys:
        raise ValueError(f"API key file {path}: it lists no [[keys]]")
    return tuple(parsed.keys)


class BackendConfig(BaseModel):
    """Which backend the proxy fronts.

    Three modes, picked by what is set. **External**: ``url`` (and ``kind``, default
    ``openai``) -- a server you run. **Managed**: ``gguf`` (llama-server on that file) or
    ``model_path`` (``vllm serve`` on that directory or hub id) -- forge_rt starts it and stops
    it. **Embedded** (nothing set): the packaged Qwen2.5-Coder (``embedded_model``) served by
    llama.cpp in a child process, so ``forge-rt proxy`` alone serves a guarded API.

    ``executable`` is the command (program and leading arguments) a managed backend runs
    instead of ``llama-server`` / ``vllm`` from the PATH.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: BackendKindName | None = None
    url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None
    gguf: Path | None = None
    model_path: str | None = None
    embedded_model: str | None = None
    n_ctx: int = Field(default=8192, gt=0)
    n_parallel: int = Field(default=1, gt=0)
    executable: tuple[str, ...] | None = None
    timeout_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _one_mode(self) -> BackendConfig:
        chosen = [name for name in ("url", "gguf", "model_path") if getattr(self, name) is not None]
        if len(chosen) > 1:
            raise ValueError(
                f"give one backend: {' and '.join(chosen)} were both set (url is an external "
                "server, gguf a managed llama-server, model_path a managed vLLM)"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"backend url must start with http:// or https://, got {self.url!r}")
        if self.gguf is not None and self.kind not in (None, "llamaserver"):
            raise ValueError(f"gguf runs a managed llama-server; kind {self.kind!r} cannot")
        if self.model_path is not None and self.kind not in (None, "vllm"):
            raise ValueError(f"model_path runs a managed vLLM; kind {self.kind!r} cannot")
        if self.embedded_model is not None and chosen:
            raise ValueError(f"embedded_model is for the embedded backend, not with {chosen[0]}")
        if self.kind in ("ollama", "anthropic") and self.model is None:
            raise ValueError(f"a {self.kind} backend serves named models: give model (--model)")
        if self.kind == "anthropic" and self.api_key is None:
            raise ValueError("an anthropic backend needs its API key (--backend-api-key)")
        if self.kind in ("ollama", "anthropic") and self.url is None:
            raise ValueError(f"a {self.kind} backend is external: give its url (--backend URL)")
        return self

    @property
    def mode(self) -> Literal["external", "managed", "embedded"]:
        if self.url is not None:
            return "external"
        if self.gguf is not None or self.model_path is not None:
            return "managed"
        return "embedded"


class ProxyConfig(BaseModel):
    """Everything that decides how a proxy behaves.

    Backends: ``backend``, and ``more_backends`` -- further servers, run as one fleet (each
    request placed on one: a client's requests stay where its history is cached, a new client
    goes to the least loaded server, an urgent request where it starts soonest, and a server
    that fails leaves the rotation; see :class:`~forge_rt.runtime.Fleet`). All of them external
    (``url``). Or ``servers``: that many of a managed or embedded ``backend``, started and
    stopped by the proxy as one fleet (``server_gpus``: for managed ones, the CUDA device each
    sees, one per server, as ``CUDA_VISIBLE_DEVICES``). Where their ``model`` names differ, a request goes to the servers of the model
    it names (one no server serves: 404 ``model_not_found``) and ``/v1/models`` lists them.

    Network: ``host`` (loopback by default: exposing the proxy is a deliberate act), ``port``
    (0 picks a free one), ``cors_origins`` (CORS is off unless origins are given; any other
    cross-origin request is refused), ``allowed_hosts`` (the ``Host`` names answered besides
    the loopback names and ``host`` itself; ``*`` for any). See ``proxy/_origin.py``.

    Security and bad input: ``api_keys`` (none means no inbound auth; keys are compared in
    constant time), ``max_body_bytes`` (larger requests get 413), ``max_messages`` and
    ``max_tools`` (counted before the body is decoded in full; more get 413),
    ``body_timeout_s`` (a client that does not finish sending its body in time gets 408).

    Scheduling: every request goes through one SlotWorker; ``default_priority`` is used when
    neither the key nor an ``x-forge-priority`` header says otherwise (lower runs first);
    ``anonymous_max_priority`` is the most urgent priority a request without a key may ask for
    (``normal``: only a key can make a request urgent);
    ``max_queue`` bounds waiting calls (more get 429), ``preempt`` and ``max_preemptions``
    are the SlotWorker's preemption policy, ``request_deadline_s`` bounds each inference, and
    ``stall_s`` is its stall watch: the first-token allowance (plus prefill time for the
    prompt) and the longest gap between chunks before a call fails as stalled (``StallLimits``).

    Guardrails (when a request carries tools): ``rescue`` parses calls written as text,
    ``max_retries`` bounds corrective retries per request, ``respond_tool`` injects the synthetic
    ``respond`` tool (stripped again on the way out), ``constrain`` asks the backend to
    constrain replies to the tool-call schema (``auto``: when the backend can),
    ``call_list`` has a constrained reply written as a list of calls, so a request for several
    calls gets several (off by default: the 0.5B also chains a dependent call with a guessed
    value into the list, and the guard built for that, ``unseen_values``, failed the audit on
    test; docs/eval/rules.md), ``fan_out`` has it written as a list of one tool's calls, so a
    request for the same call over several items gets them in one reply (a list cannot chain a
    call of one tool on another's result; see :class:`GuardrailOptions`), ``prose_answers`` takes a plain-text reply without a call as the
    answer where ``tool_choice`` allows one, as the OpenAI and Anthropic APIs do (under a
    grammar the text is a branch of the constraint; see :class:`GuardrailOptions`),
    ``unfounded_calls`` sends back once a call made only of values found nowhere in the
    request where text was open (see :class:`GuardrailOptions`), ``rules_off`` and
    ``rules_on`` name further guardrail rules to turn off or on (see
    :data:`~forge_rt.guardrails.RULES`; an unknown name is refused), and ``reasoning_replay`` decides which reasoning from the history reaches the backend.

    ``served_model`` overrides the model name answered in responses (default: the name the
    client asked for).

    ``policy`` allows or denies the tools a client sends, by name (a
    :class:`~forge_rt.guardrails.Policy` or its TOML table: ``default`` and ``[tools]``; see
    ``proxy/_policy.py``): a denied tool is withheld from the backend and a call of it is
    refused with the reason. Capability rules and ``approve`` raise
    :class:`~forge_rt.errors.PolicyError`: the proxy knows no tool's needs and runs no tool.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    backend: BackendConfig = BackendConfig()
    more_backends: tuple[BackendConfig, ...] = ()
    servers: int = Field(default=1, gt=0)
    server_gpus: tuple[str, ...] = ()
    api_keys: tuple[KeyProfile, ...] = ()
    cors_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    max_messages: int = Field(default=4096, gt=0)
    max_tools: int = Field(default=256, gt=0)
    body_timeout_s: float = Field(default=30.0, gt=0)
    default_priority: int = NAMED_PRIORITIES["normal"]
    anonymous_max_priority: int = NAMED_PRIORITIES["normal"]
    max_queue: int = Field(default=64, gt=0)
    preempt: PreemptPolicy = PreemptPolicy.ALWAYS
    max_preemptions: int = Field(default=3, ge=0)
    request_deadline_s: float | None = Field(default=600.0, gt=0)
    stall_s: float | None = Field(default=30.0, gt=0)
    rescue: bool = True
    max_retries: int = Field(default=3, ge=0)
    respond_tool: bool = True
    constrain: ConstrainMode = "auto"
    call_list: bool = False
    fan_out: bool = True
    prose_answers: bool = True
    unfounded_calls: bool = True
    rules_off: tuple[str, ...] = ()
    rules_on: tuple[str, ...] = ()
    reasoning_replay: ReasoningReplay = ReasoningReplay.NONE
    served_model: str | None = None
    graceful_timeout_s: float = Field(default=5.0, ge=0)
    policy: Policy | None = None

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, Policy | dict):
            raise ValueError(f"policy must be a Policy or its TOML table, got {type(value)}")
        return proxy_policy(value)  # PolicyError (not a ValueError) for what cannot apply

    @field_validator("rules_off", "rules_on")
    @classmethod
    def _rules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            try:
                rule_named(name)
            except ConfigurationError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("default_priority", "anonymous_max_priority", mode="before")
    @classmethod
    def _named(cls, value: object) -> object:
        return _priority(value)

    @model_validator(mode="after")
    def _check(self) -> ProxyConfig:
        names = [k.name for k in self.api_keys]
        if len(names) != len(set(names)):
            raise ValueError(f"API key names must be unique, got {names}")
        secrets = [k.key.get_secret_value() for k in self.api_keys]
        if len(secrets) != len(set(secrets)):
            raise ValueError("two API key profiles share the same key")
        for origin in self.cors_origins:
            if origin != "*" and not origin.startswith(("http://", "https://")):
                raise ValueError(
                    f"CORS origin {origin!r} must be '*' or start with http:// or https://"
                )
        if self.servers > 1 and self.backend.mode == "external":
            raise ValueError(
                "servers starts several managed or embedded backends; for servers you run, "
                "give each URL (--backend URL --backend URL)"
            )
        if self.server_gpus and self.backend.mode != "managed":
            raise ValueError(
                f"server_gpus places managed servers (--gguf, --model-path) on GPUs; the "
                f"{self.backend.mode} backend has none to place"
            )
        if self.server_gpus and len(self.server_gpus) != self.servers:
            raise ValueError(
                f"server_gpus names one device per server: {len(self.server_gpus)} for "
                f"{self.servers} servers"
            )
        if self.more_backends:
            for each in (self.backend, *self.more_backends):
                if each.mode != "external":
                    raise ValueError(
                        "several backends are servers you run, each given by its URL "
                        f"(--backend URL --backend URL); the {each.mode} one cannot be among them"
                    )
        return self

    @property
    def backends(self) -> tuple[BackendConfig, ...]:
        """Every backend the proxy fronts: ``backend``, then ``more_backends`` -- or the
        ``servers`` copies of ``backend`` it starts."""
        if self.servers > 1:
            return (self.backend,) * self.servers
        return (self.backend, *self.more_backends)

    def server_env(self, index: int) -> dict[str, str]:
        """The environment added for the ``index``-th server the proxy starts (its GPU)."""
        if not self.server_gpus:
            return {}
        return {"CUDA_VISIBLE_DEVICES": self.server_gpus[index]}
