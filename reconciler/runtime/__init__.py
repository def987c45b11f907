"""The running process: what keeps a reconciler the only writer of its config repository (leases:
git, Kubernetes, none).

The names below load on first use: the pipeline's pure stages (``reconciler.runtime.stages``) serve
offline commands too, which must not pay for the lease's logging and git stacks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.runtime.lease import Lease, LeaseKeeper, NoLease, default_identity

__all__ = ["Lease", "LeaseKeeper", "NoLease", "default_identity"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.lease"), name)
