"""Start, wait for and stop your own inference server: llama-server, ``vllm serve`` or Ollama.

Build a spec with :func:`llama_server_spec`, :func:`vllm_spec` or :func:`ollama_spec` (pure: the
argv can be inspected), then run it::

    spec = llama_server_spec("model.gguf", ctx_size=8192, parallel=2)
    async with ManagedBackend.start(spec) as backend:
        ...  # backend.url, backend.log_path

The embedded model (:class:`forge_rt.backends.local.LocalModelServer`) is built on the same launcher.
"""

from forge_rt.backends.managed._cache import cache_root as cache_root
from forge_rt.backends.managed._cache import default_log_dir as default_log_dir
from forge_rt.backends.managed._process import DEFAULT_RESTART as DEFAULT_RESTART
from forge_rt.backends.managed._process import PARENT_PID_ENV as PARENT_PID_ENV
from forge_rt.backends.managed._process import ManagedBackend as ManagedBackend
from forge_rt.backends.managed._process import RestartPolicy as RestartPolicy
from forge_rt.backends.managed._spec import BackendKind as BackendKind
from forge_rt.backends.managed._spec import BackendSpec as BackendSpec
from forge_rt.backends.managed._spec import Probe as Probe
from forge_rt.backends.managed._spec import free_loopback_port as free_loopback_port
from forge_rt.backends.managed._spec import judge_probe as judge_probe
from forge_rt.backends.managed._spec import llama_server_spec as llama_server_spec
from forge_rt.backends.managed._spec import ollama_spec as ollama_spec
from forge_rt.backends.managed._spec import vllm_spec as vllm_spec

__all__ = [
    "DEFAULT_RESTART",
    "PARENT_PID_ENV",
    "BackendKind",
    "BackendSpec",
    "ManagedBackend",
    "Probe",
    "RestartPolicy",
    "cache_root",
    "default_log_dir",
    "free_loopback_port",
    "judge_probe",
    "llama_server_spec",
    "ollama_spec",
    "vllm_spec",
]
