"""Which clusters the status branch says exist (pure): absence is confirmed before it is acted on.

A cluster that the last pass recorded (``status.cluster.uid`` of a platform or pool status file) and that
a cluster listing no longer shows is either gone or missing from an odd answer (an empty or partial
search). The observer looks such clusters up by uid before anything is created for them
(:func:`missing_clusters` says which to look up).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from reconciler.status.render import status_path

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def recorded_cluster(data: bytes | None) -> str | None:
    """The cluster uid a status file records, or None (no file, no cluster, unreadable)."""
    if data is None:
        return None
    try:
        doc = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError:
        return None
    return cluster_uid(doc)


def cluster_uid(doc: Any) -> str | None:
    """The cluster uid a parsed status document records, or None."""
    status = doc.get("status") if isinstance(doc, Mapping) else None
    cluster = status.get("cluster") if isinstance(status, Mapping) else None
    uid = cluster.get("uid") if isinstance(cluster, Mapping) else None
    return uid if isinstance(uid, str) and uid else None


def missing_clusters(
    files: Mapping[str, bytes],
    platforms: Iterable[tuple[str, str]],
    pools: Iterable[tuple[str, str]],
    listed: Iterable[str],
    docs: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, str]:
    """Cluster uid -> ``namespace/name`` of each routed platform and pool whose recorded cluster the
    listing does not show. ``docs``: the same files already parsed (then ``files`` is not parsed again:
    a thousand YAML files on every pass, idle ones included)."""
    shown = set(listed)
    out: dict[str, str] = {}
    for kind, keys in (("MLPlatform", platforms), ("ComputePool", pools)):
        for ns, name in sorted(keys):
            path = status_path(kind, ns, name)
            uid = recorded_cluster(files.get(path)) if docs is None else cluster_uid(docs.get(path))
            if uid is not None and uid not in shown:
                out[uid] = f"{ns}/{name}"
    return out


def listing_gap(found: Mapping[str, Any]) -> str | None:
    """The error of a pass whose cluster listing left out clusters that exist (``found``: uid -> who), or
    None when every missing one is really gone."""
    if not found:
        return None
    names = sorted(found.values())
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"the cluster search did not list {len(names)} managed cluster(s) that exist ({shown}): the "
        "listing is incomplete; nothing is created, scaled or deleted for this target this pass"
    )
