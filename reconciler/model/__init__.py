"""Pure data model: resource kinds, GPU family names, quantities, diagnostics, conditions."""

from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import DesiredState, Identity, Loaded, PlatformKey, SourceRef
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.observed import ManagedCluster
from reconciler.model.resources import (
    KINDS,
    PLURALS,
    AIWorkload,
    Compute,
    ComputePool,
    ComputeProfile,
    MLPlatform,
    Project,
    Resource,
    Settings,
    WorkloadProfile,
)

__all__ = [
    "KINDS",
    "PLURALS",
    "AIWorkload",
    "Compute",
    "ComputePool",
    "ComputeProfile",
    "DesiredState",
    "Diagnostic",
    "GpuFamily",
    "Identity",
    "Loaded",
    "MLPlatform",
    "ManagedCluster",
    "Phase",
    "PlatformKey",
    "Project",
    "Reason",
    "Resource",
    "Settings",
    "Severity",
    "SourceRef",
    "WorkloadProfile",
    "canonical_family",
]
