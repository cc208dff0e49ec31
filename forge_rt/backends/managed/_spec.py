"""What to launch: the command line, environment and readiness check of each managed backend kind.

Building a :class:`BackendSpec` is pure (no process is started, nothing is looked up on ``PATH``),
so the argv each builder produces can be read and tested on its own. :mod:`._process` runs it.
"""

from __future__ import annotations

import enum
import os
import socket
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import msgspec
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BackendKind",
    "BackendSpec",
    "Probe",
    "free_loopback_port",
    "judge_probe",
    "llama_server_spec",
    "ollama_spec",
    "vllm_spec",
]


class BackendKind(enum.StrEnum):
    """The inference servers forge_rt knows how to start, wait for and stop."""

    LLAMA_SERVER = "llama-server"
    VLLM = "vllm"
    OLLAMA = "ollama"


_READY_PATH: dict[BackendKind, str] = {
    BackendKind.LLAMA_SERVER: "/health",
    BackendKind.VLLM: "/v1/models",
    BackendKind.OLLAMA: "/api/tags",
}

_INSTALL_HINT: dict[BackendKind, str] = {
    BackendKind.LLAMA_SERVER: (
        "install llama.cpp's server (a release from https://github.com/ggml-org/llama.cpp/releases, "
        "`brew install llama.cpp`, ...) so `llama-server` is on PATH, or pass executable=...; "
        "the embedded model needs no install: forge_rt.backends.local.LocalModelServer"
    ),
    BackendKind.VLLM: "`pip install vllm` (needs a supported GPU), or pass executable=...",
    BackendKind.OLLAMA: "install Ollama from https://ollama.com/download, or pass executable=...",
}


class BackendSpec(BaseModel):
    """Everything needed to start one backend server process and to know when it is ready.

    ``argv`` is the complete command (its first element is looked up on ``PATH`` at start),
    ``env`` the variables added to the parent's environment, ``model`` the model name the
    readiness check expects the server to list (vLLM, Ollama), or ``None`` to not check.
    """

    model_config = ConfigDict(frozen=True)

    kind: BackendKind
    argv: tuple[str, ...] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    host: str
    port: int = Field(gt=0, lt=65536)
    model: str | None = None

    @property
    def name(self) -> str:
        """A short label for logs and errors: the kind and the port."""
        return f"{self.kind.value}:{self.port}"

    @property
    def base_url(self) -> str:
        """Where clients reach the server (a wildcard bind address is reached over loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def ready_url(self) -> str:
        """The URL polled until the server answers that it is ready."""
        return self.base_url + _READY_PATH[self.kind]

    @property
    def install_hint(self) -> str:
        """How to install this kind's program when it is missing."""
        return _INSTALL_HINT[self.kind]


def free_loopback_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (the OS picks it by binding port 0).

    Another process may take it before the backend binds it; the backend then fails to start
    and :class:`~forge_rt.errors.BackendStartError` shows its log.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _command(executable: str | Sequence[str]) -> list[str]:
    return [executable] if isinstance(executable, str) else list(executable)


def llama_server_spec(
    model_path: str | os.PathLike[str],
    *,
    ctx_size: int = 4096,
    parallel: int = 1,
    threads: int | None = None,
    gpu_layers: int | None = None,
    alias: str | None = None,
    batch_size: int | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    executable: str | Sequence[str] = "llama-server",
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> BackendSpec:
    """A llama.cpp ``llama-server`` on one GGUF file, with Jinja chat templates, /metrics and /slots.

    ``executable`` may be a command prefix (``[sys.executable, "-m", "forge_rt.backends.local._serve"]``
    runs the embedded server, which accepts the same flags). ``port=None`` picks a free port now.
    ``batch_size`` sets ``--batch-size`` and ``--ubatch-size``: the prompt tokens the server
    processes before it looks at its task queue again, so a cancelled prefill stops within one
    batch (``None``: the server's default, 2,048).
    """
    port = free_loopback_port(host) if port is None else port
    argv = [
        *_command(executable),
        "--model",
        os.fspath(model_path),
        "--ctx-size",
        str(ctx_size),
        "--parallel",
        str(parallel),
        "--host",
        host,
        "--port",
        str(port),
        "--jinja",
        "--metrics",
        "--slots",
    ]
    if threads is not None:
        argv += ["--threads", str(threads)]
    if gpu_layers is not None:
        argv += ["--n-gpu-layers", str(gpu_layers)]
    if alias is not None:
        argv += ["--alias", alias]
    if batch_size is not None:
        argv += ["--batch-size", str(batch_size), "--ubatch-size", str(batch_size)]
    argv += extra_args
    return BackendSpec(
        kind=BackendKind.LLAMA_SERVER,
        argv=tuple(argv),
        env=dict(env or {}),
        host=host,
        port=port,
        model=None,
    )


def vllm_spec(
    model: str | os.PathLike[str],
    *,
    served_model_name: str | None = None,
    max_model_len: int | None = None,
    tool_call_parser: str | None = "hermes",
    host: str = "127.0.0.1",
    port: int | None = None,
    executable: str | Sequence[str] = "vllm",
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> BackendSpec:
    """``vllm serve`` on a model directory or hub id, with server-side tool-call parsing.

    ``tool_call_parser=None`` leaves out ``--enable-auto-tool-choice`` and ``--tool-call-parser``
    (vLLM refuses the first without the second). Readiness waits until ``/v1/models`` lists the
    served name (``served_model_name``, else ``model``).
    """
    port = free_loopback_port(host) if port is None else port
    model = os.fspath(model)
    argv = [*_command(executable), "serve", model]
    if served_model_name is not None:
        argv += ["--served-model-name", served_model_name]
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
    argv += ["--host", host, "--port", str(port)]
    if tool_call_parser is not None:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
    argv += extra_args
    return BackendSpec(
        kind=BackendKind.VLLM,
        argv=tuple(argv),
        env=dict(env or {}),
        host=host,
        port=port,
        model=served_model_name if served_model_name is not None else model,
    )


def ollama_spec(
    model: str,
    *,
    num_parallel: int | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    executable: str | Sequence[str] = "ollama",
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> BackendSpec:
    """``ollama serve`` bound through ``OLLAMA_HOST``; ready once ``/api/tags`` lists ``model``.

    Ollama keeps pulled models outside the server process, so a model missing from the list
    is an error telling you to ``ollama pull`` it, not something to wait for.
    """
    port = free_loopback_port(host) if port is None else port
    child_env = {"OLLAMA_HOST": f"{host}:{port}"}
    if num_parallel is not None:
        child_env["OLLAMA_NUM_PARALLEL"] = str(num_parallel)
    child_env.update(env or {})
    return BackendSpec(
        kind=BackendKind.OLLAMA,
        argv=(*_command(executable), "serve", *extra_args),
        env=child_env,
        host=host,
        port=port,
        model=model,
    )


class Probe(NamedTuple):
    """One readiness poll's verdict: ready, not yet (``reason``), or never (``fatal``)."""

    ready: bool
    reason: str = ""
    fatal: bool = False


class _OpenAIModel(msgspec.Struct):
    id: str


class _OpenAIModelList(msgspec.Struct):
    data: list[_OpenAIModel]


class _OllamaModel(msgspec.Struct):
    name: str
    model: str = ""


class _OllamaTags(msgspec.Struct):
    models: list[_OllamaModel]


def judge_probe(spec: BackendSpec, status_code: int, body: bytes) -> Probe:
    """Decide from one answer on ``spec.ready_url`` whether the server is ready.

    A non-200 answer means "still loading" (llama-server answers 503 while it loads the model).
    A 200 whose body is not what this kind serves, or that lacks the expected model, is fatal:
    waiting longer would not change it.
    """
    if status_code != 200:
        return Probe(ready=False, reason=f"{spec.ready_url} answered HTTP {status_code}")
    if spec.kind is BackendKind.LLAMA_SERVER or spec.model is None:
        return Probe(ready=True)
    try:
        if spec.kind is BackendKind.VLLM:
            served = [m.id for m in msgspec.json.decode(body, type=_OpenAIModelList).data]
        else:
            tags = msgspec.json.decode(body, type=_OllamaTags).models
            served = [n for m in tags for n in (m.name, m.model) if n]
    except msgspec.DecodeError as exc:
        return Probe(
            ready=False,
            fatal=True,
            reason=f"{spec.ready_url} answered 200 but not as {spec.kind.value} does: {exc}; "
            f"is another server on port {spec.port}?",
        )
    wanted = {spec.model, f"{spec.model}:latest"} if ":" not in spec.model else {spec.model}
    if wanted & set(served):
        return Probe(ready=True)
    if spec.kind is BackendKind.OLLAMA:
        todo = f"pull it first with `ollama pull {spec.model}` (models are shared by every server)"
    else:
        todo = "pass the same name as served_model_name"
    return Probe(
        ready=False,
        fatal=True,
        reason=f"{spec.kind.value} at {spec.base_url} serves {sorted(set(served))}, not {spec.model!r}: {todo}",
    )
