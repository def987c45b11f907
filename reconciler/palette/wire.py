"""Pydantic wire models of the Palette API subset the reconciler uses.

They are deliberately tolerant (``extra="allow"``, nearly everything optional): the real API adds fields
between releases, and the client only needs to know that an answer has the shape it relies on. The
client validates with these models and then hands on the original dictionaries, so nothing Palette sent
is lost. The swagger subset in ``tests/data/palette/`` stays the authority on shapes; the conformance
tests check both directions against it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Wire(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ObjectMeta(Wire):
    uid: str | None = None
    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ListMeta(Wire):
    continue_: str = Field(default="", alias="continue")
    count: int | None = None
    limit: int | None = None
    offset: int | None = None


class ObjectRef(Wire):
    name: str | None = None
    uid: str | None = None


class EdgeHostHealth(Wire):
    state: str | None = None
    message: str | None = None


class EdgeHostStatus(Wire):
    state: str | None = None
    health: EdgeHostHealth | None = None
    in_use_clusters_ref: list[ObjectRef] | None = Field(default=None, alias="inUseClustersRef")


class GpuDevice(Wire):
    vendor: str | None = None
    model: str | None = None
    gpu_count: int | None = Field(default=None, alias="gpuCount")
    memory: str | None = None


class Cpu(Wire):
    cores: int | None = None


class DeviceSpec(Wire):
    arch_type: str | None = Field(default=None, alias="archType")
    cpu: Cpu | None = None
    gpus: list[GpuDevice] | None = None


class EdgeHostSpec(Wire):
    device: DeviceSpec | None = None
    project_meta: ObjectRef | None = Field(default=None, alias="projectMeta")


class EdgeHost(Wire):
    """``v1EdgeHostsMetadata``: one item of the edge host search."""

    metadata: ObjectMeta
    spec: EdgeHostSpec | None = None
    status: EdgeHostStatus | None = None


class SearchPage(Wire):
    """One page of a search (``v1EdgeHostsSearchSummary``, ``v1SpectroClustersSummary``); items are
    validated one by one with their own models."""

    items: list[dict[str, Any]] | None = None
    listmeta: ListMeta | None = None


class ClusterStatus(Wire):
    state: str | None = None


class SpectroClusterSpec(Wire):
    cloud_type: str | None = Field(default=None, alias="cloudType")
    cloud_config_ref: ObjectRef | None = Field(default=None, alias="cloudConfigRef")


class SpectroCluster(Wire):
    """``v1SpectroCluster``: the answer of ``GET /v1/spectroclusters/{uid}``."""

    metadata: ObjectMeta
    spec: SpectroClusterSpec | None = None
    status: ClusterStatus | None = None


class CloudConfigMeta(Wire):
    cloud_type: str | None = Field(default=None, alias="cloudType")
    uid: str | None = None


class ClusterSpecSummary(Wire):
    cloud_config: CloudConfigMeta | None = Field(default=None, alias="cloudConfig")


class SpectroClusterSummary(Wire):
    """``v1SpectroClusterSummary``: one item of the cluster search."""

    metadata: ObjectMeta
    spec_summary: ClusterSpecSummary | None = Field(default=None, alias="specSummary")
    status: ClusterStatus | None = None


class Uid(Wire):
    uid: str


class EdgeNativeHost(Wire):
    host_uid: str = Field(alias="hostUid")


class EdgeNativeMachinePool(Wire):
    name: str
    is_control_plane: bool | None = Field(default=None, alias="isControlPlane")
    hosts: list[EdgeNativeHost] | None = None


class EdgeNativeCloudConfigSpec(Wire):
    machine_pool_config: list[EdgeNativeMachinePool] | None = Field(default=None, alias="machinePoolConfig")


class EdgeNativeCloudConfig(Wire):
    """``v1EdgeNativeCloudConfig``: machine pools with their hosts."""

    metadata: ObjectMeta | None = None
    spec: EdgeNativeCloudConfigSpec | None = None


class ClusterProfileList(Wire):
    """``v1SpectroClusterProfileList``: the profiles attached to a cluster (items kept as sent)."""

    profiles: list[dict[str, Any]]


class ClusterProfile(Wire):
    """``v1ClusterProfile`` (``GET /v1/clusterprofiles/{uid}``): its type is ``spec.published.type``
    (``infra``, ``add-on``, ``cluster`` for a full profile, ``system``)."""

    metadata: ObjectMeta | None = None
    spec: dict[str, Any] | None = None


class V1Error(Wire):
    """Palette's error body. ``code`` is usually a string, but a router-level error was seen with a number."""

    code: str | int | None = None
    message: str | None = None
    details: Any = None
    ref: str | None = None
