"""The one-writer lease kept on a branch of the config repository (docs/leases.md, ``--lease git``).

The branch (default ``reconciler/lease``) holds exactly one commit: a parentless commit whose
``lease.json`` says who holds the lease, since when, when it was last renewed and for how long::

    {"holderIdentity": "pod-a-3f2c9e1d", "acquireTime": "2026-12-01T12:00:00.000000Z",
     "renewTime": "2026-12-01T12:04:20.000000Z", "leaseDurationSeconds": 60, "leaseTransitions": 2}

The field names and the expiry rule are those of a Kubernetes ``coordination.k8s.io/v1`` Lease.

Why this shape:

- Taking and renewing is one compare-and-swap: a push with ``--force-with-lease=<ref>:<sha read>``.
  The server moves the branch only if it still names the commit this process read, so two
  contenders cannot both win and no lease is ever overwritten blind.
- Every renewal is a new parentless commit replacing the last one, so the branch never grows
  history (each renewal leaves three small unreachable objects for the server's gc).
- Another holder's lease has expired when this process has seen the record unchanged for its whole
  duration, timed on this process's own monotonic clock from the moment it observed the record change
  (client-go's leader election rule: the record's ``renewTime`` is never compared with a local wall
  clock). Clocks may disagree by any amount: a standby whose clock runs an hour ahead waits a full
  duration all the same, and a holder whose clock jumped ahead before it died is taken over one
  duration after its last renewal was seen (within two durations of its death for a standby that
  watched). The skew between the record's ``renewTime`` and this machine's clock is measured at each
  change and logged when it is over a second (``lease clock skew``).
- The holder itself never trusts the wall clock: its write deadline (``reconciler.fencing``) is the
  start of its last successful renewal (monotonic clock, read before the push that recorded it) plus
  the duration minus the safety margin. :meth:`GitLease.holds` is true, and :meth:`GitLease.fence`
  lets a write through, only before it. A holder that cannot renew stops writing before any standby
  can see its lease expired.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git
from gitdb.base import IStream  # type: ignore[import-untyped]

from reconciler.fencing import WriteDeadline
from reconciler.logging import get_logger
from reconciler.source import _gitutil
from reconciler.source.cache_repo import GitCache
from reconciler.source.errors import GitError

log = get_logger(component="lease")

LEASE_FILE = "lease.json"
DEFAULT_BRANCH = "reconciler/lease"
# Flux's defaults: a lease counts for 60 s and is renewed every 20 s.
DEFAULT_DURATION = 60.0
# A holder stops writing 20 s before its lease could expire: room for a pass's writes in flight
# (bounded at 10 s) and for clock skew between the holder and a standby.
DEFAULT_SAFETY_MARGIN = 20.0
# Seconds one git command of the lease may take: well under the margin, so that a hung remote
# cannot keep a renewal pending while the lease runs out.
DEFAULT_TIMEOUT = 10.0
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class LeaseError(GitError):
    """The lease is misconfigured (bad URL, branch or identity). Contention is never an error."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What the lease branch says (the content of ``lease.json``)."""

    holder: str  # "" once released
    acquire_time: datetime
    renew_time: datetime
    duration: float
    transitions: int = 0

    def expired(self, now: datetime) -> bool:
        """The record's own wall-clock expiry (Kubernetes' field semantics, for display): whether its
        ``renewTime`` + duration is past at ``now`` or it was released. :class:`GitLease` never judges
        another holder by it; it times an unchanged record on its own monotonic clock."""
        return not self.holder or self.renew_time + timedelta(seconds=self.duration) < now

    def to_json(self) -> bytes:
        doc = {
            "holderIdentity": self.holder,
            "acquireTime": self.acquire_time.strftime(_TIME_FORMAT),
            "renewTime": self.renew_time.strftime(_TIME_FORMAT),
            "leaseDurationSeconds": self.duration,
            "leaseTransitions": self.transitions,
        }
        return (json.dumps(doc, indent=2) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> LeaseRecord:
        """The record in ``data``; ValueError when it is not a lease this reconciler wrote."""
        try:
            doc = json.loads(data)
            holder = doc["holderIdentity"]
            duration = float(doc["leaseDurationSeconds"])
            transitions = int(doc.get("leaseTransitions", 0))
            times = [
                datetime.strptime(doc[key], _TIME_FORMAT).replace(tzinfo=UTC)
                for key in ("acquireTime", "renewTime")
            ]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{LEASE_FILE} is not a lease record: {exc}") from None
        if not isinstance(holder, str) or not duration > 0:
            raise ValueError(f"{LEASE_FILE} is not a lease record: bad holderIdentity or duration")
        return cls(holder, times[0], times[1], duration, transitions)


class GitLease:
    """A lease on a branch of the config repository, taken and renewed by compare-and-swap pushes.

    ``url`` is the config repository (as for :class:`~reconciler.source.git.GitSource`), ``identity``
    this process's name in the lease (unique per process: see ``reconciler.runtime.lease``),
    ``cache_dir`` a private bare repository (default under ``~/.cache/paletteai-reconciler``).
    Thread-safe; :meth:`holds` never waits for git.
    """

    def __init__(
        self,
        url: str,
        identity: str,
        *,
        branch: str = DEFAULT_BRANCH,
        cache_dir: Path | None = None,
        duration: float = DEFAULT_DURATION,
        safety_margin: float = DEFAULT_SAFETY_MARGIN,
        timeout: float = DEFAULT_TIMEOUT,
        author: str = "paletteai-reconciler <reconciler@localhost>",
        on_stale_lock: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not identity or not identity.isprintable():
            raise LeaseError(f"invalid lease identity {identity!r}")
        if not 0 <= safety_margin < duration:
            raise LeaseError(
                f"the safety margin ({safety_margin} s) must be shorter than the lease ({duration} s)"
            )
        try:
            self._ident = _gitutil.author_env(author)
        except ValueError as exc:
            raise LeaseError(str(exc)) from None
        self._git = GitCache("lease", url, branch, cache_dir, error=LeaseError, on_stale_lock=on_stale_lock)
        self._location = self._git.location
        self.url = self._git.url
        self.identity = identity
        self.branch = branch
        self.duration = duration
        self.safety_margin = safety_margin
        self.timeout = timeout
        self.cache_dir = self._git.path
        self._clock = clock
        self._monotonic = monotonic
        self._lock = self._git.lock
        # The write deadline: from the start of the last successful renewal (read without the lock).
        self._deadline = WriteDeadline(duration - safety_margin, monotonic)
        self._commit: str | None = None  # the lease commit this process pushed last
        self._seen: LeaseRecord | None = None
        # The lease commit as last observed, and when (monotonic) this process saw it change to it.
        self._observed: tuple[str, float] | None = None
        self.skew: float | None = None  # renewTime - this machine's clock at the last change seen
        self.last_error: str | None = None

    @property
    def _ref(self) -> str:
        return self._git.ref

    @contextmanager
    def _operation(self) -> Iterator[git.Repo]:
        with self._git.operation() as repo:
            yield repo

    # -- the Lease protocol (reconciler.runtime.lease) ---------------------------------------------

    def acquire(self) -> bool:
        """Take the lease, or renew it if this process holds it; True iff this process holds it now.

        Losing to another holder returns False. So does a remote that cannot be reached, unless
        this process still holds the lease (then :meth:`holds` decides, and turns False in time).
        """
        with self._operation() as repo:
            try:
                return self._acquire(repo)
            except GitError as exc:
                self.last_error = str(exc)
                held = self.holds()
                log.warning(
                    "lease not renewed" if held else "lease not taken",
                    error=str(exc),
                    still_held=held,
                )
                return held

    def holds(self) -> bool:
        """True while this process holds the lease and its last renewal is recent enough that the
        lease cannot have expired (monotonic clock, with the safety margin)."""
        return self._deadline.holds()

    def fence(self) -> None:
        """Raise :class:`~reconciler.fencing.Fenced` unless a write may be sent now (see :meth:`holds`)."""
        self._deadline.check(self.identity)

    def deadline(self) -> float | None:
        """The monotonic moment this process stops writing (None when it does not hold the lease)."""
        return self._deadline.deadline()

    def release(self) -> None:
        """Give the lease up at once (a standby may take it right away); best effort, never raises."""
        with self._operation() as repo:
            if self._deadline.renewed_at is None or self._commit is None or self._seen is None:
                return
            self._deadline.lost()
            record = replace(self._seen, holder="", renew_time=self._now())
            try:
                commit = self._write_record(repo, record)
                error = self._push(repo, commit, self._commit)
            except GitError as exc:
                error = str(exc)
            if error is None:
                self._commit, self._seen = commit, record
                log.info("lease released", identity=self.identity)
            else:
                log.warning("lease not released; it expires on its own", error=error)

    def holder(self) -> str | None:
        """Who holds the lease as last seen (None when free, released or expired by now)."""
        seen = self._seen
        if seen is None or self._expired(seen, self._monotonic()):
            return None
        return seen.holder

    def record(self) -> LeaseRecord | None:
        """The lease as last seen on the branch (or as this process last wrote it)."""
        return self._seen

    # -- internals ----------------------------------------------------------------------------------

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _acquire(self, repo: git.Repo) -> bool:
        current = _gitutil.ls_remote_head(repo.git, self._location, self.branch, self.timeout)
        record: LeaseRecord | None = None
        if current is not None:
            current, record = self._read(repo, current)
        # Read both clocks together, before the push: the renewal counts from here, never later.
        started, now = self._monotonic(), self._now()
        self._observe(current, record, started, now)
        self._seen = record
        if record is not None and record.holder != self.identity and not self._expired(record, started):
            if self._deadline.renewed_at is not None:
                log.warning("lease lost to another holder", holder=record.holder)
            self._deadline.lost()
            return False
        ours = record is not None and record.holder == self.identity
        new = LeaseRecord(
            holder=self.identity,
            acquire_time=record.acquire_time if record is not None and ours else now,
            renew_time=now,
            duration=self.duration,
            transitions=0 if record is None else record.transitions + (0 if ours else 1),
        )
        commit = self._write_record(repo, new)
        error = self._push(repo, commit, current)
        if error is not None:
            # A lost compare-and-swap, or a remote that failed: look once more to tell which.
            after = _gitutil.ls_remote_head(repo.git, self._location, self.branch, self.timeout)
            if after != commit:
                if after == current:
                    raise GitError(f"cannot push {self.branch!r} to {self.url}: {error}")
                self._deadline.lost()
                self._seen = None
                return False
        if not ours:
            log.info("lease acquired", identity=self.identity, previous=record.holder if record else None)
        self._deadline.renewed(started)
        self._commit, self._seen, self.last_error = commit, new, None
        self._observed = (commit, started)
        return True

    def _observe(self, commit: str | None, record: LeaseRecord | None, at: float, now: datetime) -> None:
        """Note when the record changed, on this process's monotonic clock (``at``), and the skew."""
        if commit is None or record is None:
            self._observed = None
            return
        if self._observed is not None and self._observed[0] == commit:
            return
        self._observed = (commit, at)
        if record.holder and record.holder != self.identity:
            self.skew = (record.renew_time - now).total_seconds()
            if abs(self.skew) > 1.0:
                log.warning(
                    "lease clock skew",
                    holder=record.holder,
                    skew_seconds=round(self.skew, 3),
                    rule="expiry is timed on this process's monotonic clock; the skew changes nothing",
                )

    def _expired(self, record: LeaseRecord, at: float) -> bool:
        """Whether ``record`` no longer counts at ``at`` (monotonic): released, or seen unchanged for
        longer than its duration since this process observed it change."""
        if not record.holder:
            return True
        observed = self._observed
        return observed is not None and at - observed[1] > record.duration

    def _read(self, repo: git.Repo, current: str) -> tuple[str, LeaseRecord]:
        """The lease commit (possibly newer than ``current`` if a fetch was needed) and its record."""
        if _gitutil.rev_parse(repo.git, f"{current}^{{commit}}") is None:
            _gitutil.fetch_ref(repo.git, self._location, self._ref, self.timeout)
            current = _gitutil.rev_parse(repo.git, f"{self._ref}^{{commit}}") or current
        try:
            data = _gitutil.run_bytes(repo.git, "cat-file", "blob", f"{current}:{LEASE_FILE}")
            return current, LeaseRecord.from_json(data)
        except (GitError, ValueError) as exc:
            # Not a lease this reconciler can read: judged by its commit time, so that it is not
            # taken over while whoever wrote it may still be acting.
            stamp = float(_gitutil.run(repo.git, "show", "-s", "--format=%ct", current).strip())
            when = datetime.fromtimestamp(stamp, UTC)
            log.warning("unreadable lease record; treated as held", commit=current, error=str(exc))
            return current, LeaseRecord("(unreadable lease)", when, when, DEFAULT_DURATION)

    def _write_record(self, repo: git.Repo, record: LeaseRecord) -> str:
        """A new parentless commit holding ``record``."""
        data = record.to_json()
        blob = repo.odb.store(IStream(b"blob", len(data), io.BytesIO(data))).binsha
        entry = b"100644 " + LEASE_FILE.encode() + b"\0" + blob
        tree = repo.odb.store(IStream(b"tree", len(entry), io.BytesIO(entry))).binsha
        holder = record.holder or "nobody (released)"
        message = f"lease: {holder}\n"
        return _gitutil.run(repo.git, "commit-tree", tree.hex(), "-m", message, env=self._ident).strip()

    def _push(self, repo: git.Repo, commit: str, expected: str | None) -> str | None:
        return _gitutil.push_if_unchanged(repo.git, self._location, self._ref, commit, expected, self.timeout)

    def close(self) -> None:
        """Stop the persistent git processes of the private repository (the lease is kept)."""
        self._git.close()

    def __enter__(self) -> GitLease:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()
