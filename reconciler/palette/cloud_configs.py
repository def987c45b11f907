"""Reading managed clusters' cloud configs when some host answer is in doubt (I/O, through the client)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from reconciler.palette.errors import NotFoundError
from reconciler.snapshots import cluster_config_uid


class CloudConfigReader(Protocol):
    def get_cloud_config(self, config_uid: str) -> dict[str, Any]: ...


def read_cloud_configs(
    client: CloudConfigReader, clusters: Iterable[Mapping[str, Any]]
) -> dict[str, Mapping[str, Any]]:
    """Cluster uid -> cloud config of every managed cluster in ``clusters`` (one GET each). Read only when
    some host's answer was unreadable (:func:`doubtful_clusters`); a cluster whose config is gone (404) is
    left out, and stays held while the doubt lasts."""
    configs: dict[str, Mapping[str, Any]] = {}
    for cluster in clusters:
        metadata = cluster.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        labels, uid, config_uid = metadata.get("labels"), metadata.get("uid"), cluster_config_uid(cluster)
        managed = isinstance(labels, Mapping) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
        if not managed or not uid or not config_uid:
            continue
        try:
            configs[str(uid)] = client.get_cloud_config(config_uid)
        except NotFoundError:
            continue
    return configs
