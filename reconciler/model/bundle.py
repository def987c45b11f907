"""The ``ProfileBundle`` kind (``spectrocloud.com/v1beta1``, docs/bundles.md).

A Profile Bundle is Palette cluster profiles and WorkloadProfiles deployed together. PaletteAI publishes no
YAML for it; the shape is this product's, with PaletteAI's names. Rules that span the document (each uid
at most once) or other documents (the WorkloadProfiles' types, who may use which bundle type) are in
:mod:`reconciler.manifests.bundle_rules`; rules that need Palette's catalogue of cluster profiles (their
types) are in :mod:`reconciler.bundles`, applied when a plan is made.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from reconciler.model.base import ClusterProfileRef, LocalRef, ObjectMeta, Strict

BUNDLE_API_VERSION = "spectrocloud.com/v1beta1"
BundleType = Literal["Infrastructure", "Application", "Fullstack"]

INFRASTRUCTURE = "Infrastructure"
APPLICATION = "Application"
FULLSTACK = "Fullstack"


class ProfileBundleSpec(Strict):
    type: BundleType = Field(
        description="Infrastructure: one infra (or full) cluster profile and add-ons, to build a pool's "
        "cluster; Application: add-ons and at least one Application or Model WorkloadProfile; Fullstack: "
        "both."
    )
    cluster_profiles: list[ClusterProfileRef] = Field(
        default_factory=list,
        description="Palette cluster profiles, each uid at most once; their types come from Palette.",
    )
    workload_profiles: list[LocalRef] = Field(
        default_factory=list, description="WorkloadProfiles of this namespace deployed with the bundle."
    )


class ProfileBundle(Strict):
    api_version: Literal["spectrocloud.com/v1beta1"]
    kind: Literal["ProfileBundle"]
    metadata: ObjectMeta
    spec: ProfileBundleSpec
