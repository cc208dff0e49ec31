"""Child processes for the benches that run a server in its own process: a free port, and a
process started into an ``ExitStack`` that stops it (SIGTERM, then SIGKILL) on the way out."""

from __future__ import annotations

import socket
import subprocess
from contextlib import ExitStack
from pathlib import Path

__all__ = ["free_port", "spawn"]

_STOP_GRACE_S = 10.0


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(stack: ExitStack, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` with its output in ``log``; ``stack`` stops it when it closes."""
    out = stack.enter_context(log.open("wb"))
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_GRACE_S)

    stack.callback(stop)
    return proc
