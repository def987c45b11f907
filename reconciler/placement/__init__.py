"""Placement (pure): which workloads each compute pool admits, on which concrete GPUs (DESIGN.md 9-10)."""
