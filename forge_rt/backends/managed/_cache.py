"""Where forge_rt keeps files it makes for itself: joined model files and backend logs."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "default_log_dir"]


def cache_root() -> Path:
    """``$FORGE_RT_CACHE`` if set, else ``$XDG_CACHE_HOME/forge_rt``, else ``~/.cache/forge_rt``."""
    if explicit := os.environ.get("FORGE_RT_CACHE"):
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "forge_rt"


def default_log_dir() -> Path:
    """Where managed backends' stdout and stderr are written unless a log path is given."""
    return cache_root() / "logs"
