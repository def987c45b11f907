"""What the reconciler observes in Palette about the clusters it manages."""

from __future__ import annotations

from dataclasses import dataclass, field

MANAGED_BY_LABEL = "palette.ai/managed-by"
MANAGED_BY_VALUE = "reconciler"
NAMESPACE_LABEL = "palette.ai/namespace"
NAME_LABEL = "palette.ai/name"


def cluster_name(namespace: str, name: str) -> str:
    """Managed clusters are named ``<namespace>-<name>`` (DESIGN.md section 5)."""
    return f"{namespace}-{name}"


def managed_labels(namespace: str, name: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NAMESPACE_LABEL: namespace, NAME_LABEL: name}


@dataclass(frozen=True, slots=True)
class ManagedCluster:
    """An edge-native cluster carrying this reconciler's labels.

    ``state`` is Palette's ``status.state`` (Pending, Provisioning, Running, Deleting, ...).
    ``control_plane`` and ``workers`` are sorted edge host uids.
    """

    uid: str
    name: str
    namespace: str
    platform: str
    state: str
    cloud_config_uid: str | None = None
    control_plane: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()
    arch: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.platform)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(self.control_plane + self.workers))
