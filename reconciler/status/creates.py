"""Creates written ahead (pure): a cluster create is recorded on the status branch before it is sent,
and not sent again until the cluster is listed or its absence is confirmed.

A create is not idempotent, and its answer can be lost (a 503 after Palette acted, an answer that came
after the client gave up), while Palette's search index lags its store (a new cluster is not listed at
once). Planning from the listing alone would send the create again every pass until the index catches
up. So before a pass sends creates it commits ``reconciler.yaml`` with one intent per create (cluster
name, target, time, ``creates:``); an intent is resolved when its target's listing shows the cluster by
name. Until then no second create is sent for it: within :data:`INDEXING_DELAY` of the intent the
create waits; after it, a lookup decides (found: it exists, wait for the listing; absent: confirmed,
the create is sent once more, with a new intent). A create that Palette answered with the new
cluster's uid, or a lookup by name that found it, resolves the intent to that uid (:func:`answered`,
``uid:``): from then on the lookup is a direct read of that uid, not the search by name (which lags
as the listing does), so a cluster whose listing lags past the delay is never created twice; and
within the delay a listing that leaves such a cluster out is the index's lag, not a doubtful answer
(:func:`indexing`: the target is planned, only that create is held). A lost
delete needs nothing of this (the next pass sees the cluster ``Deleting``, or gone), nor does a lost
machine-pool update (the next pass reads the cloud config and sends only what differs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import yaml

from reconciler.status.render import RECONCILER_FILE, dump, parse_previous

INDEXING_DELAY = 60.0  # seconds: how long Palette's search may take to list a new cluster
CREATES = "creates"  # the key of reconciler.yaml

TargetKey = tuple[str, str | None]  # (Palette URL, project uid)


@dataclass(frozen=True, order=True)
class CreateIntent:
    """A create about to be sent (or sent, its answer unknown): which cluster, where, when."""

    url: str
    project_uid: str | None
    cluster: str  # the cluster's name (what Palette's name rule and the listing show)
    kind: str  # MLPlatform | ComputePool
    namespace: str
    name: str
    at: float  # unix seconds
    uid: str | None = None  # the cluster's uid, once a create's answer or a lookup gave it

    @property
    def target(self) -> TargetKey:
        return (self.url, self.project_uid)

    def to_json(self) -> dict[str, Any]:
        stamp = datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out: dict[str, Any] = {
            "cluster": self.cluster,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "url": self.url,
            "projectUid": self.project_uid,
            "at": stamp,
        }
        if self.uid is not None:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class Wanted:
    """A create one of this pass's plans asks for."""

    url: str
    project_uid: str | None
    cluster: str
    kind: str
    namespace: str
    name: str

    def intent(self, at: float) -> CreateIntent:
        return CreateIntent(
            self.url, self.project_uid, self.cluster, self.kind, self.namespace, self.name, at
        )


@dataclass(frozen=True)
class Gate:
    """What a pass does about its creates: those it sends (after recording ``intents``), those it holds
    back and why (by cluster name and target), and the intents to record."""

    send: tuple[Wanted, ...]
    held: Mapping[tuple[TargetKey, str], str]
    intents: tuple[CreateIntent, ...]


def _parse_at(value: Any) -> float | None:
    if isinstance(value, datetime):
        return value.replace(tzinfo=value.tzinfo or UTC).timestamp()
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def read_creates(files: Mapping[str, bytes]) -> tuple[CreateIntent, ...]:
    """The intents ``reconciler.yaml`` records (an unreadable entry is left out)."""
    data = files.get(RECONCILER_FILE)
    doc = parse_previous({RECONCILER_FILE: data}).get(RECONCILER_FILE) if data is not None else None
    items = doc.get(CREATES) if isinstance(doc, Mapping) else None
    out: list[CreateIntent] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping):
            continue
        fields = [item.get(k) for k in ("url", "cluster", "kind", "namespace", "name")]
        at = _parse_at(item.get("at"))
        project, uid = item.get("projectUid"), item.get("uid")
        if all(isinstance(f, str) and f for f in fields) and at is not None:
            url, cluster, kind, namespace, name = (str(f) for f in fields)
            found = uid if isinstance(uid, str) and uid else None
            project_uid = str(project) if project else None
            out.append(CreateIntent(url, project_uid, cluster, kind, namespace, name, at, found))
    return tuple(sorted(set(out)))


def render_creates(doc: dict[str, Any], intents: Iterable[CreateIntent]) -> dict[str, Any]:
    """``reconciler.yaml``'s document with ``creates`` set (left out when there is none)."""
    listed = [i.to_json() for i in sorted(intents)]
    out = {k: v for k, v in doc.items() if k != CREATES}
    if listed:
        out[CREATES] = listed
    return out


def with_creates(files: Mapping[str, bytes], intents: Iterable[CreateIntent]) -> dict[str, bytes]:
    """The status tree ``files`` with ``reconciler.yaml`` recording ``intents`` (all else as it is)."""
    data = files.get(RECONCILER_FILE)
    parsed = yaml.safe_load(data) if data else None
    doc = dict(parsed) if isinstance(parsed, Mapping) else {}
    return {**files, RECONCILER_FILE: dump(render_creates(doc, intents))}


def resolved(
    intents: Iterable[CreateIntent], listed: Mapping[TargetKey, Iterable[str]]
) -> list[CreateIntent]:
    """The intents still open: a target observed this pass (``listed``: its clusters' names) that lists
    the cluster resolves it; a target not observed keeps its intents."""
    names = {t: set(n) for t, n in listed.items()}
    return [i for i in intents if i.target not in names or i.cluster not in names[i.target]]


def answered(
    intents: Iterable[CreateIntent], uids: Mapping[tuple[str, str, str], str]
) -> tuple[CreateIntent, ...]:
    """The intents with the uid each create was answered with (``uids``: by kind, namespace, name)."""
    return tuple(
        sorted(
            replace(i, uid=uid) if (uid := uids.get((i.kind, i.namespace, i.name))) else i for i in intents
        )
    )


def indexing(
    intents: Iterable[CreateIntent], target: TargetKey, now: float, delay: float = INDEXING_DELAY
) -> set[str]:
    """The uids of the clusters ``target`` was asked to create less than ``delay`` ago (the create
    answered with them): Palette may not list them yet, so a listing without them is not doubtful."""
    return {i.uid for i in intents if i.uid is not None and i.target == target and now - i.at < delay}


# What a lookup of a recorded create found: the cluster's uid; True when it could not be asked (not
# confirmed absent, so not created); False when the cluster is confirmed absent.
Found = str | bool


def gate(
    intents: Iterable[CreateIntent],
    wanted: Iterable[Wanted],
    listed: Mapping[TargetKey, Iterable[str]],
    now: float,
    lookup: Callable[[CreateIntent], Found],
    delay: float = INDEXING_DELAY,
) -> Gate:
    """Which of the creates ``wanted`` are sent this pass. ``lookup(intent)``: the cluster read directly
    by the intent's uid when it has one, else searched by name (asked only for an intent older than
    ``delay``); a uid it finds is kept in the intent. An open intent that no plan wants any more is
    kept until ``delay`` has passed (the cluster may still be listed, and is then planned as any)."""
    open_ = {(i.target, i.cluster): i for i in resolved(intents, listed)}
    send: list[Wanted] = []
    held: dict[tuple[TargetKey, str], str] = {}
    kept: list[CreateIntent] = []
    for want in sorted(wanted, key=lambda w: (w.url, w.project_uid or "", w.cluster)):
        key = ((want.url, want.project_uid), want.cluster)
        intent = open_.pop(key, None)
        if intent is None:
            send.append(want)
            continue
        age = now - intent.at
        if age < delay:
            held[key] = _waiting(intent, age, delay)
            kept.append(intent)
        elif (found := lookup(intent)) is not False:
            intent = replace(intent, uid=found) if isinstance(found, str) else intent
            how = f"as {intent.uid}" if intent.uid else "by name"
            held[key] = f"cluster {want.cluster} exists (found {how}), not listed: it is not created again"
            kept.append(intent)
        else:
            send.append(want)  # absence confirmed: created once more
    kept.extend(i for i in open_.values() if now - i.at < delay)
    kept.extend(w.intent(now) for w in send)
    return Gate(tuple(send), held, tuple(sorted(kept)))


def _waiting(intent: CreateIntent, age: float, delay: float) -> str:
    if intent.uid is not None:
        return (
            f"cluster {intent.cluster} was created as {intent.uid} {age:.0f}s ago and Palette does not "
            "list it yet: it is not created again"
        )
    return (
        f"a create of cluster {intent.cluster} was sent {age:.0f}s ago and Palette does not list it "
        f"yet: no second create until it is listed or its absence is confirmed (after {delay:.0f}s)"
    )
