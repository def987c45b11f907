"""Benchmark of the git layer: GitSource sync/read and StatusStore writes on a large config repository.

Prints median wall-clock figures (milliseconds) for:
- ``git ls-remote`` alone (the floor of any pass) vs ``GitSource.sync()`` on an unchanged remote;
- the first sync (fetch) and ``read_parsed`` of every file, then a no-op read (all from the parse
  cache) and a one-file change (sync with fetch + read parsing one file);
- ``StatusStore.write`` of one status file per platform: first commit, no-op, one file changed.

Usage: ``python bench/git_source_status.py [--platforms 1000] [--repeat 7]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _support import git

from reconciler.manifests import parse_file
from reconciler.source import GitSource
from reconciler.source.status_store import StatusStore


def platform_doc(ns: str, i: int, gpus: int = 8) -> str:
    return (
        "apiVersion: palette.ai/v1alpha1\n"
        "kind: MLPlatform\n"
        f"metadata: {{name: platform-{i:04d}, namespace: {ns}}}\n"
        "spec:\n"
        "  computeProfileRef: {name: edge-compute-profile}\n"
        f"  gpus:\n    - family: NVIDIA-H100\n      count: {gpus}\n"
    )


def make_remote(root: Path, platforms: int) -> tuple[Path, Path]:
    bare, work = root / "remote.git", root / "work"
    git("init", "--quiet", "--bare", "-b", "main", str(bare), cwd=root)
    git("init", "--quiet", "-b", "main", str(work), cwd=root)
    for i in range(platforms):
        ns = f"project-{i % 10}"
        path = work / ns / "mlplatforms" / f"platform-{i:04d}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(platform_doc(ns, i))
    git("add", "--all", ".", cwd=work)
    git("commit", "--quiet", "-m", "generated", cwd=work)
    git("push", "--quiet", str(bare), "HEAD:refs/heads/main", cwd=work)
    return bare, work


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    return statistics.median(timed(fn) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--platforms", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-git-") as tmp:
        root = Path(tmp)
        bare, work = make_remote(root, args.platforms)
        print(f"config repository: {args.platforms} MLPlatform files")

        source = GitSource(str(bare), cache_dir=root / "cache", parse=parse_file)
        first_sync = timed(source.sync)
        head = source.sync()
        first_read = timed(lambda: source.read_parsed(head))
        ls_remote = median_ms(lambda: git("ls-remote", str(bare), "refs/heads/main", cwd=root), args.repeat)
        noop_sync = median_ms(source.sync, args.repeat)
        noop_pass = median_ms(lambda: source.read_parsed(source.sync()), args.repeat)
        print(f"  git ls-remote (subprocess)           {ls_remote:8.1f} ms")
        fetches = source.fetch_count
        ratio = noop_pass / ls_remote
        print(f"  GitSource.sync, unchanged remote     {noop_sync:8.1f} ms  (fetches so far: {fetches})")
        print(f"  sync + read_parsed, unchanged        {noop_pass:8.1f} ms  (ratio to ls-remote {ratio:.2f})")
        print(f"  first sync (fetch)                   {first_sync:8.1f} ms")
        print(f"  first read_parsed (parse all)        {first_read:8.1f} ms  ({source.parse_misses} parsed)")

        path = work / "project-3" / "mlplatforms" / "platform-0003.yaml"
        path.write_text(platform_doc("project-3", 3, gpus=16))
        git("commit", "--quiet", "-am", "scale one", cwd=work)
        git("push", "--quiet", str(bare), "HEAD:refs/heads/main", cwd=work)
        misses = source.parse_misses
        changed = timed(lambda: source.read_parsed(source.sync()))
        print(
            f"  one file changed: sync + read_parsed {changed:8.1f} ms  "
            f"(fetches {source.fetch_count}, parsed {source.parse_misses - misses})"
        )
        source.close()

        store = StatusStore(str(bare), workdir=root / "status")
        files = {
            f"project-{i % 10}/mlplatforms/platform-{i:04d}.yaml": b"status:\n  phase: Running\n  n: %d\n" % i
            for i in range(args.platforms)
        }
        first_write = timed(lambda: store.write(files, "first", {"Source-Revision": head}))
        noop_write = median_ms(lambda: store.write(files, "noop", {"Source-Revision": head}), args.repeat)
        pushes_after_noop = store.push_count
        counter = iter(range(10**6))

        def one_change() -> None:
            n = next(counter)
            files["project-0/mlplatforms/platform-0000.yaml"] = (
                f"status:\n  phase: Running\n  x: {n}\n".encode()
            )
            store.write(files, "one", {"Source-Revision": head})

        change_write = median_ms(one_change, args.repeat)
        print(f"status branch: {len(files)} files")
        print(f"  first write (orphan commit + push)   {first_write:8.1f} ms")
        commits = store.commit_count
        print(f"  no-op write (tree unchanged)         {noop_write:8.1f} ms  (pushes: {pushes_after_noop})")
        print(f"  one file changed (commit + push)     {change_write:8.1f} ms  (commits: {commits})")
        store.close()


if __name__ == "__main__":
    main()
