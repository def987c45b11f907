"""Which host answers are believed across rounds (pure): an unreadable or doubtful answer of a cluster
member is replaced by its last readable copy (:func:`carry_readable`, :func:`doubtful_answers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reconciler.edgehost import HostFacts, HostItem, read_host


def carry_readable(
    current: Sequence[HostItem], doubtful: set[str], prior: Iterable[HostItem]
) -> tuple[list[HostItem], list[str]]:
    """The hosts of a listing with each ``doubtful`` (unreadable) host that was a cluster member in its
    last readable copy (``prior``: the last observation, or the status branch's snapshot) replaced by
    that copy, as invalid is not absent for manifests: a member's GPUs and cluster are what was last
    read right, never "fewer" or "free". A doubtful host that was free stays unreadable (never placed).
    Hosts are search items or the facts read from them. Returns the hosts and the uids carried."""
    if not doubtful:
        return list(current), []
    last: dict[str, HostItem] = {}
    by_name: dict[str, tuple[str, HostItem]] = {}  # for answers whose uid is unreadable
    for item in prior:
        facts = read_host(item)
        if facts is None or facts.unreadable or not facts.cluster_uid:
            continue
        by_name[facts.name] = (facts.uid, item)
        if facts.uid in doubtful:
            last[facts.uid] = item
    read = [read_host(item) for item in current]
    if not last and not (by_name and any(f is not None and not f.uid for f in read)):
        return list(current), []
    present = {f.uid for f in read if f is not None and f.uid}
    out: list[HostItem] = []
    carried: list[str] = []
    for item, facts in zip(current, read, strict=True):
        uid = facts.uid if facts is not None else ""
        found = last.get(uid) if uid else None
        if found is None and facts is not None and not uid and facts.name in by_name:
            uid, found = by_name[facts.name]  # the same host by name, its uid garbled this time
            found = None if uid in present or uid in carried else found
        if found is not None:
            out.append(found if isinstance(found, HostFacts) else dict(found))
            carried.append(uid)
        else:
            out.append(item)
    return out, sorted(carried)


def doubtful_answers(current: Sequence[HostItem], prior: Iterable[HostItem]) -> set[str]:
    """The uids of hosts whose answer reads but is not believed: a host that holds a cluster and now
    reports no GPUs where its last readable copy had some (``gpus: []`` after a driver reload is not
    "no GPUs"). Such a host is carried as its last copy (:func:`carry_readable`) and released at the
    first answer that agrees with it again."""
    suspects = {
        f.uid
        for f in map(read_host, current)
        if f is not None and f.uid and f.cluster_uid and not f.gpus and not f.unreadable
    }
    if not suspects:
        return set()
    out: set[str] = set()
    for item in prior:
        facts = read_host(item)
        if facts is not None and facts.uid in suspects and facts.gpus and not facts.unreadable:
            out.add(facts.uid)
    return out
