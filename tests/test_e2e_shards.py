"""Shards with real processes and real git (docs/operations.md): two `reconciler run --namespaces`
on one config repository and one Palette (the emulator). Each holds its own lease, creates only its
namespace's clusters and writes only its status files; a shard never prunes another's clusters, even
when they are removed from git while their shard is down; the status branch keeps both shards' files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from reconciler.emulator.server import EmulatorServer
from tests._git_support import RemoteRepo, free_port, git, git_run
from tests._loop_support import passes, run_once, start_loop, stop_runs, wait_for

STATUS = "reconciler/status"


def _shard(
    remote: RemoteRepo, emulator: EmulatorServer, cache: Path, name: str, port: int
) -> subprocess.Popen[bytes]:
    """A shard's loop; its log goes to ``<cache>.log``."""
    shard = ("--namespaces", f"project-{name}", "--shard", name)
    return start_loop(remote, emulator.url, cache, port, *shard, log=Path(f"{cache}.log"))


def _has(remote: RemoteRepo, ref: str) -> bool:
    return git_run("rev-parse", "--verify", "--quiet", ref, cwd=remote.bare).returncode == 0


def _status_tree(remote: RemoteRepo) -> dict[str, str]:
    if not _has(remote, STATUS):
        return {}
    names = git("ls-tree", "-r", "--name-only", STATUS, cwd=remote.bare).split()
    return {name: git("show", f"{STATUS}:{name}", cwd=remote.bare) for name in names}


def _record(remote: RemoteRepo, shard: str) -> dict[str, Any]:
    text = _status_tree(remote).get(f"shards/{shard}.yaml")
    return yaml.safe_load(text) if text else {}


def _clusters(emulator: EmulatorServer, namespace: str) -> dict[str, str]:
    """uid -> name of the clusters of ``namespace`` that are not on their way out."""
    emulator.state.sweep()
    return {
        c.uid: c.name
        for c in list(emulator.state.clusters.values())
        if c.labels.get("palette.ai/namespace") == namespace and c.deleting_since is None
    }


def _events(output: bytes, event: str) -> set[str]:
    """The namespaces of the log lines ``event`` (JSON lines) of one process."""
    found = set()
    for line in output.decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            found.add(str(record.get("namespace")))
    return found


def _passed_at(log: Path, revision: str) -> bool:
    """True once the process logged a finished pass at ``revision`` that did not fail."""
    for line in log.read_bytes().decode(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(record, dict)
            and record.get("event") == "pass finished"
            and record.get("revision") == revision
            and record.get("outcome") in ("success", "skipped", "invalid")
        ):
            return True
    return False


def _stop(proc: subprocess.Popen[bytes], log: Path) -> bytes:
    stop_runs(proc)
    return log.read_bytes()


def test_two_shards_share_one_palette_and_one_status_branch_and_never_prune_each_other(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    platforms_b = sorted(p.name for p in (remote.work / "project-b" / "platforms").glob("*.yaml"))
    assert platforms_b, "the sample repository has project-b platforms"
    ports = {"a": free_port(), "b": free_port()}
    logs = {name: tmp_path / f"cache-{name}.log" for name in ports}
    procs = {name: _shard(remote, emulator, tmp_path / f"cache-{name}", name, ports[name]) for name in ports}
    outputs: dict[str, bytes] = {}
    try:
        head = remote.head()
        wait_for(
            lambda: all(_record(remote, s).get("revision") == head for s in ("a", "b")),
            90,
            "both shards report the head",
        )
        wait_for(
            lambda: _clusters(emulator, "project-a") and _clusters(emulator, "project-b"),
            60,
            "clusters of both namespaces",
        )
        # Each holds its own lease; nobody took the unsharded one.
        assert _has(remote, "refs/heads/reconciler/lease-a") and _has(remote, "refs/heads/reconciler/lease-b")
        assert not _has(remote, "refs/heads/reconciler/lease")
        tree = _status_tree(remote)
        assert "reconciler.yaml" not in tree
        assert any(p.startswith("project-a/mlplatforms/") for p in tree)
        assert any(p.startswith("project-b/mlplatforms/") for p in tree)

        # Shard b stops; project-b's platforms leave git. Shard a, alone, must not touch their clusters.
        outputs["b"] = _stop(procs["b"], logs["b"])
        clusters_b = _clusters(emulator, "project-b")
        files_b = {p: d for p, d in _status_tree(remote).items() if p.startswith("project-b/")}
        removed = remote.commit(
            {f"project-b/platforms/{name}": None for name in platforms_b}, "remove every project-b platform"
        )
        # Shard a's own status does not change (no commit is due): it has seen the removal once a pass
        # at that revision finished.
        wait_for(lambda: _passed_at(logs["a"], removed), 60, "a pass of shard a at the removal")
        finished = passes(ports["a"])
        wait_for(lambda: passes(ports["a"]) >= finished + 3, 60, "three more passes of shard a")
        assert _clusters(emulator, "project-b") == clusters_b, "shard a deleted a cluster of project-b"
        after = _status_tree(remote)
        assert {p: d for p, d in after.items() if p.startswith("project-b/")} == files_b
        assert {"shards/a.yaml", "shards/b.yaml"} <= set(after)
        assert [p for p in after if p.startswith("inventory/")], "the shared target's snapshot is kept"
        clusters_a = _clusters(emulator, "project-a")
        outputs["a"] = _stop(procs["a"], logs["a"])
    finally:
        for name, proc in procs.items():
            if name not in outputs:
                outputs[name] = _stop(proc, logs[name])

    assert _events(outputs["a"], "cluster created") == {"project-a"}
    assert _events(outputs["b"], "cluster created") == {"project-b"}
    assert not _events(outputs["a"], "cluster deleted")
    # Not even a blocked prune, a rejection or a status line of project-b's resources in shard a. (Its own
    # creates may race shard b's for a free host on the shared Palette project; Palette refuses one and its
    # message may name the other's cluster: that is not shard a acting on project-b.)
    for event in ("prune blocked", "platform rejected", "cluster deleted", "pool cluster deleted"):
        assert "project-b" not in _events(outputs["a"], event), event

    # Shard b comes back: it prunes its own orphans (under its own --max-deletions), nothing of a's.
    done = run_once(
        remote,
        tmp_path / "cache-b",
        "--palette",
        emulator.url,
        "--namespaces",
        "project-b",
        "--shard",
        "b",
        "--max-deletions",
        str(len(platforms_b)),
    )
    assert done.returncode == 0, done.stderr
    assert _events(done.stderr.encode() + done.stdout.encode(), "cluster deleted") == {"project-b"}
    # Its platforms' clusters are gone; its compute pools are still in git and keep theirs (whisper's is
    # the pool its workload provisions, there when b's passes reached it before it stopped).
    kept = set(_clusters(emulator, "project-b").values())
    assert {"project-b-shared-a100", "project-b-finetune-l40s"} <= kept
    assert kept <= {"project-b-shared-a100", "project-b-finetune-l40s", "project-b-whisper"}
    assert _clusters(emulator, "project-a") == clusters_a
    assert {"shards/a.yaml", "shards/b.yaml"} <= set(_status_tree(remote))

    # Readers of the whole branch see the shards' records as one: `status` names the revision, and
    # `plan --from-status` plans against both shards' targets without Palette or a key.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALETTE_")}
    shown = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "status", "--repo", str(remote.bare), "--format", "json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["revision"] == remote.head()
    planned = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "plan", "--repo", str(remote.bare), "--from-status",
         "--format", "json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert planned.returncode in (0, 1), planned.stderr
    entries = json.loads(planned.stdout)["platforms"]
    assert {p["name"] for p in entries if p["namespace"] == "project-a"} >= {"clearml-prod", "notebooks"}
    # project-b's platforms left git: what the snapshot still shows of their clusters is on its way out.
    assert all(p["action"] in ("delete", "unchanged") for p in entries if p["namespace"] == "project-b")


def test_namespaces_without_a_shard_name_is_a_usage_error_that_says_why(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    done = run_once(remote, tmp_path / "cache", "--namespaces", "project-a")
    assert done.returncode == 2
    assert "--namespaces needs --shard NAME" in done.stderr and "own lease" in done.stderr
    bad = run_once(remote, tmp_path / "cache", "--namespaces", "project-a", "--shard", "Shard_A")
    assert bad.returncode == 2 and "DNS-1123 label" in bad.stderr
    alone = run_once(remote, tmp_path / "cache", env={"RECONCILER_SHARD": "a"})
    assert alone.returncode == 2 and "--shard needs --namespaces" in alone.stderr
    assert not _has(remote, "refs/heads/reconciler/status")  # nothing was written
