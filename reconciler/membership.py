"""Which hosts a managed cluster has: its own cloud config's word, cross-checked with the hosts' (pure).

Palette says a cluster's membership twice: each edge host names the cluster it is in use by
(``status.inUseClustersRef``), and the cluster's cloud config lists its machine pools with their hosts
(``GET /v1/cloudconfigs/edge-native/{configUid}``, ``spec.machinePoolConfig[].hosts[].hostUid``). This
module is the one reader of the cloud config's hosts and the one place the two are compared:

- when the cloud config is known, it is the membership (the cluster's own word: a host whose answer is
  unreadable is still a member);
- when the two disagree, or when a host whose answer is unreadable may belong to the cluster and its
  cloud config was not read, the cluster is *held*: planned exactly as it is (no scale, no replace),
  with the reason in its status, until the answers agree again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MEMBERSHIP_FIELDS = ("status.state", "status.inUseClustersRef", "status.inUseClusters", "status")


def config_hosts(config: Mapping[str, Any]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Host uids per machine pool of a cloud config, and the host names Palette reports for them."""
    spec = config.get("spec")
    pools = spec.get("machinePoolConfig") if isinstance(spec, Mapping) else None
    out: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for pool in pools if isinstance(pools, list) else []:
        if isinstance(pool, Mapping) and pool.get("name"):
            raw = pool.get("hosts")
            entries = raw if isinstance(raw, list) else []
            hosts = [h for h in entries if isinstance(h, Mapping) and h.get("hostUid")]
            out[str(pool["name"])] = [str(h["hostUid"]) for h in hosts]
            names.update({str(h["hostUid"]): str(h["hostName"]) for h in hosts if h.get("hostName")})
    return out, names


def config_roles(config: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(control plane, workers) host uids as the cloud config lists them; None when it lists no pool."""
    spec = config.get("spec")
    pools = spec.get("machinePoolConfig") if isinstance(spec, Mapping) else None
    if not isinstance(pools, list) or not pools:
        return None
    hosts, _names = config_hosts(config)
    control_plane: set[str] = set()
    workers: set[str] = set()
    for pool in pools:
        if isinstance(pool, Mapping) and pool.get("name"):
            role = control_plane if pool.get("isControlPlane") is True else workers
            role.update(hosts[str(pool["name"])])
    return tuple(sorted(control_plane)), tuple(sorted(workers - control_plane))


def doubtful_membership(unreadable: Iterable[tuple[str, Iterable[tuple[str, Any]]]]) -> list[str]:
    """Uids of hosts whose answer does not say which cluster they are in (an unreadable state or ref)."""
    return sorted(uid for uid, fields in unreadable if any(path in MEMBERSHIP_FIELDS for path, _ in fields))


def held_reason(
    name: str,
    from_refs: Iterable[str],
    from_config: Iterable[str] | None,
    unreadable_members: Iterable[str],
    doubtful: Iterable[str],
) -> str | None:
    """Why the cluster ``name`` must be held as it is this pass, or None when its membership is sure."""
    unreadable_members = sorted(unreadable_members)
    if unreadable_members:
        return (
            f"held as it is: Palette's answer for host {_listed(unreadable_members)} of cluster {name} is "
            "unreadable; nothing is added or removed until it reads right"
        )
    refs = set(from_refs)
    if from_config is None:
        doubtful = sorted(doubtful)
        if doubtful:
            return (
                f"held as it is: host {_listed(doubtful)} does not say which cluster it is in and the "
                f"cloud config of {name} was not read"
            )
        return None
    config = set(from_config)
    if config != refs:
        only_config, only_refs = sorted(config - refs), sorted(refs - config)
        parts = []
        if only_config:
            parts.append(f"its cloud config lists {_listed(only_config)}, whose answers do not name it")
        if only_refs:
            parts.append(f"{_listed(only_refs)} name it but its cloud config does not list them")
        return f"held as it is: the members of {name} disagree: " + "; ".join(parts)
    return None


def _listed(uids: list[str]) -> str:
    shown = ", ".join(uids[:3])
    return shown + (f" and {len(uids) - 3} more" if len(uids) > 3 else "")
