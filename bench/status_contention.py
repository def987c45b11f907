"""StatusStore against another writer of the status branch that pushes every ~100 ms.

The situation of the production issue ("0 status writes landed in 20 s, 4 give-ups"): a rival with
plain git (fetch the tip, commit its own file on it, push; on a lost race, again at once) and the
store writing a changed status tree once per pass. Prints, for the store: writes landed, writes given
up, races lost, and the median/95th percentile time of one ``write``; for the rival: pushes landed.

Usage: ``python bench/status_contention.py [--seconds 20] [--rival-every 0.1] [--pass-every 0.1]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from _support import git, git_run

from reconciler.source.status_store import StatusError, StatusStore

BRANCH = "reconciler/status"


def rival(remote: Path, work: Path, every: float, stop: threading.Event, landed: list[int]) -> None:
    git("init", "--quiet", "--bare", str(work), cwd=remote.parent)
    n = 0
    while not stop.is_set():
        n += 1
        blob = git("hash-object", "-w", "--stdin", cwd=work, input=f"n: {n}\n")
        for _ in range(20):
            git("fetch", "--quiet", str(remote), f"+refs/heads/{BRANCH}:refs/heads/{BRANCH}", cwd=work)
            # Another writer's file on top of the tip's (the store's own are kept): a race the store
            # may rebuild over; a rival replacing the store's files would be a conflict, not retried.
            listing = git("ls-tree", BRANCH, cwd=work).splitlines()
            entries = [e for e in listing if not e.endswith("\trival.yaml")]
            entries.append(f"100644 blob {blob}\trival.yaml")
            tree = git("mktree", cwd=work, input="\n".join(entries) + "\n")
            commit = git("commit-tree", tree, "-p", BRANCH, "-m", f"rival {n}", cwd=work)
            if (
                git_run("push", "--quiet", str(remote), f"{commit}:refs/heads/{BRANCH}", cwd=work).returncode
                == 0
            ):
                landed.append(n)
                break
        stop.wait(every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rival-every", type=float, default=0.1)
    parser.add_argument("--pass-every", type=float, default=0.1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="status-contention-") as tmp:
        root = Path(tmp)
        remote = root / "remote.git"
        git("init", "--quiet", "--bare", str(remote), cwd=root)
        store = StatusStore(str(remote), workdir=root / "store")
        store.write({"project-a/mlplatforms/p.yaml": b"n: 0\n"}, "seed", {})
        stop = threading.Event()
        theirs: list[int] = []
        thread = threading.Thread(target=rival, args=(remote, root / "rival", args.rival_every, stop, theirs))
        thread.start()
        landed, gave_up, took = 0, 0, []
        deadline = time.monotonic() + args.seconds
        n = 0
        try:
            while time.monotonic() < deadline:
                n += 1
                started = time.perf_counter()
                try:
                    store.write({"project-a/mlplatforms/p.yaml": f"n: {n}\n".encode()}, f"pass {n}", {})
                    landed += 1
                except StatusError:
                    gave_up += 1
                took.append(time.perf_counter() - started)
                time.sleep(args.pass_every)
        finally:
            stop.set()
            thread.join(60)
        p95 = statistics.quantiles(took, n=20)[-1] if len(took) >= 2 else took[0]
        print(
            f"{args.seconds:.0f} s, rival every {args.rival_every * 1000:.0f} ms, a pass every "
            f"{args.pass_every * 1000:.0f} ms"
        )
        print(f"store: {landed} writes landed, {gave_up} gave up, {store.conflict_count} races lost")
        print(f"store write: median {statistics.median(took) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
        print(f"rival: {len(theirs)} pushes landed")


if __name__ == "__main__":
    main()
