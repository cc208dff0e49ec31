"""One way to name a store in configuration: a file path, or a ``postgresql://`` URL."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from forge_rt.store._postgres import PostgresStore
from forge_rt.store._records import SessionStore
from forge_rt.store._sql import SqlStore
from forge_rt.store._sqlite import SqliteStore

__all__ = ["open_store"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def store_for(where: str | os.PathLike[str]) -> SqlStore:
    """The store ``where`` names, not yet opened: a PostgreSQL URL, else an SQLite file."""
    text = os.fspath(where)
    if text.startswith(_POSTGRES_SCHEMES):
        return PostgresStore(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"a store is an SQLite file path or a postgresql:// URL, not a {scheme}:// URL"
        )
    return SqliteStore(text)


@asynccontextmanager
async def open_store(where: str | os.PathLike[str]) -> AsyncIterator[SessionStore]:
    """Open the store ``where`` names (see :func:`store_for`) and close it on exit."""
    async with store_for(where) as store:
        yield store
