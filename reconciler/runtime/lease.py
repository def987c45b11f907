"""One writer: the lease a reconciler holds before it writes, and its keeper (docs/leases.md).

``run`` writes to Palette and to the status branch only while ``lease.holds()``, and each write asks
``lease.fence()`` at the moment it is sent (``reconciler.fencing``: a monotonic write deadline taken
from the last successful renewal, minus a safety margin; past it :class:`Fenced` is raised). Where the lease
lives is the implementation's business: ``NoLease`` (``--lease none``: the operator promises a single
instance) here, ``reconciler.source.lease.GitLease`` (``--lease git``: a branch of the config
repository; only ``source/`` and ``status/`` speak git). A :class:`LeaseKeeper` takes and renews it
in the background.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable
from typing import Protocol

from reconciler.logging import get_logger

__all__ = ["Lease", "LeaseFence", "LeaseKeeper", "NoLease", "default_identity"]

log = get_logger(component="lease")

# Flux's defaults: a lease of 60 s is renewed every 20 s; a standby looks every 5 s.
RENEW_EVERY = 20.0
RETRY_EVERY = 5.0


class Lease(Protocol):
    """A lease that at most one process holds at a time."""

    identity: str
    """This process's name in the lease (unique per process)."""

    def acquire(self) -> bool:
        """Take the lease, or renew it if held; True iff this process holds it now. Contention
        returns False, never raises."""
        ...

    def holds(self) -> bool:
        """Held, and renewed recently enough that it cannot have expired: write only while True."""
        ...

    def fence(self) -> None:
        """Called right before each write is sent: raise :class:`Fenced` once the write deadline (the
        last successful renewal's start + duration - safety margin, monotonic clock) has passed."""
        ...

    def release(self) -> None:
        """Give the lease up at once so that a standby can take over (best effort)."""
        ...

    def holder(self) -> str | None:
        """Who holds the lease, as last seen (for ``/readyz``); None when nobody does."""
        ...


def default_identity() -> str:
    """The host name and a random suffix: unique per process, recognisable in ``/readyz`` and in git.

    A restarted process is a new holder: it waits for a lease its predecessor could not release to
    expire rather than assume it may act on its predecessor's behalf.
    """
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


class NoLease:
    """``--lease none``: always held; the operator guarantees that a single instance runs."""

    def __init__(self, identity: str | None = None) -> None:
        self.identity = identity or default_identity()

    def acquire(self) -> bool:
        return True

    def holds(self) -> bool:
        return True

    def fence(self) -> None:
        """Never fires: the operator promises a single instance."""

    def release(self) -> None:
        """Nothing to give up."""

    def holder(self) -> str | None:
        return self.identity


class LeaseFence:
    """The fence a running reconciler hands its writers (Palette clients, the status store, the apply
    stage): it asks whichever lease the reconciler holds now (``lease`` may be swapped after the writers
    were built); a dry run's never fires (it writes nothing)."""

    def __init__(self, lease: Lease, *, dry_run: bool = False) -> None:
        self.lease = lease
        self.dry_run = dry_run

    def __call__(self) -> None:
        if not self.dry_run:
            self.lease.fence()


class LeaseKeeper:
    """Keeps a :class:`Lease` from a background thread.

    While held it is renewed every ``renew_every`` seconds; while not, taken as soon as it is free,
    trying every ``retry_every`` seconds. :meth:`stop` ends the thread and releases the lease.
    ``on_change(held)`` is called (from the keeper's thread) whenever holding starts or stops.
    """

    def __init__(
        self,
        lease: Lease,
        *,
        renew_every: float = RENEW_EVERY,
        retry_every: float = RETRY_EVERY,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.lease = lease
        self.renew_every = renew_every
        self.retry_every = retry_every
        self.on_change = on_change
        self._stop = threading.Event()
        self._held = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the lease keeper is already running")
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop renewing and release the lease; returns within ``timeout`` seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def holds(self) -> bool:
        return self.lease.holds()

    def holder(self) -> str | None:
        return self.lease.holder()

    def fence(self) -> None:
        self.lease.fence()

    def wait_until_held(self, timeout: float | None = None) -> bool:
        """Block until this process holds the lease (True) or ``timeout`` passes (False)."""
        return self._held.wait(timeout) and self.lease.holds()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    held = self.lease.acquire()
                except Exception as exc:  # a keeper that dies would look like a holder that stopped
                    log.error("lease keeper: unexpected error", error=str(exc))
                    held = self.lease.holds()
                self._note(held)
                self._stop.wait(self.renew_every if held else self.retry_every)
        finally:
            try:
                self.lease.release()
            except Exception as exc:
                log.warning("lease keeper: release failed", error=str(exc))
            self._note(False)

    def _note(self, held: bool) -> None:
        if held == self._held.is_set():
            return
        if held:
            self._held.set()
        else:
            self._held.clear()
        log.info("lease held" if held else "lease not held", identity=self.lease.identity)
        if self.on_change is not None:
            self.on_change(held)
