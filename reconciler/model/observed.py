"""What the reconciler observes in Palette about the clusters it manages."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

MANAGED_BY_LABEL = "palette.ai/managed-by"
MANAGED_BY_VALUE = "reconciler"
NAMESPACE_LABEL = "palette.ai/namespace"
NAME_LABEL = "palette.ai/name"


def cluster_name(namespace: str, name: str) -> str:
    """Managed clusters are named ``<namespace>-<name>`` (docs/palette.md)."""
    return f"{namespace}-{name}"


def managed_labels(namespace: str, name: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NAMESPACE_LABEL: namespace, NAME_LABEL: name}


class ClusterState(StrEnum):
    """Palette's ``status.state`` of a cluster. Values compare equal to Palette's strings; a state this
    reconciler does not know is read as UNKNOWN (it is neither Running nor on its way out)."""

    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    RUNNING = "Running"
    IMPORTING = "Importing"
    UPDATING = "Updating"
    DELETING = "Deleting"
    DELETED = "Deleted"
    FAILED = "Failed"
    ERROR = "Error"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, text: object) -> ClusterState:
        if isinstance(text, cls):
            return text
        return _FOLDED.get(str(text or "").strip().lower(), cls.UNKNOWN)


_FOLDED = {s.value.lower(): s for s in ClusterState}  # each state by its folded value


@dataclass(frozen=True, slots=True)
class ManagedCluster:
    """An edge-native cluster carrying this reconciler's labels.

    ``state`` is Palette's ``status.state`` as Palette spells it (shown in status files);
    :attr:`known_state` is the same as a :class:`ClusterState` for decisions.
    ``control_plane`` and ``workers`` are sorted edge host uids; ``arch`` is a canonical architecture.
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
    project_uid: str | None = None  # the Palette project it lives in, when known
    # Why its membership is in doubt this pass (reconciler.membership): planned exactly as it is.
    held: str | None = None

    @property
    def known_state(self) -> ClusterState:
        return ClusterState.parse(self.state)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.platform)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted(self.control_plane + self.workers))
