"""Session leases: several processes on one store, each session run by one of them at a time.

Chat daemons on several machines share sessions through one PostgreSQL store. The version check
of each commit already refuses interleaved writers; a lease says who *runs* a session, so a
second daemon neither starts a session another one is running nor waits forever on one whose
process died: a :class:`Session` claims a session's lease when it starts it, renews every lease
it holds each third of ``ttl_s`` while it is open, and gives them up when it closes. A process
killed with ``kill -9`` stops renewing; once its leases expire, another process may take the
sessions over and finish their turns (``Session.orphaned``).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import msgspec
import trio

from actors import quiet_logger
from forge_rt.errors import ConfigurationError, SessionLeasedError
from forge_rt.store import SessionInfo, SessionStore

__all__ = ["LeaseKeeper", "SessionLease"]

_log = quiet_logger(__name__)

# How long closing a session waits for its leases to be given up before leaving them to expire.
_RELEASE_LIMIT_S = 5.0


def _process_owner() -> str:
    """A name no other process shares: host, process id and a random tail."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class SessionLease(msgspec.Struct, frozen=True, kw_only=True):
    """Who this process is to a shared store, and how long its claim on a session lasts.

    ``owner``: this process's name in the store (unique by default; give a replica a stable
    one, and a restarted replica takes its sessions back at once instead of after ``ttl_s``).
    ``ttl_s``: how long a claim lasts unrenewed -- how soon another process may take over the
    sessions of one that died. ``renew_every_s``: how often the claims are renewed (a third of
    ``ttl_s`` by default; less than it, so a renewal late by a stall still lands). ``clock``: seconds since the epoch,
    shared by every process on the store (so the wall clock, kept in step by NTP), injectable
    for tests.
    """

    owner: str = msgspec.field(default_factory=_process_owner)
    ttl_s: float = 30.0
    renew_every_s: float | None = None
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if not self.owner:
            raise ConfigurationError("SessionLease.owner must not be empty")
        if not self.ttl_s > 0:
            raise ConfigurationError(f"SessionLease.ttl_s must be > 0, got {self.ttl_s}")
        if self.renew_every_s is not None and not 0 < self.renew_every_s < self.ttl_s:
            raise ConfigurationError(
                f"SessionLease.renew_every_s must be > 0 and < ttl_s ({self.ttl_s}), got "
                f"{self.renew_every_s}"
            )

    @property
    def renew_period(self) -> float:
        """Seconds between two renewals."""
        return self.ttl_s / 3 if self.renew_every_s is None else self.renew_every_s


class LeaseKeeper:
    """The leases one Session holds on its store: claimed at start, renewed while it is open."""

    def __init__(self, store: SessionStore, lease: SessionLease) -> None:
        self.store = store
        self.lease = lease
        self.held: set[str] = set()

    async def claim(self, name: str) -> None:
        """Hold session ``name``; :class:`SessionLeasedError` where another process does."""
        now = self.lease.clock()
        found = await self.store.claim(
            name, self.lease.owner, now=now, until=now + self.lease.ttl_s
        )
        if found.owner != self.lease.owner:
            raise SessionLeasedError(
                f"session {name!r} in {self.store.description} is run by {found.owner!r}, whose "
                f"lease lasts {found.expires_at - now:.1f} s more: start it there, or here once "
                "that process closes it or stops renewing (it died)",
                store=self.store.description,
                session=name,
                owner=found.owner,
                expires_in=found.expires_at - now,
            )
        self.held.add(name)

    @asynccontextmanager
    async def claimed(self, name: str) -> AsyncIterator[None]:
        """Hold session ``name`` (see :meth:`claim`) for what runs inside; given up again if
        that fails, so a start that did not happen holds nothing."""
        await self.claim(name)
        try:
            yield
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.release(name)
            raise

    async def release(self, name: str) -> None:
        """Give session ``name`` up (another process may start it at once)."""
        self.held.discard(name)
        await self.store.release([name], self.lease.owner)

    def orphaned(self, info: SessionInfo) -> bool:
        """Whether ``info`` is a session left mid-turn that no live process runs: its holder's
        lease expired, or it is this owner's from an earlier life of this process."""
        if info.status != "in_turn" or info.name in self.held:
            return False
        holder = info.held_by(self.lease.clock())
        return holder is None or holder == self.lease.owner

    async def _renew(self) -> None:
        names = sorted(self.held)
        kept = await self.store.renew(
            names, self.lease.owner, until=self.lease.clock() + self.lease.ttl_s
        )
        for name in names:
            if name not in kept and name in self.held:
                # Renewed too late: another process took the session over. This one's next
                # commit of it is refused by the version check (SessionConflictError).
                self.held.discard(name)
                _log.warning("session.lease_lost", session=name, owner=self.lease.owner)

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[LeaseKeeper]:
        """Renew every held lease each ``renew_period`` inside; give them all up on exit."""
        async with trio.open_nursery() as nursery:

            async def renew_forever() -> None:
                while True:
                    await trio.sleep(self.lease.renew_period)
                    await self._renew()

            nursery.start_soon(renew_forever)
            try:
                yield self
            finally:
                nursery.cancel_scope.cancel()
                with trio.CancelScope(shield=True), trio.move_on_after(_RELEASE_LIMIT_S):
                    names, self.held = sorted(self.held), set()
                    await self.store.release(names, self.lease.owner)
