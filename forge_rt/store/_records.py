"""What a session store keeps: typed records, independent of the database behind them.

A store keeps, per session, an append-only log of messages and one opaque control-state blob,
with a version number that every commit advances. The runtime decides what the blob holds
(``forge_rt.runtime`` encodes its control state there); the store only promises that messages
and state of one commit land together or not at all, before the commit returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from forge_rt.core import Message

__all__ = ["Lease", "SessionInfo", "SessionStore", "StoredSession"]


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One stored session, as listed: who it is, how far it got, and when it last changed.

    ``status`` is the runtime's word for the session's state at its last commit (``"idle"``
    between turns, ``"in_turn"`` while a turn runs -- after a crash, a turn to resume).
    ``owner`` and ``lease_expires_at`` are the session's lease as last claimed or renewed (None
    if none was): which process runs it, and until when (see :class:`Lease`).
    """

    name: str
    workflow: str
    status: str
    messages: int
    version: int
    created_at: float  # seconds since the epoch
    updated_at: float
    owner: str | None = None
    lease_expires_at: float | None = None

    def held_by(self, now: float) -> str | None:
        """The owner whose lease on the session is live at ``now``, or None: free to take."""
        if self.lease_expires_at is None or self.lease_expires_at <= now:
            return None
        return self.owner


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """Which process runs a session, until when: several processes sharing one store (chat
    daemons on one PostgreSQL) each run a session only while they hold its lease, and renew it
    while they run; a process that dies stops renewing, and once ``expires_at`` passes another
    may take the session over. Times are seconds since the epoch, on the claimers' clocks."""

    session: str
    owner: str
    expires_at: float


class StoredSession(msgspec.Struct, frozen=True, kw_only=True):
    """A session as loaded: its whole message log in order, its state blob and its version."""

    info: SessionInfo
    messages: tuple[Message, ...]
    state: bytes


@runtime_checkable
class SessionStore(Protocol):
    """Durable sessions: SQLite (:class:`~forge_rt.store.SqliteStore`) or PostgreSQL
    (:class:`~forge_rt.store.PostgresStore`), or any class with these methods.

    :meth:`commit` is the only write. ``expect_version`` is the version the caller last saw (0
    for a session it is creating); a store holding another version raises
    :class:`~forge_rt.errors.SessionConflictError` and writes nothing, so two processes never
    interleave one session's log. Every method raises :class:`~forge_rt.errors.StoreError` when
    the database fails.
    """

    @property
    def description(self) -> str:
        """Where the sessions live, for messages (a path, or a URL without its password)."""
        ...

    async def sessions(self) -> list[SessionInfo]:
        """Every stored session, most recently changed first."""
        ...

    async def load(self, name: str) -> StoredSession | None:
        """The session ``name`` with its whole log, or None if it was never committed."""
        ...

    async def commit(
        self,
        name: str,
        *,
        workflow: str,
        messages: Sequence[Message],
        state: bytes,
        status: str,
        expect_version: int,
    ) -> int:
        """Append ``messages`` to the session's log and replace its state and status, in one
        transaction, durable when this returns; the session's new version."""
        ...

    async def delete(self, name: str) -> bool:
        """Forget the session ``name`` and its lease; False if there was no session."""
        ...

    async def claim(self, name: str, owner: str, *, now: float, until: float) -> Lease:
        """Give ``owner`` the lease of session ``name`` until ``until`` if no other owner holds
        it live at ``now`` (free, expired, or ``owner``'s already), in one transaction; the lease
        as it stands after -- another owner's where that one holds it."""
        ...

    async def renew(self, names: Sequence[str], owner: str, *, until: float) -> set[str]:
        """Extend ``owner``'s leases of ``names`` to ``until``; the names it still holds (one
        another owner took after it expired is not among them)."""
        ...

    async def release(self, names: Sequence[str], owner: str) -> None:
        """Give up ``owner``'s leases of ``names`` (another owner's are left as they are)."""
        ...

    async def aclose(self) -> None:
        """Close the connection; the store is unusable after."""
        ...
