"""Everything a running proxy holds: the backend, its client, the actor system, slot and budget.

With several backends (``ProxyConfig.more_backends``) the slot is a :class:`Fleet` of one
SlotWorker per backend, and ``backend`` is the first of them (its client answers what the
model can do: all serve the same model).

:func:`open_runtime` brings them up in order and takes them down in reverse on exit (trio
nurseries and context managers own every task and child process). The backend comes from the
config: an external server (a client to its URL), a managed one (forge_rt starts llama-server
on a GGUF file or ``vllm serve`` on a model directory), or the embedded packaged model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import msgspec

from actors import ActorSystem, quiet_logger
from forge_rt.clients import LlamaServerClient, OpenAICompatClient, VLLMClient, make_client
from forge_rt.context import TokenEstimator
from forge_rt.core import LLMClient
from forge_rt.guardrails import choose_constraint, respond_spec
from forge_rt.proxy._config import BackendConfig, ProxyConfig
from forge_rt.proxy._engine import InferenceEngine
from forge_rt.proxy._errors import redact
from forge_rt.proxy._metrics import ProxyMetrics
from forge_rt.proxy._transport import coalescing_transport
from forge_rt.runtime import (
    BudgetMonitor,
    BudgetSource,
    ClientContextSource,
    Fleet,
    InferenceSlot,
    LlamaServerSource,
    NvmlSource,
    SlotWorker,
    StallLimits,
    VLLMMetricsSource,
)

__all__ = ["Backend", "ProxyRuntime", "cache_lines", "open_backend", "open_runtime"]

log = quiet_logger(__name__)

# How often the BudgetActor re-reads its sources while the proxy runs.
_BUDGET_INTERVAL_S = 5.0


class Backend(msgspec.Struct, frozen=True, kw_only=True):
    """A backend the proxy talks to: its client, its kind, where it is and how it was started."""

    client: LLMClient
    kind: str
    url: str | None
    mode: str


class ProxyRuntime:
    """The live parts of one proxy (see the module docstring)."""

    def __init__(
        self,
        *,
        config: ProxyConfig,
        backend: Backend,
        slot: InferenceSlot,
        budget: BudgetMonitor,
        metrics: ProxyMetrics,
    ) -> None:
        self.config = config
        self.backend = backend
        self.client = backend.client
        self.slot = slot
        self.budget = budget
        self.metrics = metrics
        self.estimator = TokenEstimator()
        self.client_tokens: dict[str, int] = {}
        """Each client's last prompt + completion tokens, as the backend reported them."""
        self.engine = InferenceEngine(
            slot,
            metrics,
            rescue=config.rescue,
            max_retries=config.max_retries,
            respond_tool=config.respond_tool,
            constrain=config.constrain,
            call_list=config.call_list,
            fan_out=config.fan_out,
            prose_answers=config.prose_answers,
            unfounded_calls=config.unfounded_calls,
            rules_off=config.rules_off,
            rules_on=config.rules_on,
            deadline_s=config.request_deadline_s,
            on_usage=self._observe_usage,
            policy=config.policy,
        )

    async def _observe_usage(self, client: str, tokens: int) -> None:
        # Kept here rather than sent to the BudgetActor per request: an actor message per
        # request is a task switch on the hot path, and the actor only reports these figures.
        self.client_tokens[client] = tokens

    async def models(self) -> list[str]:
        """The model ids the backend serves (asked each time: that is what "honest" means);
        a fleet of backends serving different models, the models they name."""
        if isinstance(self.slot, Fleet) and len(self.slot.models) > 1:
            return list(self.slot.models)
        client = self.client
        if isinstance(client, OpenAICompatClient):
            return await client.models()
        return [client.model] if client.model is not None else []


@asynccontextmanager
async def open_backend(
    config: BackendConfig, *, env: dict[str, str] | None = None
) -> AsyncIterator[Backend]:
    """The backend of ``config``, started if forge_rt manages it (``env`` added to a managed
    server's environment), stopped on exit."""
    async with AsyncExitStack() as stack:
        key = config.api_key.get_secret_value() if config.api_key is not None else None
        if config.url is not None:
            kind = config.kind or "openai"
            opts: dict[str, object] = {
                "model": config.model,
                "read_timeout": config.timeout_s,
                "transport": coalescing_transport(),
            }
            if kind != "ollama" and key is not None:
                opts["api_key"] = key
            client: LLMClient = make_client(kind, config.url, **opts)
            url: str | None = config.url
        elif config.gguf is not None:
            from forge_rt.backends.managed import DEFAULT_RESTART, ManagedBackend, llama_server_spec

            kind = "llamaserver"
            spec = llama_server_spec(
                config.gguf,
                ctx_size=config.n_ctx,
                parallel=config.n_parallel,
                executable=config.executable or "llama-server",
                env=env,
            )
            managed = await stack.enter_async_context(
                ManagedBackend.start(spec, restart=DEFAULT_RESTART)
            )
            url = managed.url
            client = LlamaServerClient(
                url,
                model=config.model,
                generation="raw",  # a server forge_rt started: preempted calls resume exactly
                read_timeout=config.timeout_s,
                transport=coalescing_transport(),
            )
        elif config.model_path is not None:
            from forge_rt.backends.managed import DEFAULT_RESTART, ManagedBackend, vllm_spec

            kind = "vllm"
            spec = vllm_spec(
                config.model_path,
                max_model_len=config.n_ctx,
                executable=config.executable or "vllm",
                env=env,
            )
            managed = await stack.enter_async_context(
                ManagedBackend.start(spec, startup_timeout=600.0, restart=DEFAULT_RESTART)
            )
            url = managed.url
            client = VLLMClient(
                url, read_timeout=config.timeout_s, transport=coalescing_transport()
            )
        else:
            # Imported here: the embedded model pulls in the local-model machinery only when used.
            from forge_rt.backends.local import DEFAULT_MODEL, LocalModelServer, resolve_model

            kind = "llamaserver"
            # Served under the packaged model's name (not its cache file's path), which
            # /v1/models lists and /health reports.
            name = resolve_model(config.embedded_model or DEFAULT_MODEL).name
            server = await stack.enter_async_context(
                LocalModelServer.start(
                    config.embedded_model or DEFAULT_MODEL,
                    n_ctx=config.n_ctx,
                    n_parallel=config.n_parallel,
                    extra_args=("--alias", name),
                )
            )
            url = server.url
            client = LlamaServerClient(
                url,
                model=name,
                generation="raw",  # a server forge_rt started: preempted calls resume exactly
                read_timeout=config.timeout_s,
                transport=coalescing_transport(),
            )
        stack.push_async_callback(client.aclose)
        shown = redact(url) if url is not None else None  # credentials in a URL are never logged
        log.info("proxy.backend", mode=config.mode, kind=kind, url=shown, model=client.model)
        yield Backend(client=client, kind=kind, url=url, mode=config.mode)


def cache_lines(backend: Backend, config: BackendConfig) -> int | None:
    """The KV slots the proxy's one SlotWorker uses as cache lines: every slot of a llama-server
    forge_rt started itself with ``--parallel`` above 1 (it generates one request at a time, so
    the other slots keep a preempted request's prompt and other clients' histories warm). An
    external server's slots are its operator's to assign: none."""
    if backend.mode == "external" or backend.kind != "llamaserver" or config.n_parallel < 2:
        return None
    return config.n_parallel


def _sources(backend: Backend) -> list[BudgetSource]:
    """The BudgetActor's sources, all reading through the backend's one client (closed with it)."""
    client = backend.client
    sources: list[BudgetSource] = [ClientContextSource(client)]
    # The client's type decides: open_backend builds these for kinds "llamaserver" and "vllm",
    # and a client handed to open_runtime is read the same way.
    if isinstance(client, LlamaServerClient):
        sources.append(LlamaServerSource(client))
    if isinstance(client, VLLMClient):
        sources.append(VLLMMetricsSource(client))
    if backend.mode != "external":
        sources.append(NvmlSource())
    return sources


@asynccontextmanager
async def open_runtime(
    config: ProxyConfig, *, client: LLMClient | None = None
) -> AsyncIterator[ProxyRuntime]:
    """Start everything ``config`` describes; ``client`` replaces the backend (tests, embedding).

    Raises what starting the backend raises (``BackendStartError``, ``ModelPartsMissingError``,
    ...), unchanged.
    """
    async with AsyncExitStack() as stack:
        if client is not None:
            backends = [Backend(client=client, kind="custom", url=None, mode="external")]
        else:
            backends = [
                await stack.enter_async_context(open_backend(each, env=config.server_env(i)))
                for i, each in enumerate(config.backends)
            ]
        backend = backends[0]
        if config.constrain == "always":
            # Refused at start, not on every request: choose_constraint raises for a backend
            # that accepts neither a JSON schema nor a grammar.
            choose_constraint(
                "always", backend.client.capabilities, (respond_spec(),), backend=backend.kind
            )
        sources = [source for each in backends for source in _sources(each)]
        # "cancel": by the time the runtime closes, the server has finished its requests; the
        # budget ticker's sleep must not hold the shutdown up.
        system = await stack.enter_async_context(ActorSystem.open(shutdown="cancel"))
        slot_options: dict[str, Any] = {
            "policy": config.preempt,
            "max_preemptions": config.max_preemptions,
            "max_queue": config.max_queue,
            "stall": StallLimits(first_token_s=config.stall_s, between_chunks_s=config.stall_s),
        }
        slot: InferenceSlot
        if len(backends) > 1:  # external ones' KV slots are their operators' to assign
            slot = await Fleet.start(
                system,
                [b.client for b in backends],
                cache_lines=cache_lines(backend, config.backend),
                **slot_options,
            )
        else:
            slot = await SlotWorker.start(
                system,
                backend.client,
                name="proxy-slot",
                cache_lines=cache_lines(backend, config.backend),
                **slot_options,
            )
        budget = await BudgetMonitor.start(
            system, sources, name="proxy-budget", interval=_BUDGET_INTERVAL_S
        )
        yield ProxyRuntime(
            config=config,
            backend=backend,
            slot=slot,
            budget=budget,
            metrics=ProxyMetrics(),
        )
