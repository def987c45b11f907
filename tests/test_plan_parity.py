"""Plan is apply (docs/reconciling.md): ``plan --from-status`` shows what ``run``'s next pass does.

One repository with platforms, a shared pool (whole-GPU and MIG workloads, a scaling policy that has
scaled it up once for a pending workload) and a dedicated pool, run by the in-process controller
against the emulator and a real git remote, with a pinned clock (the scale-up's demand has waited long
enough because the test moves the clock, not because it sleeps). After it settles:

- at the same revision, ``reconciler plan --from-status`` equals the controller's next pass entry for
  entry (actions, reasons, hosts, admissions, bound GPUs, MIG instances, sizes), and ``--changes-only``
  lists nothing: admitted workloads are ``admitted`` (not ``admit``), the scaled pool keeps its size;
- a follow-up commit planned before its merge equals what the pass after the merge does;
- and the stories of issue 24 in every mode: an unreadable file, a held deletion, replicas and a MIG
  re-layout, an invalid policy and its revert, a demand scale-up and a scaling hold at the policy's
  maximum (no Prometheus), a hold at its minimum (``--prometheus``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.emulator import EmulatorServer
from reconciler.palette.pacing import RateLimits
from reconciler.plan import merge
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult
from reconciler.runtime.pipeline import Pipeline
from tests._contract_support import run_cli
from tests._e2e_support import API_KEY, SAMPLE, PinnedClock, sample_files
from tests._git_support import RemoteRepo, git
from tests._loop_support import status_files
from tests._prometheus_support import FakePrometheus
from tests._scaling_support import policy_document, pool_workload

pytestmark = pytest.mark.e2e

POOL = "project-b/pools/shared-a100.yaml"
POOL_STATUS = "project-b/computepools/shared-a100.yaml"
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}

POLICY = policy_document(window="30s", cooldown="1h", abort="2h")


def config() -> dict[str, bytes | str | None]:
    """The sample without the platform ``training`` (its A100 hosts may join the pool), the shared pool
    MIG-enabled with a scaling policy, and one MIG workload beside the sample's whole-GPU ones (sweep is
    pending for want of GPUs: demand that scales the pool up)."""
    files: dict[str, bytes | str | None] = dict(sample_files())
    del files["project-b/platforms/training.yaml"]
    pool = yaml.safe_load((SAMPLE / POOL).read_text())
    pool["spec"]["resourceGroups"] = {"network-pool": "3"}
    pool["spec"]["mig"] = {"strategy": "mixed"}
    pool["spec"]["scalingPolicyRef"] = {"name": "gpu-autoscale"}
    files[POOL] = yaml.safe_dump(pool)
    files["project-b/scalingpolicy.yaml"] = yaml.safe_dump(POLICY)
    files["project-b/workloads/mig-serve.yaml"] = pool_workload("mig-serve", 2, "1g.10gb")
    return files


def entries(document: dict[str, Any]) -> dict[str, dict[tuple[str, str], Any]]:
    """A plan's entries by section and (namespace, name), as the plan JSON shows them. A pool's scaling
    block is left out: both decide without utilisation here, but their messages say why in their own
    words (``run``: no Prometheus configured; ``plan``: not asked without ``--prometheus``). The cases
    of a hold at a bound compare the blocks too."""
    out: dict[str, dict[tuple[str, str], Any]] = {}
    for section in ("platforms", "pools", "workloads"):
        found: dict[tuple[str, str], Any] = {}
        for entry in document[section]:
            shown = {k: v for k, v in entry.items() if k != "scaling"}
            found.setdefault((entry["namespace"], entry["name"]), []).append(shown)
        out[section] = found
    return out


def pass_document(result: PassResult) -> dict[str, Any]:
    document = merge(result.revision, result.plans, []).to_json()
    assert isinstance(document, dict)
    return document


def plan_document(remote: RemoteRepo, *args: str) -> dict[str, Any]:
    done = run_cli(
        "plan", "--repo", str(remote.bare), "--from-status", "--format", "json", *args, env=OFFLINE
    )
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(done.stdout)
    assert isinstance(document, dict)
    return document


def settled(ctl: Pipeline, remote: RemoteRepo, passes: int = 40) -> PassResult:
    """Passes until one commits nothing and every platform and pool is Running."""
    for _ in range(passes):
        result = ctl.reconcile_once()
        docs = status_files(remote)
        phases = [
            d["status"].get("phase")
            for p, d in docs.items()
            if "/mlplatforms/" in p or "/computepools/" in p
            if isinstance(d.get("status"), dict) and d["status"].get("pool") is None
        ]
        if result.commit is None and result.writes == 0 and phases and set(phases) == {"Running"}:
            return result
        time.sleep(0.3)
    raise AssertionError("the controller did not settle")


def started(emulator: EmulatorServer, tmp_path: Path) -> tuple[Pipeline, RemoteRepo, PinnedClock]:
    """The controller on :func:`config`, settled once: sweep waits for GPUs, the pool not yet grown."""
    (tmp_path / "git").mkdir()
    remote = RemoteRepo(tmp_path / "git")
    remote.commit(config(), "platforms, pools, workloads and a scaling policy")
    clock = PinnedClock()
    opts = ControllerOptions(
        repo=str(remote.bare),
        palette_url=emulator.url,
        cache_dir=tmp_path / "cache",
        palette_rate_limits=RateLimits.off(),
    )
    ctl = wiring.build(opts, environ={"PALETTE_API_KEY": API_KEY}, clock=clock)
    try:
        settled(ctl, remote)
    except BaseException:
        ctl.close()
        raise
    return ctl, remote, clock


@pytest.fixture
def steady(
    a100_mig_emulator: EmulatorServer, tmp_path: Path
) -> Iterator[tuple[Pipeline, RemoteRepo, PinnedClock]]:
    """The controller after it settled, the pool scaled up once for the pending workload."""
    ctl, remote, clock = started(a100_mig_emulator, tmp_path)
    try:
        before = status_files(remote)[POOL_STATUS]["status"]["allocation"]["gpus"]
        clock.at += 120  # sweep has waited longer than scaleUpDuration: the pool grows by one host
        settled(ctl, remote)
        after = status_files(remote)[POOL_STATUS]["status"]
        assert sum(after["allocation"]["gpus"].values()) > sum(before.values()), after
        assert after["scaling"]["lastAction"]["direction"] == "up", after["scaling"]
        yield ctl, remote, clock
    finally:
        ctl.close()


def test_a_demand_scale_up_is_planned_as_the_pass_carries_it_out(
    a100_mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    """sweep has waited longer than its scaleUpDuration: without Prometheus, ``plan`` decides the
    demand scale-up ``run`` carries out (the pool grows by a host, sweep is admitted on it)."""
    ctl, remote, clock = started(a100_mig_emulator, tmp_path)
    try:
        clock.at = time.time()  # the plan runs at the wall clock: sweep has waited as long in both
        planned = plan_document(remote)
        done = pass_document(ctl.reconcile_once())
    finally:
        ctl.close()

    decisions = [(p["name"], p["scaling"]["decision"], p["scaling"]["reason"]) for p in planned["pools"]]
    assert decisions == [(p["name"], p["scaling"]["decision"], p["scaling"]["reason"]) for p in done["pools"]]
    assert ("shared-a100", "up", "ScaledUp") in decisions, decisions
    assert entries(planned) == entries(done)
    (sweep,) = [w for w in planned["workloads"] if w["name"] == "sweep"]
    assert sweep["action"] == "admit", sweep


def test_plan_from_status_is_the_next_pass_entry_for_entry(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    ctl, remote, _clock = steady
    planned = plan_document(remote)
    changes = plan_document(remote, "--changes-only")
    done = ctl.reconcile_once()

    assert done.writes == 0 and done.commit is None
    assert planned["revision"] == done.revision == remote.head()
    assert entries(planned) == entries(pass_document(done))
    actions = {w["name"]: w["action"] for w in planned["workloads"]}
    assert actions["mig-serve"] == actions["batch-train"] == "admitted", actions
    assert any(w["mig"] for w in planned["workloads"]), "a MIG workload holds its instances"
    assert [changes[s] for s in ("platforms", "pools", "workloads")] == [[], [], []], changes


def test_a_pull_requests_plan_is_what_the_pass_after_its_merge_does(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    ctl, remote, _clock = steady
    notebooks = yaml.safe_load((remote.work / "project-a/platforms/notebooks.yaml").read_text())
    notebooks["spec"]["gpus"] = [{"family": "NVIDIA-H100", "count": 5}]
    sha = remote.commit(
        {
            "project-a/platforms/notebooks.yaml": yaml.safe_dump(notebooks),
            "project-b/workloads/notebook.yaml": None,
            "project-b/workloads/mig-batch.yaml": pool_workload("mig-batch", 1, "1g.10gb"),
            "project-b/workloads/eval.yaml": pool_workload("eval", 1),
        },
        "notebooks: 5 H100; an evaluation and a MIG batch instead of the notebook",
        push=False,
    )
    git("push", "-q", "origin", "HEAD:refs/heads/pull-request", cwd=remote.work)
    before_merge = plan_document(remote, "--rev", "pull-request")
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=remote.work)  # the merge
    merged = ctl.reconcile_once()

    assert merged.revision == before_merge["revision"] == sha
    assert entries(before_merge) == entries(pass_document(merged))
    actions = {e["name"]: e["action"] for s in ("platforms", "workloads") for e in before_merge[s]}
    assert (actions["notebooks"], actions["notebook"], actions["eval"]) == ("scale", "remove", "admit")
    # Whatever admission answers the MIG newcomer (a slice of the held layout, or a wait), both say it.
    assert actions["mig-batch"] in ("admit", "pending")
    body = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
    assert merged.commit is not None and "the pull request's plan said" not in body


def test_a_merge_whose_inventory_changed_since_its_plan_says_what_differs_in_the_status_commit(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock], a100_mig_emulator: EmulatorServer
) -> None:
    ctl, remote, _clock = steady
    notebooks = yaml.safe_load((remote.work / "project-a/platforms/notebooks.yaml").read_text())
    notebooks["spec"]["gpus"] = [{"family": "NVIDIA-H100", "count": 5}]
    remote.commit(
        {"project-a/platforms/notebooks.yaml": yaml.safe_dump(notebooks)}, "notebooks: 5", push=False
    )
    git("push", "-q", "origin", "HEAD:refs/heads/pull-request", cwd=remote.work)
    planned = plan_document(remote, "--rev", "pull-request")
    (entry,) = [p for p in planned["platforms"] if p["name"] == "notebooks"]
    running = status_files(remote)["project-a/mlplatforms/notebooks.yaml"]["status"]["allocation"]
    (joining,) = set(entry["workers"]) - set(running["workers"])
    a100_mig_emulator.state.patch_host(joining, {"healthState": "unhealthy"})  # taken away before the merge
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=remote.work)
    merged = ctl.reconcile_once()

    assert merged.commit is not None
    body = git("log", "-1", "--format=%B", "reconciler/status", cwd=remote.bare)
    assert "differs from the plan made against the inventory last recorded" in body
    (line,) = [ln for ln in body.splitlines() if ln.startswith("- project-a/notebooks: ")]
    assert joining in line.split("; the pass does")[0] and joining not in line.split("; the pass does")[1]


# --- every mode, and the stories of issue 24 -----------------------------------------------------------


def status_file(remote: RemoteRepo, path: str) -> bytes:
    data = git("show", f"reconciler/status:{path}", cwd=remote.bare)
    return data.encode()


def mode_document(remote: RemoteRepo, mode: list[str], *args: str, env: dict[str, str]) -> dict[str, Any]:
    done = run_cli("plan", "--repo", str(remote.bare), *mode, "--format", "json", *args, env=env)
    assert done.returncode in (0, 1), done.stderr
    document = json.loads(done.stdout)
    assert isinstance(document, dict)
    return document


def test_every_mode_plans_the_next_pass_and_a_settled_repository_to_nothing(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock], a100_mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    ctl, remote, _clock = steady
    (snapshot,) = [
        p
        for p in git("ls-tree", "--name-only", "-r", "reconciler/status", cwd=remote.bare).split()
        if p.startswith("inventory/")
    ]
    inventory = tmp_path / "inventory.json"
    inventory.write_bytes(status_file(remote, snapshot))
    modes = {
        "status": (["--from-status"], OFFLINE),
        "inventory": (["--inventory", str(inventory)], OFFLINE),
        "palette": (["--palette", a100_mig_emulator.url], {"PALETTE_API_KEY": API_KEY}),
    }
    planned = {kind: mode_document(remote, mode, env=env) for kind, (mode, env) in modes.items()}
    changes = {
        kind: mode_document(remote, mode, "--changes-only", env=env) for kind, (mode, env) in modes.items()
    }
    done = ctl.reconcile_once()

    assert done.writes == 0 and done.commit is None
    tip = git("rev-parse", "reconciler/status", cwd=remote.bare).strip()
    for kind, document in planned.items():
        assert document["basis"]["observation"] == kind
        assert document["basis"]["statusCommit"] == tip and document["basis"]["revision"] == remote.head()
        assert entries(document) == entries(pass_document(done)), kind
        assert [changes[kind][s] for s in ("platforms", "pools", "workloads")] == [[], [], []], kind
    first = run_cli("plan", "--repo", str(remote.bare), "--from-status", "--format", "markdown", env=OFFLINE)
    assert first.stdout.splitlines()[0].startswith(
        f"planned at {remote.head()[:7]} against status {tip[:7]} of "
    )


def test_no_status_plans_a_first_start_and_says_so(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    _ctl, remote, _clock = steady
    inventory_args = ["--inventory", str(SAMPLE / "inventory.json")]
    done = run_cli("plan", "--repo", str(remote.bare), *inventory_args, "--no-status", env=OFFLINE)
    assert done.returncode in (0, 1), done.stderr
    assert "--no-status" in done.stdout.splitlines()[0] and "first start" in done.stdout.splitlines()[0]
    document = mode_document(remote, [*inventory_args, "--no-status"], env=OFFLINE)
    assert document["basis"]["statusCommit"] is None
    assert any(w["action"] == "admit" for w in document["workloads"])  # nothing is known to be admitted


def test_a_stale_plan_exits_three(steady: tuple[Pipeline, RemoteRepo, PinnedClock]) -> None:
    ctl, remote, _clock = steady
    tip = git("rev-parse", "reconciler/status", cwd=remote.bare).strip()
    fresh = run_cli(
        "plan", "--repo", str(remote.bare), "--from-status", "--expect-status", tip[:7], env=OFFLINE
    )
    assert fresh.returncode == 0, fresh.stderr
    notebooks = yaml.safe_load((remote.work / "project-a/platforms/notebooks.yaml").read_text())
    notebooks["spec"]["gpus"] = [{"family": "NVIDIA-H100", "count": 5}]
    remote.commit({"project-a/platforms/notebooks.yaml": yaml.safe_dump(notebooks)}, "notebooks: 5")
    assert ctl.reconcile_once().commit is not None  # the status branch moves on
    stale = run_cli("plan", "--repo", str(remote.bare), "--from-status", "--expect-status", tip, env=OFFLINE)
    assert stale.returncode == 3 and "stale plan" in stale.stderr


def test_a_pull_request_breaking_a_running_platforms_file_is_planned_invalid_as_the_merge_does(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    ctl, remote, _clock = steady
    remote.commit({"project-a/platforms/notebooks.yaml": "kind: [\n"}, "break notebooks", push=False)
    git("push", "-q", "origin", "HEAD:refs/heads/pull-request", cwd=remote.work)
    before_merge = plan_document(remote, "--rev", "pull-request")
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=remote.work)
    merged = ctl.reconcile_once()

    (entry,) = [p for p in before_merge["platforms"] if p["name"] == "notebooks"]
    assert (entry["action"], entry["reason"]) == ("invalid", "InvalidSpec"), entry
    assert entry["workers"], "its cluster is kept"
    assert entries(before_merge) == entries(pass_document(merged))


def test_a_held_deletion_is_held_in_the_plan_as_in_the_merge_and_names_its_trailer(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    ctl, remote, _clock = steady
    remote.commit(
        {"project-a/platforms/notebooks.yaml": None, "project-b/workloads/batch-train.yaml": None},
        "remove notebooks and batch-train (no approval)",
        push=False,
    )
    git("push", "-q", "origin", "HEAD:refs/heads/pull-request", cwd=remote.work)
    args = ("--from-status", "--rev", "pull-request", "--changes-only")
    markdown = run_cli("plan", "--repo", str(remote.bare), *args, "--format", "markdown", env=OFFLINE)
    before_merge = plan_document(remote, "--rev", "pull-request")
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=remote.work)
    merged = ctl.reconcile_once()

    assert markdown.returncode == 1, markdown.stderr
    assert "No changes" not in markdown.stdout and "#### Held" in markdown.stdout
    assert "    Reconciler-Allow-Deletions: 2\n" in markdown.stdout
    reasons = {e["name"]: e["reason"] for s in ("platforms", "workloads") for e in before_merge[s]}
    assert reasons["notebooks"] == reasons["batch-train"] == "PruneBlocked"
    assert entries(before_merge) == entries(pass_document(merged))


def _merge_planned(
    ctl: Pipeline, remote: RemoteRepo, files: dict[str, str | None], message: str
) -> dict[str, Any]:
    """Plan ``files`` as a pull request, merge it, and check the plan is the merge's pass entry for entry
    (and its ``--changes-only`` keeps every entry the pass changes or holds); the plan."""
    remote.commit(files, message, push=False)
    git("push", "-q", "-f", "origin", "HEAD:refs/heads/pull-request", cwd=remote.work)
    before_merge = plan_document(remote, "--rev", "pull-request")
    changes = plan_document(remote, "--rev", "pull-request", "--changes-only")
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=remote.work)
    merged = ctl.reconcile_once()
    assert merged.revision == before_merge["revision"]
    assert entries(before_merge) == entries(pass_document(merged)), message
    kept = {(s, e["namespace"], e["name"]) for s in ("platforms", "pools", "workloads") for e in changes[s]}
    for section in ("pools",):
        for e in before_merge[section]:
            if "MIG layout:" in e["message"]:  # a re-layout is held back as a change, never dropped
                assert (section, e["namespace"], e["name"]) in kept, e
    return before_merge


def test_replicas_and_a_mig_relayout_are_planned_as_the_merge_does(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    ctl, remote, _clock = steady
    replicated = yaml.safe_load(pool_workload("fanout", 1))
    replicated["spec"]["replicas"] = 2
    planned = _merge_planned(
        ctl,
        remote,
        {
            "project-b/workloads/fanout.yaml": yaml.safe_dump(replicated),
            "project-b/workloads/mig-serve.yaml": pool_workload("mig-serve", 1, "3g.40gb"),
        },
        "fanout: 2 replicas; mig-serve on a bigger slice",
    )
    relaid = [e for e in planned["pools"] if "MIG layout:" in e["message"]]
    assert relaid, [e["message"] for e in planned["pools"]]  # the story does re-lay a GPU out
    serve = next(w for w in planned["workloads"] if w["name"] == "mig-serve")
    assert {m["profile"] for m in serve["mig"]} == {"3g.40gb"}, serve


def test_an_invalid_scaling_policy_and_its_revert_are_planned_as_the_merges_do(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock],
) -> None:
    ctl, remote, _clock = steady
    broken = {**POLICY, "spec": {**POLICY["spec"], "cooldownDuration": "soon"}}
    typo = _merge_planned(
        ctl, remote, {"project-b/scalingpolicy.yaml": yaml.safe_dump(broken)}, "a typo in the policy"
    )
    scaled = [e["scaling"] for e in typo["pools"] if e.get("scaling", {}).get("policy")]
    assert scaled, typo["pools"]  # the pool keeps its policy's record: not "no scaling policy"
    assert all(s["reason"] == "NotEvaluated" and "keeps its recorded size" in s["message"] for s in scaled)
    _merge_planned(ctl, remote, {"project-b/scalingpolicy.yaml": yaml.safe_dump(POLICY)}, "revert the typo")


def test_a_scaling_hold_at_its_bound_is_planned_and_held_in_every_mode_as_the_pass_does(
    steady: tuple[Pipeline, RemoteRepo, PinnedClock], a100_mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    """A workload waits for GPUs in a pool its policy may not grow (its maximum is the pool's size): the
    pass holds the pool at the bound (``ScalingLimited``); every mode of plan says so, scaling block
    included, and ``--changes-only`` keeps the held pool under "Held". Plans run at the wall clock, so
    the pass is pinned to it. (A ``--what-if`` file adds a workload that has not waited yet: no wish.)"""
    ctl, remote, clock = steady
    size = sum(status_files(remote)[POOL_STATUS]["status"]["allocation"]["gpus"].values())
    bounds = [{"family": "NVIDIA-A100", "minGPUCount": 8, "maxGPUCount": size}]
    bounded = {**POLICY, "spec": {**POLICY["spec"], "gpuResourceBounds": bounds}}
    clock.at = time.time() - 600  # past the last action's cooldown; the newcomer's wait starts here
    remote.commit(
        {
            "project-b/scalingpolicy.yaml": yaml.safe_dump(bounded),
            "project-b/workloads/overflow.yaml": pool_workload("overflow", 8),
        },
        "overflow: 8 A100s; the policy may not grow the pool further",
    )
    assert ctl.reconcile_once().commit is not None
    clock.at = time.time()  # the newcomer has waited longer than scaleUpDuration, in the pass and the plans
    inventory = tmp_path / "inventory.json"
    (snapshot,) = [
        p
        for p in git("ls-tree", "--name-only", "-r", "reconciler/status", cwd=remote.bare).split()
        if p.startswith("inventory/")
    ]
    inventory.write_bytes(status_file(remote, snapshot))
    modes = {
        "status": (["--from-status"], OFFLINE),
        "inventory": (["--inventory", str(inventory)], OFFLINE),
        "palette": (["--palette", a100_mig_emulator.url], {"PALETTE_API_KEY": API_KEY}),
    }
    planned = {kind: mode_document(remote, mode, env=env) for kind, (mode, env) in modes.items()}
    changes = {
        kind: mode_document(remote, mode, "--changes-only", env=env) for kind, (mode, env) in modes.items()
    }
    args = ("--from-status", "--changes-only", "--format", "markdown")
    markdown = run_cli("plan", "--repo", str(remote.bare), *args, env=OFFLINE)
    done = pass_document(ctl.reconcile_once())

    (pool,) = [p for p in done["pools"] if p["name"] == "shared-a100"]
    assert (pool["scaling"]["decision"], pool["scaling"]["reason"]) == ("hold", "ScalingLimited"), pool
    for kind, document in planned.items():
        assert entries(document) == entries(done), kind
        assert [p["scaling"] for p in document["pools"]] == [p["scaling"] for p in done["pools"]], kind
        assert "shared-a100" in {p["name"] for p in changes[kind]["pools"]}, (kind, changes[kind]["pools"])
    held = markdown.stdout.split("#### Held", 1)[1]
    assert "shared-a100" in held and "ScalingLimited" in held, markdown.stdout


def test_a_scaling_hold_at_its_minimum_is_planned_with_prometheus_as_the_pass_does(
    a100_mig_emulator: EmulatorServer, tmp_path: Path
) -> None:
    """An idle pool (5 % of its GPUs busy, nothing waiting) whose policy may not shrink it (its minimum is
    the pool's size): with the same Prometheus, ``run``'s pass and every mode of ``plan --prometheus``
    hold it at the minimum (``ScalingLimited``), and ``--changes-only`` keeps it."""
    (tmp_path / "git").mkdir()
    remote = RemoteRepo(tmp_path / "git")
    files = config()
    del files["project-b/workloads/sweep.yaml"]  # nothing waits: only utilisation speaks
    remote.commit(files, "an idle pool at its policy's minimum (8 A100s)")
    with FakePrometheus() as prometheus:
        prometheus.answers.values = {"": 5.0}  # every query: 5 %
        clock = PinnedClock(time.time())
        opts = ControllerOptions(
            repo=str(remote.bare),
            palette_url=a100_mig_emulator.url,
            cache_dir=tmp_path / "cache",
            palette_rate_limits=RateLimits.off(),
            prometheus_url=prometheus.url,
        )
        ctl = wiring.build(opts, environ={"PALETTE_API_KEY": API_KEY}, clock=clock)
        try:
            settled(ctl, remote)
            inventory = tmp_path / "inventory.json"
            (snapshot,) = [
                p
                for p in git("ls-tree", "--name-only", "-r", "reconciler/status", cwd=remote.bare).split()
                if p.startswith("inventory/")
            ]
            inventory.write_bytes(status_file(remote, snapshot))
            local = {**OFFLINE, "NO_PROXY": "127.0.0.1"}  # only the loopback Prometheus is reachable
            modes = {
                "status": (["--from-status"], local),
                "inventory": (["--inventory", str(inventory)], local),
                "palette": (["--palette", a100_mig_emulator.url], {"PALETTE_API_KEY": API_KEY}),
            }
            with_prometheus = ("--prometheus", prometheus.url)
            planned = {k: mode_document(remote, m, *with_prometheus, env=e) for k, (m, e) in modes.items()}
            changes = {
                k: mode_document(remote, m, *with_prometheus, "--changes-only", env=e)
                for k, (m, e) in modes.items()
            }
            clock.at = time.time()
            done = pass_document(ctl.reconcile_once())
        finally:
            ctl.close()

    (pool,) = [p for p in done["pools"] if p["name"] == "shared-a100"]
    assert (pool["scaling"]["decision"], pool["scaling"]["reason"]) == ("hold", "ScalingLimited"), pool
    assert "minimum" in pool["scaling"]["message"], pool
    for kind, document in planned.items():
        assert entries(document) == entries(done), kind
        assert [p["scaling"] for p in document["pools"]] == [p["scaling"] for p in done["pools"]], kind
        assert "shared-a100" in {p["name"] for p in changes[kind]["pools"]}, (kind, changes[kind]["pools"])
