"""Placement (pure): which workloads each compute pool admits, on which concrete GPUs (docs/pools.md)."""
