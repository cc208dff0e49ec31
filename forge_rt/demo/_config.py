"""What a demo run is told: which backend, when the voice request arrives, how the agents run.

A pydantic model because users write it by hand, in a TOML file (``forge-rt demo --config
examples/demo.toml``, read by the CLI's shared loader) or as flags: a bad value fails before
anything starts, with a message naming the field. :func:`load_config` reads such a file for
library use; its top-level keys are the field names::

    backend = "sim"          # "local" (the embedded model), "sim", or a server's base URL
    voice_at = 5.0           # seconds after the background agents start; omit for "mid-generation"
    max_iterations = 8
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from forge_rt._cli_options import DEFAULT_BACKEND_KIND, DEFAULT_N_CTX
from forge_rt.clients import ClientKind

__all__ = ["DemoConfig", "load_config"]


class DemoConfig(BaseModel):
    """Settings of one ``forge-rt demo`` run; every field has a working default.

    ``backend``: ``"local"`` starts the embedded llama.cpp model (``model`` names which packaged
    model, default Qwen2.5-Coder-0.5B), ``"sim"`` the simulated backend with the 0.5B model's
    measured speed on two CPU cores (``sim_speed`` multiplies it), and an ``http(s)://`` base URL
    (without ``/v1``) uses a server you run, spoken to as ``backend_kind``.

    ``voice_at``: seconds after the background agents start when the voice request arrives;
    ``None`` waits until a background agent is generating tokens after the first background
    inference has finished, so the request lands mid-generation.
    ``agent_deadline``: seconds each agent may take before it counts as failed.
    ``tool_seconds``: the I/O time of every tool call (the slot serves other agents meanwhile).
    ``cache_lines``: the backend KV slots the one inference slot uses as cache lines, so a
    preempted agent returns to its own cached prompt and the voice agent keeps its prefix warm;
    ``None`` (the default) is one per agent on the embedded and simulated backends, which are
    started with that many slots, and none on a URL backend (give its ``--parallel``).
    ``servers``: with ``local`` or ``sim``, start that many backends, run as one fleet (each
    with its own SlotWorker and cache lines; the view shows each as a lane).
    ``constrain``: the agents' constrained-decoding mode; ``auto`` (the default) constrains where
    the backend can, the measured best on small models; ``never`` lets the model write calls its
    own way, so the guardrails' rescues show.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = "local"
    backend_kind: ClientKind = DEFAULT_BACKEND_KIND
    backend_api_key: SecretStr | None = None
    model: str | None = None
    n_ctx: int = Field(default=DEFAULT_N_CTX, ge=512)
    cache_lines: int | None = Field(default=None, ge=1)
    servers: int = Field(default=1, ge=1, le=8)
    voice_at: float | None = Field(default=None, ge=0)
    background_priority: int = 10
    voice_priority: int = 0
    max_iterations: int = Field(default=8, ge=1)
    agent_deadline: float = Field(default=300.0, gt=0)
    tool_seconds: float = Field(default=0.3, ge=0)
    temperature: float = Field(default=0.2, ge=0)
    max_tokens: int | None = Field(default=None, ge=16)  # None: the runtime derives each budget
    constrain: Literal["never", "auto", "always"] = "auto"
    sim_speed: float = Field(default=1.0, gt=0)
    seed: int = 0

    @field_validator("backend")
    @classmethod
    def _check_backend(cls, value: str) -> str:
        """'local', 'sim' or a base URL (without /v1)."""
        if value in ("local", "sim"):
            return value
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"backend {value!r} is not 'local', 'sim' or an http(s):// URL of a model server"
            )
        if value.rstrip("/").endswith("/v1"):
            raise ValueError(
                f"backend {value!r} ends in /v1: give the server's base URL without it, e.g. "
                f"{value.rstrip('/').removesuffix('/v1')!r}"
            )
        return value.rstrip("/")

    @model_validator(mode="after")
    def _check_model(self) -> DemoConfig:
        """With backend 'local', the model must be a packaged one."""
        if self.backend == "local" and self.model is not None:
            from forge_rt.backends.local import MODELS

            if self.model not in MODELS:
                raise ValueError(
                    f"model {self.model!r} is not a packaged model; with backend 'local' choose "
                    f"one of: {', '.join(MODELS)}"
                )
        url = self.backend not in ("local", "sim")
        if url and self.servers > 1:
            raise ValueError(
                "servers starts several of the embedded or simulated backend; a URL names one "
                "server you run"
            )
        if url and self.backend_kind == "anthropic" and self.backend_api_key is None:
            raise ValueError("an anthropic backend needs its API key (--backend-api-key)")
        return self

    def lines(self, agents: int) -> int | None:
        """The cache lines this run uses with ``agents`` agents (see ``cache_lines``)."""
        if self.cache_lines is not None:
            return self.cache_lines
        return agents if self.backend in ("local", "sim") else None

    def describe_backend(self) -> str:
        """One line naming the backend, for the view and the summary."""
        shape = "one slot" if self.servers == 1 else f"{self.servers} servers as one fleet"
        if self.backend == "local":
            return f"embedded {self.model or 'qwen2.5-coder-0.5b'} (llama.cpp, {shape})"
        if self.backend == "sim":
            return f"simulated backend (0.5B speed x{self.sim_speed:g}, {shape})"
        return f"{self.backend_kind} server at {self.backend}"


def load_config(path: Path, overrides: dict[str, Any] | None = None) -> DemoConfig:
    """Read a TOML file of :class:`DemoConfig` fields; ``overrides`` (e.g. flags) win over it.

    Raises ``ValueError`` naming the file for TOML it cannot parse, and pydantic's
    ``ValidationError`` for unknown keys or bad values.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc
    return DemoConfig.model_validate({**data, **(overrides or {})})
