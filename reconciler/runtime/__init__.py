"""The running process: what keeps a reconciler the only writer of its config repository (leases:
git, Kubernetes, none)."""

from reconciler.runtime.lease import Lease, LeaseKeeper, NoLease, default_identity

__all__ = ["Lease", "LeaseKeeper", "NoLease", "default_identity"]
