"""Durable sessions: a ``SessionStore`` keeps each session's messages and control state.

:class:`SqliteStore` (one file, the default for ``Session.open(client, store=path)``) and
:class:`PostgresStore` (several processes or machines; the ``postgres`` extra) share one
schema, versioned and migrated on open. :func:`open_store` picks one from a path or URL.
"""

from forge_rt.store._open import open_store as open_store
from forge_rt.store._open import store_for as store_for
from forge_rt.store._postgres import PostgresStore as PostgresStore
from forge_rt.store._records import Lease as Lease
from forge_rt.store._records import SessionInfo as SessionInfo
from forge_rt.store._records import SessionStore as SessionStore
from forge_rt.store._records import StoredSession as StoredSession
from forge_rt.store._sql import SCHEMA_VERSION as SCHEMA_VERSION
from forge_rt.store._sqlite import SqliteStore as SqliteStore

__all__ = [
    "SCHEMA_VERSION",
    "Lease",
    "PostgresStore",
    "SessionInfo",
    "SessionStore",
    "SqliteStore",
    "StoredSession",
    "open_store",
    "store_for",
]
