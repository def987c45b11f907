"""The revision fence (docs/reconciling.md): a pass applies and reports only the config branch's head.

Two instances on one bare repository (no lease: the fence alone must keep them from undoing each
other), a rollback of the branch, and a status branch that follows another config branch.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.emulator import EmulatorServer
from tests._e2e_support import clusters_by_name
from tests._git_support import RemoteRepo, free_port, git
from tests._loop_support import (
    fast_controller,
    passes,
    recorded,
    run_once,
    start_run,
    status_files,
    until_running,
    wait_for,
)

NOTEBOOKS = "project-a/platforms/notebooks.yaml"


def test_a_resync_on_an_older_revision_does_not_delete_what_a_newer_instance_created(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    notebooks = (remote.work / NOTEBOOKS).read_bytes()
    remote.commit({NOTEBOOKS: None}, "start without notebooks")
    old = fast_controller(remote, emulator.url, tmp_path / "old")
    until_running(old)

    added = remote.commit({NOTEBOOKS: notebooks}, "merge: notebooks platform")
    new = fast_controller(remote, emulator.url, tmp_path / "new")
    new.reconcile_once()
    created = clusters_by_name(emulator)["project-a-notebooks"]

    # The older instance's Palette resync still holds the revision without notebooks.
    resync = old.reconcile_once(check_source=False)
    old.close()
    new.close()

    assert clusters_by_name(emulator)["project-a-notebooks"] == created
    assert emulator.state.cluster_state(emulator.state.clusters[created[0]]) != "Deleting"
    assert resync.revision == added  # it fetched and planned again at the head
    assert recorded(remote)["revision"] == added  # never reported backwards
    assert "project-a/mlplatforms/notebooks.yaml" in status_files(remote)


def test_a_pass_never_reports_an_older_revision_after_a_newer_one(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    old = fast_controller(remote, emulator.url, tmp_path / "old")
    old.reconcile_once()  # creates the clusters: its statuses say Provisioning
    first = remote.head()
    doc = (remote.work / NOTEBOOKS).read_text().replace("count: 4", "count: 2")
    assert doc != (remote.work / NOTEBOOKS).read_text()
    newer = remote.commit({NOTEBOOKS: doc}, "notebooks: fewer GPUs")
    new = fast_controller(remote, emulator.url, tmp_path / "new")
    new.reconcile_once()
    # Once the clusters are Running, the old instance has something new to report.
    wait_for(
        lambda: all(emulator.state.cluster_state(c) == "Running" for c in emulator.state.clusters.values()),
        what="the clusters Running",
    )

    old.reconcile_once(check_source=False)
    old.close()
    new.close()

    reported = git(
        "log", "--format=%(trailers:key=Source-Revision,valueonly)", "reconciler/status", cwd=remote.bare
    ).split()
    assert reported[0] == newer  # newest first: nothing for the older revision after the newer one
    assert first not in reported[: reported.index(newer)]
    assert recorded(remote)["revision"] == newer


def test_a_rollback_of_the_config_branch_proceeds_and_says_so(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, emulator.url, tmp_path / "cache")
    until_running(ctl)
    good = remote.head()
    bad = remote.commit({NOTEBOOKS: None}, "remove notebooks (by mistake)")
    ctl.reconcile_once()
    assert recorded(remote)["revision"] == bad
    git("reset", "--quiet", "--hard", good, cwd=remote.work)
    git("push", "--quiet", "--force", "origin", "HEAD:refs/heads/main", cwd=remote.work)

    result = ctl.reconcile_once()
    ctl.close()

    assert result.revision == good
    message = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
    assert f"main moved back from {bad[:7]} to {good[:7]}" in message
    assert recorded(remote)["revision"] == good


def test_an_instance_of_another_branch_writes_nothing_unless_told_to_switch(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl = fast_controller(remote, emulator.url, tmp_path / "cache")
    until_running(ctl)
    ctl.close()
    git("branch", "staging", "main", cwd=remote.bare)
    tip = git("rev-parse", "reconciler/status", cwd=remote.bare)
    writes = emulator.stats.writes()

    refused = run_once(remote, tmp_path / "other", "--palette", emulator.url, "--branch", "staging")
    assert refused.returncode == 2, refused.stderr
    assert "follows the config branch 'main'" in refused.stderr
    assert "--switch-branch" in refused.stderr
    assert git("rev-parse", "reconciler/status", cwd=remote.bare) == tip
    assert emulator.stats.writes() == writes

    switched = run_once(
        remote, tmp_path / "other", "--palette", emulator.url, "--branch", "staging", "--switch-branch"
    )
    assert switched.returncode == 0, switched.stderr
    assert recorded(remote)["branch"] == "staging"


WHISPER = "project-b/workloads/whisper.yaml"


def test_two_run_processes_on_one_repository_never_delete_a_platform_in_git(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """Instance "slow" checks git every 45 s and resyncs Palette after 30 s on the revision it holds;
    instance "fast" checks git every second. Platforms are added between their checks and never
    removed, so any DELETE of a cluster is one of the instances undoing the other."""
    platforms = {
        path: (remote.work / path).read_bytes()
        for path in ["project-a/platforms/notebooks.yaml", "project-b/platforms/training.yaml"]
    }
    # Without the workload whisper too: its own pool, placed while notebooks is away, would take one of
    # notebooks' control-plane hosts, and notebooks, added back, the one training needs.
    remote.commit({**dict.fromkeys(platforms), WHISPER: None}, "start with three platforms")
    deletes: list[str] = []
    decide = emulator.faults.decide

    def record(method: str, path: str):  # type: ignore[no-untyped-def]
        if method == "DELETE":
            deletes.append(path)
        return decide(method, path)

    emulator.faults.decide = record  # type: ignore[method-assign]
    # --max-deletions 5: the prune guard must not be what saves the platforms here, the fence must.
    common = ("--palette", emulator.url, "--max-deletions", "5", "--lease", "none")
    slow_port, fast_port = free_port(), free_port()
    slow = start_run(
        remote, tmp_path / "slow", *common, "--interval", "45", "--listen", f"127.0.0.1:{slow_port}"
    )
    fast = start_run(
        remote, tmp_path / "fast", *common, "--interval", "1", "--listen", f"127.0.0.1:{fast_port}"
    )
    try:
        wait_for(lambda: passes(slow_port) >= 1 and passes(fast_port) >= 1, 120, "a first pass of each")
        for path, data in platforms.items():
            remote.commit({path: data}, f"add {path}")
            name = "-".join(path.split("/")[::2]).removesuffix(".yaml")  # project-a-notebooks
            wait_for(lambda name=name: name in clusters_by_name(emulator), 120, f"{name} created by fast")
        # The slow instance still holds the first revision: its next pass (the Palette resync, 30 s
        # after its first pass, before its next git check at 45 s) must not undo what fast created.
        before = passes(slow_port)
        wait_for(lambda: passes(slow_port) > before, 120, "the slow instance's next pass")
    finally:
        for proc in (slow, fast):
            proc.terminate()
        outs = [proc.communicate(timeout=60)[0].decode() for proc in (slow, fast)]
    assert deletes == [], outs
    names = clusters_by_name(emulator)
    assert {"project-a-notebooks", "project-b-training"} <= set(names)
    # The status branch's reported revision (each commit's Source-Revision) never went backwards.
    order = git("rev-list", "--reverse", "main", cwd=remote.bare).split()
    reported = git(
        "log",
        "--reverse",
        "--format=%(trailers:key=Source-Revision,valueonly)",
        "reconciler/status",
        cwd=remote.bare,
    ).split()
    positions = [order.index(r) for r in reported]
    assert positions == sorted(positions), reported
    assert reported[-1] == remote.head()
