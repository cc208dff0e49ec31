"""A simulated LLM server for tests, benchmarks and demos: real HTTP, modelled time, faults on demand.

:class:`SimBackend` listens on 127.0.0.1 and speaks the OpenAI chat-completions API (with
llama-server's ``/props``, ``/slots``, ``/metrics``, ``/tokenize``, ``/detokenize`` and its
request extensions, and vLLM's ``max_model_len`` and ``priority``), Ollama's ``/api/chat`` and
Anthropic's ``/v1/messages``, streaming and not::

    async with SimBackend.serve(SimConfig(script={"*": ["hello"]})) as sim:
        async with httpx.AsyncClient(base_url=sim.url) as http:
            reply = await http.post("/v1/chat/completions", json={"messages": [...]})

Replies come from a script (:class:`SimReply` per request, consumed in order per conversation)
or from an oracle plus :class:`FailureRates` that render the intended call the ways small local
models get it wrong. Prefill and decode run at configured token rates against a per-slot prefix
cache; a client that disconnects stops its generation at once. :class:`Fault` lists the
transport faults it can inject. It never replaces testing against a real model server.
"""

from forge_rt.backends.sim._config import Dialect as Dialect
from forge_rt.backends.sim._config import FailureRates as FailureRates
from forge_rt.backends.sim._config import Fault as Fault
from forge_rt.backends.sim._config import Intent as Intent
from forge_rt.backends.sim._config import Oracle as Oracle
from forge_rt.backends.sim._config import SimConfig as SimConfig
from forge_rt.backends.sim._config import SimReply as SimReply
from forge_rt.backends.sim._config import SimToolCall as SimToolCall
from forge_rt.backends.sim._model import default_oracle as default_oracle
from forge_rt.backends.sim._server import SimBackend as SimBackend
from forge_rt.backends.sim._stats import ReplyRecord as ReplyRecord
from forge_rt.backends.sim._stats import SimStats as SimStats
from forge_rt.backends.sim._stats import SlotStats as SlotStats
from forge_rt.backends.sim._view import RequestView as RequestView
from forge_rt.backends.sim._view import ViewMessage as ViewMessage
from forge_rt.backends.sim._view import ViewTool as ViewTool
from forge_rt.backends.sim._view import ViewToolCall as ViewToolCall

__all__ = [
    "Dialect",
    "FailureRates",
    "Fault",
    "Intent",
    "Oracle",
    "ReplyRecord",
    "RequestView",
    "SimBackend",
    "SimConfig",
    "SimReply",
    "SimStats",
    "SimToolCall",
    "SlotStats",
    "ViewMessage",
    "ViewTool",
    "ViewToolCall",
    "default_oracle",
]
