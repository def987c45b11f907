"""Time what the per-file status rule costs a pass: the inputs fingerprint of every platform
(``render.resource_inputs``) and the commit message of a pass that creates every one of them
(``changes.commit_message`` over the two status trees).

Usage: ``python bench/bench_status_inputs.py [--platforms 1000] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from reconciler.manifests import build_desired, parse_file
from reconciler.status.changes import commit_message
from reconciler.status.render import dump, observed_fields, resource_inputs

SAMPLE = Path(__file__).resolve().parent.parent / "sample-repo"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--platforms", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    files = {str(p.relative_to(SAMPLE)): p.read_bytes() for p in sorted(SAMPLE.rglob("*.yaml"))}
    base = yaml.safe_load(files["project-a/platforms/notebooks.yaml"])
    for i in range(args.platforms):
        doc = {**base, "metadata": {**base["metadata"], "name": f"p{i:05}"}}
        doc["spec"] = {**base["spec"], "edge": {"vip": f"10.20.{i // 250}.{i % 250 + 1}"}}
        files[f"project-a/platforms/p{i:05}.yaml"] = yaml.safe_dump(doc).encode()
    desired = build_desired([parse_file(p, b) for p, b in sorted(files.items())], "r1")
    keys = [(p.metadata.namespace, p.metadata.name) for p in desired.platforms()]

    best = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        inputs = {key: resource_inputs(desired, "MLPlatform", *key) for key in keys}
        best = min(best, time.perf_counter() - started)
    print(f"fingerprints of {len(keys)} platforms: {best * 1000:.1f} ms (best of {args.repeat})")

    after = {
        f"{ns}/mlplatforms/{name}.yaml": dump(
            {"kind": "MLPlatform", "status": {**observed_fields("r1", h, None), "phase": "Provisioning"}}
        )
        for (ns, name), h in inputs.items()
    }
    best = float("inf")
    for _ in range(args.repeat):
        started = time.perf_counter()
        message = commit_message({}, after)
        best = min(best, time.perf_counter() - started)
    print(f"commit message over {len(after)} new files: {best * 1000:.1f} ms, {len(message)} characters")


if __name__ == "__main__":
    main()
