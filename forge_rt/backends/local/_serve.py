"""Child-process entry point: llama.cpp's HTTP server via xllamacpp, with llama-server's flag names.

Run as ``python -m forge_rt.backends.local._serve --model PATH --port P ...``. It accepts the
subset of ``llama-server`` flags forge_rt uses, so the managed-backend launcher can drive it exactly
as it drives a real ``llama-server``. It serves until SIGTERM or SIGINT, then shuts the server down
cleanly and exits 0. If ``FORGE_RT_PARENT_PID`` names its parent, it also exits when that parent
dies without stopping it, so a killed test run leaves no model server behind. Shutting the server
down is bounded: if it hangs, the process exits with status 1 after writing all stacks to its log.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import xllamacpp

from actors import quiet_logger
from forge_rt._logging import configure_logging
from forge_rt.backends.managed import PARENT_PID_ENV

__all__ = ["build_parser", "main"]

log = quiet_logger(__name__)

_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
_PARENT_CHECK_S = 0.5
_DESTROY_DEADLINE_S = 5.0


def build_parser() -> argparse.ArgumentParser:
    """The llama-server flags this entry point understands."""
    p = argparse.ArgumentParser(
        prog="python -m forge_rt.backends.local._serve",
        description="llama.cpp's server (via xllamacpp) with llama-server's flag names.",
    )
    p.add_argument("-m", "--model", required=True, help="GGUF file to serve")
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="total context (all slots)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8080, help="port to listen on")
    p.add_argument("-np", "--parallel", type=int, default=1, help="number of slots")
    p.add_argument("-t", "--threads", type=int, default=None, help="generation threads")
    p.add_argument("-tb", "--threads-batch", type=int, default=None, help="prompt threads")
    p.add_argument("-ngl", "--n-gpu-layers", type=int, default=None, help="layers on the GPU")
    p.add_argument("-b", "--batch-size", type=int, default=None, help="logical batch (tokens)")
    p.add_argument("-ub", "--ubatch-size", type=int, default=None, help="physical batch (tokens)")
    p.add_argument("-a", "--alias", default=None, help="model name reported by /v1/models")
    p.add_argument("--jinja", action="store_true", help="use the model's Jinja chat template")
    p.add_argument("--metrics", action="store_true", help="serve /metrics")
    p.add_argument("--slots", action="store_true", help="serve /slots")
    p.add_argument("--props", action="store_true", help="allow POST /props")
    return p


def _params(args: argparse.Namespace) -> Any:
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx_size
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.parallel
    params.use_jinja = args.jinja
    params.endpoint_metrics = args.metrics
    params.endpoint_slots = args.slots
    params.endpoint_props = args.props
    if args.threads is not None:
        params.cpuparams.n_threads = args.threads
        params.cpuparams_batch.n_threads = args.threads
    if args.threads_batch is not None:
        params.cpuparams_batch.n_threads = args.threads_batch
    if args.n_gpu_layers is not None:
        params.n_gpu_layers = args.n_gpu_layers
    if args.batch_size is not None:
        params.n_batch = args.batch_size
    if args.ubatch_size is not None:
        params.n_ubatch = args.ubatch_size
    if args.alias is not None:
        params.model_alias = {args.alias}
    return params


def _exit_with_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(_PARENT_CHECK_S)
    log.warning("serve.parent_gone", parent_pid=parent_pid)
    # Process-directed and blocked in every thread, so it stays pending for sigwait in main().
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until told to stop; returns the process exit status."""
    args = build_parser().parse_args(argv)
    configure_logging(json=False, level="info")
    params = _params(args)
    # Block the stop signals before the server starts its threads: they inherit the mask, so the
    # signals wait for sigwait below instead of killing the process mid-request.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    parent = os.environ.get(PARENT_PID_ENV)
    if parent is not None and int(parent) == os.getppid():
        threading.Thread(
            target=_exit_with_parent, args=(int(parent),), name="parent-watch", daemon=True
        ).start()
    server = xllamacpp.Server(params)
    log.info("serve.ready", url=server.listening_address, model=args.model, pid=os.getpid())
    received = signal.sigwait(_STOP_SIGNALS)
    log.info("serve.stopping", signal=signal.Signals(received).name)
    # The destructor stops the HTTP loop and frees the model. It joins llama.cpp's threads while
    # holding the GIL, and once (in a benchmark, under load) that join never returned; only
    # faulthandler's C-level watchdog can still act then: it writes every thread's stack to the
    # log and exits with status 1, so a stop is bounded by this, not by the parent's SIGKILL.
    faulthandler.dump_traceback_later(_DESTROY_DEADLINE_S, exit=True)
    del server
    faulthandler.cancel_dump_traceback_later()
    log.info("serve.stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
