#!/usr/bin/env python3
"""Cost of the status branch's inventory snapshots (reconciler/status/snapshot.py) on big inventories.

    python bench/bench_status_snapshot.py --hosts 10000

Prints, for a generated inventory (bench/gen_inventory.py): the size of the search items and of the
snapshot, the time to render it (what the controller pays when a target's inventory changed), and the
time to read it back and discover its machines (what ``plan --from-status`` pays per target).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen_inventory import generate

from reconciler.inventory import discover
from reconciler.status.render import RECONCILER_FILE, dump, reconciler_document
from reconciler.status.snapshot import read_snapshots, render_snapshot, target_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    hosts = generate(args.hosts, seed=1)["edgeHosts"]
    raw = len(json.dumps(hosts))
    renders, reads = [], []
    data = b""
    for _ in range(args.repeat):
        started = time.perf_counter()
        data = render_snapshot(hosts, [])
        renders.append(time.perf_counter() - started)
    url, project = "https://api.spectrocloud.com", "6514216503b1d1cd4f1bdc44"
    files = {
        RECONCILER_FILE: dump(reconciler_document("main", None, [(url, project)])),
        target_file(url, project): data,
    }
    for _ in range(args.repeat):
        started = time.perf_counter()
        snapshot = read_snapshots(files)[(url, project)]
        discover(snapshot.edge_hosts)
        reads.append(time.perf_counter() - started)
    print(f"hosts: {args.hosts}")
    print(f"search items: {raw / 1e6:.2f} MB of JSON; snapshot: {len(data) / 1e6:.2f} MB")
    print(f"render_snapshot: {min(renders) * 1000:.0f} ms (best of {args.repeat})")
    print(f"read_snapshots + discover: {min(reads) * 1000:.0f} ms (best of {args.repeat})")


if __name__ == "__main__":
    main()
