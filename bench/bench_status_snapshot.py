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
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from gen_inventory import generate

import reconciler.status.snapshot as snapshot_module
from reconciler.edgehost import read_host
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
    renders, again, whole, parsed_yaml, parsed_json, reads = [], [], [], [], [], []
    data = b""
    facts = [read_host(h) for h in hosts]
    for n in range(args.repeat):
        snapshot_module._HOST_TEXTS.clear()  # a first render: every host encoded
        started = time.perf_counter()
        data = render_snapshot(facts, [])
        renders.append(time.perf_counter() - started)
        changed = list(facts)
        changed[n] = replace(
            changed[n], health="unhealthy" if changed[n].health != "unhealthy" else "healthy"
        )
        started = time.perf_counter()
        render_snapshot(changed, [])  # one host changed: only it is encoded again
        again.append(time.perf_counter() - started)
        started = time.perf_counter()  # the previous way: the whole document through json.dumps(indent=1)
        doc = json.loads(data)
        started = time.perf_counter()
        before = (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
        whole.append(time.perf_counter() - started)
        assert before == data, "the same bytes as before"
        started = time.perf_counter()
        yaml.load(data, Loader=yaml.CSafeLoader)
        parsed_yaml.append(time.perf_counter() - started)
        started = time.perf_counter()
        json.loads(data)
        parsed_json.append(time.perf_counter() - started)
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
    best = f"best of {args.repeat}"
    ms = {
        name: min(values) * 1000 for name, values in {"every": renders, "one": again, "whole": whole}.items()
    }
    print(f"render_snapshot, every host: {ms['every']:.0f} ms; one host changed: {ms['one']:.0f} ms")
    print(f"  previous render (json.dumps of the whole document): {ms['whole']:.0f} ms ({best})")
    by_yaml, by_json = min(parsed_yaml), min(parsed_json)
    print(f"parse the snapshot: CSafeLoader {by_yaml * 1000:.0f} ms, json.loads {by_json * 1000:.0f} ms")
    print(f"  ({by_yaml / by_json:.0f}x)")
    print(f"read_snapshots + discover: {min(reads) * 1000:.0f} ms (best of {args.repeat})")


if __name__ == "__main__":
    main()
