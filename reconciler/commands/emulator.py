"""``reconciler emulator``: serve the Palette emulator seeded from an inventory snapshot."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from reconciler.emulator.faults import parse_rules
from reconciler.emulator.server import EmulatorServer
from reconciler.palette.pacing import RateLimits
from reconciler.snapshots import load_snapshot

API_KEY_ENV = "PALETTE_API_KEY"


def run(
    inventory: Path,
    host: str,
    port: int,
    api_key: str | None,
    provision_seconds: float,
    delete_seconds: float,
    faults: str | None,
    seed: int,
    rate_limits: str = "palette",
) -> int:
    """Serve until interrupted. Exit 2 on bad input (no key, unreadable snapshot, bad fault rules)."""
    key = api_key or os.environ.get(API_KEY_ENV)
    if not key:
        print(
            f"reconciler emulator: no API key; set {API_KEY_ENV} or pass --api-key (the key clients send)",
            file=sys.stderr,
        )
        return 2
    try:
        snapshot = load_snapshot(inventory)
    except (OSError, ValueError) as exc:
        print(f"reconciler emulator: cannot read {inventory}: {exc}", file=sys.stderr)
        return 2
    try:
        rules = parse_rules(faults)
    except ValueError as exc:
        print(f"reconciler emulator: {exc}", file=sys.stderr)
        return 2
    try:
        limits = RateLimits.parse(rate_limits)
    except ValueError as exc:
        print(f"reconciler emulator: --rate-limits: {exc}", file=sys.stderr)
        return 2
    if provision_seconds < 0 or delete_seconds < 0:
        print("reconciler emulator: durations must not be negative", file=sys.stderr)
        return 2
    server = EmulatorServer.from_snapshot(
        snapshot,
        key,
        provision_seconds=provision_seconds,
        delete_seconds=delete_seconds,
        faults=rules,
        seed=seed,
        host=host,
        port=port,
        rate_limits=limits,
    )
    try:
        server.start()
    except OSError as exc:
        print(f"reconciler emulator: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 2
    print(
        f"Palette emulator listening on {server.url} "
        f"({len(snapshot.edge_hosts)} edge hosts, {len(snapshot.clusters)} clusters, "
        f"rate limits {rate_limits}); Ctrl-C to stop",
        flush=True,
    )
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
