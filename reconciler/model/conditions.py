"""The stable vocabulary of condition reasons and phases (docs/status-branch.md)."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    PROVISIONED = "Provisioned"
    PROVISIONING = "Provisioning"
    SCALING = "Scaling"
    DELETING = "Deleting"
    GPU_LIMIT_EXCEEDED = "GPULimitExceeded"
    INSUFFICIENT_COMPUTE = "InsufficientCompute"
    INVALID_SPEC = "InvalidSpec"
    REFERENCE_NOT_FOUND = "ReferenceNotFound"
    UNSUPPORTED_MODE = "UnsupportedMode"
    SUSPENDED = "Suspended"
    PALETTE_UNAVAILABLE = "PaletteUnavailable"
    PALETTE_UNAUTHORIZED = "PaletteUnauthorized"
    PRUNE_BLOCKED = "PruneBlocked"
    REPLACE_BLOCKED = "ReplaceBlocked"
    # Pools and workloads (docs/pools.md)
    ADMITTED = "Admitted"
    POOL_CAPACITY_EXCEEDED = "PoolCapacityExceeded"
    POOL_DEDICATED = "PoolDedicated"
    POOL_NOT_READY = "PoolNotReady"
    NO_FITTING_LAYOUT = "NoFittingLayout"
    MIG_UNSUPPORTED = "MIGUnsupported"
    # Project GPU quotas (docs/environments.md)
    QUOTA_EXCEEDED = "QuotaExceeded"
    QUOTA_REACHED = "QuotaReached"


class Phase(StrEnum):
    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    RUNNING = "Running"
    REJECTED = "Rejected"
    INVALID = "Invalid"
    SUSPENDED = "Suspended"
    DELETING = "Deleting"
    DEGRADED = "Degraded"
