"""A throwaway PostgreSQL server, for tests and benchmarks of the PostgreSQL store: the
installed server binaries, a fresh cluster in a temporary folder, on a loopback port, stopped
and deleted at the end.

forge_rt's own `.ci/run` installs Debian's ``postgresql`` package; on a machine without the
binaries :func:`throwaway_postgres` raises with how to install them (the PostgreSQL store is
tested against a real server or not at all). As root, the server runs as the ``postgres`` user,
since PostgreSQL refuses to run as root. ``fsync=off``: the cluster is thrown away, and tests
should not wait on the disk.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["throwaway_postgres"]


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path is not None:
        return Path(on_path).parent
    raise FileNotFoundError(
        "a throwaway PostgreSQL server needs PostgreSQL's server binaries (initdb, pg_ctl): "
        "on Debian, `apt-get install postgresql`"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def throwaway_postgres(*, fsync: bool = False) -> Iterator[str]:
    """Start a new cluster; yield its URL (user ``forge``, database ``postgres``, no password).

    ``fsync=True`` for measurements that should pay what a real server pays per commit.
    """
    bin_dir = _binaries()
    root = Path(tempfile.mkdtemp(prefix="forge-rt-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    port = _free_port()

    def run(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, timeout=120)

    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", "forge", "--auth=trust", "-E", "UTF8")
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1"
        options += "" if fsync else " -c fsync=off"
        pg_ctl = str(bin_dir / "pg_ctl")
        run(
            pg_ctl,
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        try:
            yield f"postgresql://forge@127.0.0.1:{port}/postgres"
        finally:
            run(pg_ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=False)
