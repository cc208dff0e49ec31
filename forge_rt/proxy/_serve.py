"""Serving the proxy: hypercorn's trio worker in a nursery, the runtime owned around it.

:func:`serve_proxy` starts the runtime (backend, actor system, slot), then hypercorn on the
configured address (port 0 picks a free one), yields the base URL, and on exit shuts the server
down gracefully (in-flight requests get ``graceful_timeout_s``) before the runtime stops.
Hypercorn's own log lines go to structlog; the library configures no logging handlers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.logging import Logger
from hypercorn.trio import serve

from actors import quiet_logger
from forge_rt.core import LLMClient
from forge_rt.proxy._app import ProxyApp
from forge_rt.proxy._config import ProxyConfig
from forge_rt.proxy._http_errors import install as install_json_http_errors
from forge_rt.proxy._runtime import open_runtime

__all__ = ["hypercorn_config", "serve_proxy"]

_hypercorn_log = quiet_logger("forge_rt.proxy.server")


class _StructlogLogger(Logger):
    """Hypercorn's logger interface, writing to structlog instead of stdlib handlers.

    Access lines are not logged: every request is counted in the Prometheus metrics instead.
    """

    def __init__(self, config: Config) -> None:
        self.access_log_format = config.access_log_format
        self.access_logger = None
        self.error_logger = None

    async def access(self, request: Any, response: Any, request_time: float) -> None:
        return None

    async def critical(self, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.critical(message % args if args else message)

    async def error(self, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.error(message % args if args else message)

    async def warning(self, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.warning(message % args if args else message)

    async def info(self, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.info(message % args if args else message)

    async def debug(self, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.debug(message % args if args else message)

    async def exception(self, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.error(message % args if args else message, exc_info=True)

    async def log(self, level: int, message: str, *args: Any, **kwargs: Any) -> None:
        _hypercorn_log.log(level, message % args if args else message)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)


def hypercorn_config(config: ProxyConfig) -> Config:
    """The hypercorn configuration for ``config``: its address, logging through structlog."""
    hc = Config()
    host = f"[{config.host}]" if ":" in config.host else config.host
    hc.bind = [f"{host}:{config.port}"]
    hc.logger_class = _StructlogLogger
    hc.accesslog = None
    hc.errorlog = None
    hc.graceful_timeout = config.graceful_timeout_s
    # Short: hypercorn (0.18) holds a connection the client has closed until its keep-alive
    # timer ends (the idle task keeps the connection's task group open), so each closed
    # connection sat in CLOSE_WAIT for the whole timeout -- 60 s of a file descriptor per
    # churned client. An idle client reconnects after 5 s instead, which costs nothing on
    # loopback.
    hc.keep_alive_timeout = 5.0
    hc.include_server_header = False
    return hc


@asynccontextmanager
async def serve_proxy(
    config: ProxyConfig, *, client: LLMClient | None = None
) -> AsyncIterator[str]:
    """Run the proxy for the duration of the block; yields its base URL (``http://HOST:PORT``).

    OpenAI clients use ``url + "/v1"`` as their base URL, Anthropic clients ``url``. ``client``
    replaces the backend the config describes (tests, or an application that already holds
    one). Raises what starting the backend raises, unchanged.
    """
    install_json_http_errors()  # hypercorn's own 400/431 answers get JSON bodies too
    async with open_runtime(config, client=client) as runtime:
        app = ProxyApp(config, runtime=runtime)
        stop = trio.Event()
        body_error: BaseException | None = None
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(
                partial(serve, app, hypercorn_config(config), shutdown_trigger=stop.wait)  # type: ignore[arg-type]
            )
            url = binds[0]
            quiet_logger(__name__).info("proxy.listening", url=url)
            try:
                yield url
            except BaseException as exc:  # noqa: BLE001 -- held, not handled: re-raised below
                # Raised after the server has shut down, as itself: the caller's own exception
                # (Ctrl-C, a failed assertion, a cancellation) rather than a nursery's group.
                body_error = exc
            finally:
                stop.set()
        if body_error is not None:
            raise body_error
