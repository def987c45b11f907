"""Shared fixtures: the end-to-end ones (bare remote of the sample repository, emulator on loopback)."""

pytest_plugins = ["tests._e2e_support"]
