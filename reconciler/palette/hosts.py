"""Incremental edge-host reads: what changed since the last read, plus a slow full sweep for removals.

Reading 10,000 hosts is 200 pages of ``/v1/dashboard/edgehosts/search``, 20 s of Palette's 10 requests/s;
doing it on every idle pass spends most of that budget. :class:`HostLister` keeps one target's host map
and on each :meth:`HostLister.list`:

1. reads the hosts whose ``metadata.lastModifiedTimestamp`` is at or after a cutoff (a ``date`` filter
   ``gte``, sorted ``lastModifiedTimestamp`` descending), usually one page;
2. advances a full listing (the *sweep*) by as many pages as its own budget has earned since the last
   call (``sweep_rate`` pages/s), starting a new sweep every ``full_every`` seconds; when a sweep ends,
   hosts it did not see (and no change read since it began mentions) are gone;
3. returns the complete current host list, sorted by name then uid.

Hosts are kept as the compact typed records the one reader of Palette's host JSON makes
(:func:`reconciler.edgehost.read_host`), translated as each page arrives; the page's JSON is dropped
right after, so 100,000 hosts cost their facts, not their search answers (about a sixth). A change
of a field nobody reads (a heartbeat's timestamp, an agent version) does not move :attr:`version`.

Why nothing is lost:
- The cutoff of the next read is the server's ``Date`` at the *start* of this read minus ``overlap``:
  a change made during or after a read has a timestamp at or after that moment, so the next read sees
  it whatever happened to paging meanwhile. (The largest timestamp seen would not do: a host changed
  early in a listing and skipped, then another changed later and read, would set the cutoff past the
  first.) ``overlap`` covers clock skew between Palette's front end and its database and equal
  timestamps; it costs re-reading the last few seconds' changes.
- Descending order means a host that changes during a read moves to the front: later pages repeat an
  item rather than skip one. Only a removal shifts items forward; when ``listmeta.count`` shrinks during
  a read, the cutoff is not advanced (the next read covers the same span again), and a sweep that saw
  the count shrink removes nothing.
- A copy read by the sweep never replaces a newer copy (a larger ``lastModifiedTimestamp``) in the map.

If Palette refuses the date filter or sort (a 400/422), the lister falls back to a full listing on every
call, as before, and says so once in the log.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.edgehost import HostFacts, read_host
from reconciler.logging import get_logger
from reconciler.palette.client import PaletteClient
from reconciler.palette.endpoints import edge_host_search_body
from reconciler.palette.errors import ClientError

log = get_logger(component="palette.hosts")

DEFAULT_FULL_EVERY = 600.0  # seconds between full sweeps (removals are noticed within this + a sweep)
DEFAULT_OVERLAP = 30.0  # seconds re-read before the last read's start
DEFAULT_SWEEP_RATE = 2.0  # sweep pages per second: a fifth of Palette's 10/s dashboard budget
MAX_SWEEP_CREDIT = 60.0  # seconds of sweep budget that may pile up between calls

Clock = Callable[[], float]


def format_time(seconds: float) -> str:
    """Epoch seconds as ``v1Time`` (RFC 3339, milliseconds, ``Z``), rounded down to the millisecond."""
    moment = datetime.fromtimestamp(int(seconds * 1000) / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(value: Any) -> float | None:
    """A ``v1Time`` string as epoch seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def changed_since_body(tags: Mapping[str, str] | None, since: float) -> dict[str, Any]:
    """Hosts (carrying ``tags``) modified at or after ``since``, newest first."""
    body = edge_host_search_body(tags)
    date_filter = {
        "property": "lastModifiedTimestamp",
        "type": "date",
        "condition": {
            "date": {
                "operator": "gte",
                "negation": False,
                "match": {"conjunction": "or", "values": [format_time(since)]},
            }
        },
    }
    groups = list(body["filter"].get("filterGroups") or [{"conjunction": "and", "filters": []}])
    first = dict(groups[0])
    first["filters"] = [*first.get("filters", []), date_filter]
    return {
        "filter": {"conjunction": "and", "filterGroups": [first, *groups[1:]]},
        "sort": [{"field": "lastModifiedTimestamp", "order": "desc"}],
    }


# One host as kept: its facts and its ``lastModifiedTimestamp`` (None when Palette gave none).
_Kept = tuple[HostFacts, float | None]


def _key(facts: HostFacts) -> str:
    """What a host is kept under: its uid; an answer whose uid is unreadable (a number, null, a path)
    under its name, so that it stays one quarantined host of its own (never placed) until a sweep
    reads it right, and its last good copy can be found by name (``host_answers.carry_readable``)."""
    return facts.uid or f"\0{facts.name}"


def _read(item: Any) -> _Kept | None:
    """A search item as kept; None for one that names nothing (neither a readable uid nor a name)."""
    facts = read_host(item)
    if facts is None or not (facts.uid or facts.name):
        return None
    meta = item.get("metadata")
    return facts, parse_time(meta.get("lastModifiedTimestamp")) if isinstance(meta, Mapping) else None


def _sort_key(facts: HostFacts) -> tuple[str, str]:
    return (facts.name, facts.uid)


@dataclass
class _Sweep:
    started: float
    token: str = ""
    seen: set[str] = field(default_factory=set)
    last_count: int | None = None
    shrank: bool = False


class HostLister:
    """One target's edge hosts, kept current with incremental reads. Not thread-safe: one per target,
    used by the pass that observes it."""

    def __init__(
        self,
        client: PaletteClient,
        *,
        tags: Mapping[str, str] | None = None,
        full_every: float = DEFAULT_FULL_EVERY,
        overlap: float = DEFAULT_OVERLAP,
        sweep_rate: float | None = DEFAULT_SWEEP_RATE,
        clock: Clock = time.monotonic,
    ) -> None:
        """``sweep_rate=None`` reads a due sweep whole in one call."""
        if full_every < 0 or overlap < 0 or (sweep_rate is not None and sweep_rate <= 0):
            raise ValueError("full_every and overlap must not be negative; sweep_rate must be positive")
        self._client = client
        self._tags = dict(tags or {})
        self.full_every = full_every
        self.overlap = overlap
        self.sweep_rate = sweep_rate
        self._clock = clock
        self._hosts: dict[str, _Kept] | None = None
        self._since: float | None = None  # cutoff of the next incremental read (server time)
        self._incremental = True
        self._sweep: _Sweep | None = None
        self._last_sweep_start = 0.0
        self._last_call: float | None = None
        self._credit = 0.0
        self._touched: set[str] = set()  # uids an incremental read mentioned since the sweep began
        self._listing: list[HostFacts] | None = None
        self._doubtful: set[str] = set()  # uids whose kept copy is unreadable: a sweep starts at once
        self.version = 0  # moves whenever the host map changes
        self.requests = 0  # search pages read, all told
        self.last_requests = 0  # search pages the last call read
        self.full_listings = 0  # full listings (or sweeps) completed

    def __repr__(self) -> str:
        known = len(self._hosts) if self._hosts is not None else None
        return f"HostLister(hosts={known}, requests={self.requests}, incremental={self._incremental})"

    @property
    def client(self) -> PaletteClient:
        return self._client

    @property
    def doubtful(self) -> set[str]:
        """Uids of hosts whose kept copy is unreadable (a sweep reads them again)."""
        return set(self._doubtful)

    @property
    def incremental(self) -> bool:
        """False once Palette refused the date filter: every call is then a full listing."""
        return self._incremental

    def list(self) -> list[HostFacts]:
        """Every current host (its facts), sorted by name then uid."""
        before = self.requests
        now = self._clock()
        if self._hosts is None or not self._incremental:
            self._list_all(now)
        else:
            self._read_changes()
            if self._incremental:
                self._advance_sweep(now)
            else:
                self._list_all(now)
        self._last_call = now
        self.last_requests = self.requests - before
        if self._listing is None:
            assert self._hosts is not None
            self._listing = sorted((facts for facts, _stamp in self._hosts.values()), key=_sort_key)
        return list(self._listing)

    # --- reads ---------------------------------------------------------------------------------------

    def _list_all(self, now: float) -> None:
        """A full listing in one go: the first call, or every call when incremental reads are refused."""
        seen: dict[str, _Kept] = {}
        started: float | None = None
        newest: float | None = None
        counts: list[int | None] = []
        for page in self._client.edge_host_pages(edge_host_search_body(self._tags)):
            self.requests += 1
            started = page.server_time if started is None else started
            counts.append(page.count)
            for item in page.items:
                read = _read(item)
                if read is None:
                    continue
                uid, stamp = _key(read[0]), read[1]
                newest = stamp if newest is None or (stamp is not None and stamp > newest) else newest
                kept = seen.get(uid)
                if kept is None or _newer_or_same(stamp, kept[1]):
                    seen[uid] = read
        shrank = _shrank(counts)
        previous = self._hosts or {}
        if shrank:  # a removal may have shifted a host past us: keep what we knew of the rest
            seen = {**{u: h for u, h in previous.items() if u not in seen}, **seen}
        if seen != previous or self._hosts is None:
            self._hosts = seen
            self._changed()
            self._doubtful = {u for u, (facts, _stamp) in seen.items() if facts.unreadable}
        self.full_listings += 1
        self._last_sweep_start = now
        self._sweep = None
        self._touched.clear()
        base = started if started is not None else newest
        if base is None:  # neither a Date nor timestamps: nothing to read changes by
            self._incremental = False
        elif not shrank:
            cutoff = base - self.overlap
            self._since = cutoff if self._since is None else max(self._since, cutoff)

    def _read_changes(self) -> None:
        """Merge the hosts modified since the cutoff; move the cutoff to this read's start."""
        assert self._hosts is not None
        if self._since is None:  # the first listing saw the count shrink: start over with a full one
            self._list_all(self._clock())
            return
        started: float | None = None
        counts: list[int | None] = []
        try:
            for page in self._client.edge_host_pages(changed_since_body(self._tags, self._since)):
                self.requests += 1
                started = page.server_time if started is None else started
                counts.append(page.count)
                for item in page.items:
                    read = _read(item)
                    if read is not None:
                        self._touched.add(_key(read[0]))
                        self._merge(read)
        except ClientError as exc:
            log.warning(
                "Palette refused the incremental host search; listing every host on each pass",
                status=exc.status,
                code=exc.code,
            )
            self._incremental = False
            return
        if started is not None and not _shrank(counts):
            self._since = max(self._since, started - self.overlap)

    def _advance_sweep(self, now: float) -> None:
        """Read the pages of the running full sweep that its budget allows; finish it when done."""
        if self.sweep_rate is not None and self._last_call is not None:
            cap = max(1.0, MAX_SWEEP_CREDIT * self.sweep_rate)
            self._credit = min(cap, self._credit + max(now - self._last_call, 0.0) * self.sweep_rate)
        due = now - self._last_sweep_start >= self.full_every
        if self._sweep is None and (due or self._doubtful):  # a bad copy is read again at once
            self._sweep = _Sweep(started=now)
            self._last_sweep_start = now
            self._touched.clear()
        sweep = self._sweep
        if sweep is None:
            return
        if self._doubtful:  # a bad copy is not kept for a whole sweep: at least a page every pass
            self._credit = max(self._credit, 1.0)
        body = edge_host_search_body(self._tags)
        while self.sweep_rate is None or self._credit >= 1.0:
            page = self._client.edge_host_page(body, sweep.token)
            self.requests += 1
            if self.sweep_rate is not None:
                self._credit -= 1.0
            if page.count is not None:
                if sweep.last_count is not None and page.count < sweep.last_count:
                    sweep.shrank = True
                sweep.last_count = page.count
            for item in page.items:
                read = _read(item)
                if read is not None:
                    sweep.seen.add(_key(read[0]))
                    self._merge(read)
            if not page.continue_token:
                self._finish_sweep(sweep)
                return
            sweep.token = page.continue_token

    def _finish_sweep(self, sweep: _Sweep) -> None:
        assert self._hosts is not None
        self._sweep = None
        self.full_listings += 1
        if sweep.shrank:
            return
        gone = [uid for uid in self._hosts if uid not in sweep.seen and uid not in self._touched]
        for uid in gone:
            del self._hosts[uid]
            self._doubtful.discard(uid)
        if gone:
            self._changed()

    def _merge(self, read: _Kept) -> None:
        """Keep ``read`` unless the copy kept is newer; same facts with a newer timestamp keep the
        timestamp only (the listing, and :attr:`version`, do not change)."""
        assert self._hosts is not None
        facts, stamp = read
        key = _key(facts)
        kept = self._hosts.get(key)
        if kept is not None and not _newer_or_same(stamp, kept[1]):
            return
        if kept is not None and kept[0] == facts:
            self._hosts[key] = (kept[0], stamp if stamp is not None else kept[1])
            return
        self._hosts[key] = read
        self._changed()
        if facts.unreadable:
            self._doubtful.add(key)
        else:
            self._doubtful.discard(key)

    def _changed(self) -> None:
        self.version += 1
        self._listing = None


def _newer_or_same(new: float | None, old: float | None) -> bool:
    """May a copy stamped ``new`` replace one stamped ``old``? Yes unless both have stamps and it is older."""
    return new is None or old is None or new >= old


def _shrank(counts: list[int | None]) -> bool:
    known = [c for c in counts if c is not None]
    return any(later < earlier for earlier, later in itertools.pairwise(known))
