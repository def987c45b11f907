"""``reconciler plan --from-status`` end to end (docs/status-branch.md), with real git and the
installed command: a pull request planned against what the status branch says is deployed, with no
Palette and no key.

The status branch is built here with plain git commands in the shapes of section 6 (``reconciler.yaml``,
``inventory/<host>-<projectUid>.json``, one status file per resource), as the controller writes it.
Every command runs with no ``PALETTE_*`` variable and with proxies pointing at a closed port, so any
attempt to reach Palette would fail the command.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.model.observed import managed_labels
from reconciler.model.pools import pool_cluster_labels
from reconciler.plan_report import MARKDOWN_LIMIT
from reconciler.status.snapshot import render_snapshot, target_file
from tests._contract_support import (
    SAMPLE_INVENTORY,
    SAMPLE_REPO,
    ConfigRepo,
    _clean_env,
    git,
    make_config_repo,
    reconciler_bin,
    run_cli,
)
from tests._git_support import git_daemon
from tests._inventory_support import edge_host

ROOT = Path(__file__).resolve().parents[1]
URL = "https://api.spectrocloud.com"
PROJECT = "6514216503b1d1cd4f1bdc44"  # the sample Settings' defaultProjectID
STATUS = "reconciler/status"
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": ""}
NOTEBOOKS = Path("project-a/platforms/notebooks.yaml")


def plan(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("plan", *args, env=OFFLINE, timeout=300)


def deployed(
    config: Path, inventory: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Hosts and clusters of a Palette where every platform and pool of ``config`` runs as planned
    offline (clusters labelled as the reconciler labels them)."""
    result = run_cli("plan", "--repo", str(config), "--inventory", str(inventory), "--format", "json")
    assert result.returncode == 0, result.stderr
    placed = json.loads(result.stdout)
    hosts = json.loads(inventory.read_text())["edgeHosts"]
    by_uid = {h["metadata"]["uid"]: h for h in hosts}
    clusters = []
    entries = [(p, managed_labels(p["namespace"], p["name"])) for p in placed["platforms"]]
    entries += [
        (p, pool_cluster_labels(p["namespace"], p["name"], p["mode"])) for p in placed.get("pools", [])
    ]
    for p, labels in entries:
        uid = f"cluster-{p['namespace']}-{p['name']}"
        for host in p["controlPlane"] + p["workers"]:
            by_uid[host]["status"]["state"] = "in-use"
            by_uid[host]["status"]["inUseClustersRef"] = [{"uid": uid, "name": p["name"]}]
        clusters.append(
            {
                "metadata": {"uid": uid, "name": f"{p['namespace']}-{p['name']}", "labels": labels},
                "specSummary": {"cloudConfig": {"uid": f"cc-{uid}"}, "projectMeta": {"uid": PROJECT}},
                "status": {"state": "Running"},
            }
        )
    return hosts, clusters, placed


def sample_config(root: Path) -> Path:
    """The sample repository: platforms, pools and their workloads (admitted ones stay ``admitted``),
    without ``sweep``: it waits for GPUs, and a pending workload is a change ``--changes-only`` lists
    (only ``unchanged`` and ``admitted`` entries are left out), which these pull requests do not make."""
    config = root / "sample"
    shutil.copytree(SAMPLE_REPO, config)
    (config / "project-b" / "workloads" / "sweep.yaml").unlink()
    return config


def workload_files(config: Path, inventory: Path, revision: str) -> dict[str, bytes | str]:
    """The workloads' status files as the controller writes them once they are admitted as planned
    offline: each one's pool and the GPUs and MIG instances it holds (what the next pass keeps)."""
    from reconciler.runtime.preview import load_revision, preview
    from reconciler.runtime.preview_observe import SnapshotObserver, read_snapshot_file
    from reconciler.runtime.preview_source import read_revision_files
    from reconciler.status.pools import workload_document
    from reconciler.status.render import dump

    source = read_revision_files(str(config), None)
    desired = load_revision(source, source.sha)
    planned = preview(desired, SnapshotObserver(inventory, read_snapshot_file(inventory))).plan
    files: dict[str, bytes | str] = {}
    for w in planned.workloads:
        _phase, doc = workload_document(
            w,
            revision=revision,
            inputs="",
            outcome=None,
            attached=(),
            previous=None,
            now="2026-01-10T10:00:00Z",
        )
        files[f"{w.namespace}/aiworkloads/{w.name}.yaml"] = dump(doc)
    return files


def status_file(namespace: str, name: str, entry: dict[str, Any], revision: str) -> str:
    gpus = "".join(f"\n      {family}: {count}" for family, count in entry["gpus"].items()) or " {}"
    return (
        "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\n"
        f"metadata: {{namespace: {namespace}, name: {name}}}\n"
        f"status:\n  observedRevision: {revision}\n  phase: Running\n"
        "  conditions:\n    - {type: Ready, status: 'True', reason: Provisioned, message: running,"
        " lastTransitionTime: '2026-01-10T10:00:00Z'}\n"
        f"  cluster: {{uid: cluster-{namespace}-{name}, name: {namespace}-{name}, state: Running}}\n"
        f"  allocation:\n    controlPlane: {json.dumps(entry['controlPlane'])}\n"
        f"    workers: {json.dumps(entry['workers'])}\n    gpus:{gpus}\n"
    )


def write_status_branch(repo: ConfigRepo, files: dict[str, bytes | str], branch: str = STATUS) -> str:
    """Commit ``files`` as the whole tree of the orphan ``branch`` and push it; return its sha."""
    work = repo.work.parent / "status-work"
    shutil.rmtree(work, ignore_errors=True)
    git("init", "-q", "-b", branch, str(work))
    for rel, content in files.items():
        path = work / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    git("add", "-A", ".", cwd=work)
    git("commit", "-q", "-m", "5 created", "-m", f"Source-Revision: {repo.head()}", cwd=work)
    git("push", "-q", "--force", str(repo.bare), f"HEAD:refs/heads/{branch}", cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


def root_file(revision: str, targets: list[tuple[str, str | None]]) -> str:
    lines = [f"branch: main\nrevision: {revision}\ntargets:"]
    lines += [f"  - {{url: '{url}', projectUid: {json.dumps(project)}}}" for url, project in targets]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def deployed_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[ConfigRepo, dict[str, Any], str]:
    """The sample config on main, deployed as planned; the status branch records it; a pull-request
    branch ``more-gpus`` raises project-a/notebooks from 4 to 6 H100 GPUs."""
    root = tmp_path_factory.mktemp("from-status")
    repo = make_config_repo(root, source=sample_config(root))
    hosts, clusters, placed = deployed(repo.work, SAMPLE_INVENTORY)
    main = repo.head()
    files: dict[str, bytes | str] = {
        "reconciler.yaml": root_file(main, [(URL, PROJECT)]),
        target_file(URL, PROJECT): render_snapshot(hosts, clusters),
    }
    for p in placed["platforms"]:
        files[f"{p['namespace']}/mlplatforms/{p['name']}.yaml"] = status_file(
            p["namespace"], p["name"], p, main
        )
    files.update(workload_files(repo.work, SAMPLE_INVENTORY, main))  # admitted as planned
    write_status_branch(repo, files)
    git("checkout", "-q", "-b", "more-gpus", cwd=repo.work)
    path = repo.work / NOTEBOOKS
    path.write_text(path.read_text().replace("count: 4", "count: 6"))
    git("commit", "-q", "-am", "notebooks: 6 H100", cwd=repo.work)
    git("push", "-q", "origin", "more-gpus", cwd=repo.work)
    git("checkout", "-q", "main", cwd=repo.work)
    return repo, placed, main


def _rows(markdown: str) -> list[str]:
    """The detail rows of a plan comment (``| action | `namespace/name` | ...``)."""
    return [line for line in markdown.splitlines() if re.match(r"\| [a-z]+ \| `[^`/]+/[^`]+` \|", line)]


def test_pull_request_raising_gpus_shows_exactly_that_one_scale(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str],
) -> None:
    repo, placed, _ = deployed_repo
    result = plan(
        "--repo",
        str(repo.bare),
        "--rev",
        "more-gpus",
        "--from-status",
        "--changes-only",
        "--format",
        "markdown",
    )
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert len(rows) == 1, result.stdout
    assert rows[0].startswith("| scale | `project-a/notebooks` | ")
    assert "| Platforms | 1 |" in result.stdout and "| | scale |" in result.stdout
    assert "Unchanged entries are left out" in result.stdout
    names = {
        h["metadata"]["uid"]: h["metadata"]["name"]
        for h in json.loads(SAMPLE_INVENTORY.read_text())["edgeHosts"]
    }
    control_plane = next(p for p in placed["platforms"] if p["name"] == "notebooks")["controlPlane"]
    for uid in control_plane:  # host names beside uids, from the recorded inventory
        assert f"{names[uid]} (`{uid}`)" in rows[0]


def test_json_variant_lists_only_the_change_and_keeps_every_list(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str],
) -> None:
    repo, placed, _ = deployed_repo
    head = git("--git-dir", str(repo.bare), "rev-parse", "refs/heads/more-gpus")
    result = plan(
        "--repo", str(repo.bare), "--rev", head, "--from-status", "--changes-only", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["revision"] == head
    assert set(doc) >= {"revision", "platforms", "diagnostics"}
    assert [(p["namespace"], p["name"], p["action"]) for p in doc["platforms"]] == [
        ("project-a", "notebooks", "scale")
    ]
    scaled = doc["platforms"][0]
    assert sum(scaled["gpus"].values()) >= 6 and scaled["reason"] == "Scaling"
    before = next(p for p in placed["platforms"] if p["name"] == "notebooks")
    assert set(before["workers"]) & set(scaled["workers"]), "scaled in place: the old workers stay"
    for key in ("pools", "workloads"):
        if key in doc:
            assert isinstance(doc[key], list)
            assert not [e for e in doc[key] if e["action"] in ("unchanged", "admitted")]


def test_without_changes_only_every_entry_says_what_changes_against_the_deployed_state(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str],
) -> None:
    repo, placed, _ = deployed_repo
    result = plan("--repo", str(repo.bare), "--rev", "more-gpus", "--from-status", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    actions = {p["name"]: p["action"] for p in doc["platforms"]}
    assert actions == {
        p["name"]: "scale" if p["name"] == "notebooks" else "unchanged" for p in placed["platforms"]
    }
    assert placed["pools"], "the sample's pools are deployed too"
    assert {p["name"]: p["action"] for p in doc["pools"]} == {p["name"]: "unchanged" for p in placed["pools"]}
    # Recorded admissions are kept: every workload the status branch says runs is `admitted`, not `admit`.
    assert {w["name"]: w["action"] for w in doc["workloads"]} == {
        w["name"]: "admitted" for w in placed["workloads"]
    }


def test_default_revision_is_the_config_branch_head_and_nothing_changes(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str],
) -> None:
    repo, _, main = deployed_repo
    result = plan("--repo", str(repo.bare), "--from-status", "--changes-only", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["revision"] == main and doc["platforms"] == []
    text = plan("--repo", str(repo.bare), "--from-status", "--changes-only", "--format", "text")
    assert text.returncode == 0 and "No changes" in text.stdout
    other = plan("--repo", str(repo.bare), "--from-status", "--branch", "more-gpus", "--format", "json")
    assert json.loads(other.stdout)["revision"] == git("--git-dir", str(repo.bare), "rev-parse", "more-gpus")


def test_a_ci_checkout_reads_the_status_branch_it_fetched(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str], tmp_path: Path
) -> None:
    """As the examples do: clone, fetch the status branch, plan the pull request's head sha."""
    repo, _, _ = deployed_repo
    clone = tmp_path / "checkout"
    git("clone", "-q", str(repo.bare), str(clone))
    git("fetch", "-q", "--no-tags", "origin", f"{STATUS}:{STATUS}", cwd=clone)
    head = git("rev-parse", "origin/more-gpus", cwd=clone)
    result = run_cli(
        "plan",
        "--repo",
        ".",
        "--rev",
        head,
        "--from-status",
        "--changes-only",
        "--format",
        "markdown",
        env=OFFLINE,
        cwd=clone,
    )
    assert result.returncode == 0, result.stderr
    assert [row.split("|")[1].strip() for row in _rows(result.stdout)] == ["scale"]


def test_a_rejected_change_exits_one(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str], tmp_path: Path
) -> None:
    repo, _, _ = deployed_repo
    clone = tmp_path / "pr"
    git("clone", "-q", str(repo.bare), str(clone))
    path = clone / NOTEBOOKS
    path.write_text(path.read_text().replace("count: 4", "count: 40"))
    git("commit", "-q", "-am", "too many", cwd=clone)
    head = git("rev-parse", "HEAD", cwd=clone)
    result = plan("--repo", str(clone), "--rev", head, "--from-status", "--changes-only", "--format", "json")
    assert result.returncode == 1, result.stderr
    [entry] = json.loads(result.stdout)["platforms"]
    assert (entry["name"], entry["action"], entry["reason"]) == ("notebooks", "rejected", "GPULimitExceeded")


def test_no_status_branch_is_exit_two_with_a_clear_message(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path)
    result = plan("--repo", str(repo.bare), "--from-status", "--format", "markdown")
    assert result.returncode == 2
    assert "no status branch 'reconciler/status'" in result.stderr and result.stdout == ""
    named = plan("--repo", str(repo.bare), "--from-status", "--status-branch", "elsewhere")
    assert named.returncode == 2 and "no status branch 'elsewhere'" in named.stderr


def test_missing_snapshots_are_exit_two_naming_the_target_and_file(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path)
    main = repo.head()
    write_status_branch(repo, {"reconciler.yaml": root_file(main, [(URL, PROJECT)])})
    result = plan("--repo", str(repo.bare), "--from-status")
    assert result.returncode == 2
    assert target_file(URL, PROJECT) in result.stderr and "no observed inventory" in result.stderr
    write_status_branch(repo, {"project-a/mlplatforms/notebooks.yaml": "status: {}\n"})
    result = plan("--repo", str(repo.bare), "--from-status")
    assert result.returncode == 2 and "reconciler.yaml is missing" in result.stderr


def test_a_target_routed_but_never_observed_is_exit_two(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path, source=sample_config(tmp_path))
    hosts, clusters, _ = deployed(repo.work, SAMPLE_INVENTORY)
    other = "http://127.0.0.1:8080"
    write_status_branch(
        repo,
        {
            "reconciler.yaml": root_file(repo.head(), [(other, None)]),
            target_file(other, None): render_snapshot(hosts, clusters),
        },
    )
    result = plan("--repo", str(repo.bare), "--from-status")
    assert result.returncode == 2 and target_file(URL, PROJECT) in result.stderr


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--from-status", "--inventory", str(SAMPLE_INVENTORY)], id="status-and-inventory"),
        pytest.param(["--from-status", "--palette", "http://127.0.0.1:9"], id="status-and-palette"),
    ],
)
def test_sources_are_exclusive_and_status_flags_need_from_status(extra: list[str]) -> None:
    result = plan("--repo", str(SAMPLE_REPO), *extra)
    assert result.returncode == 2 and result.stderr.startswith("error: ")


def test_changes_only_applies_to_every_format_offline_too() -> None:
    """Offline (--inventory, nothing deployed) every platform is a create: nothing is left out."""
    for fmt in ("json", "markdown", "text"):
        full = plan("--repo", str(SAMPLE_REPO), "--inventory", str(SAMPLE_INVENTORY), "--format", fmt)
        changes = plan(
            "--repo",
            str(SAMPLE_REPO),
            "--inventory",
            str(SAMPLE_INVENTORY),
            "--format",
            fmt,
            "--changes-only",
        )
        assert full.returncode == changes.returncode == 0
        if fmt == "json":
            assert json.loads(full.stdout) == json.loads(changes.stdout)


def test_markdown_of_a_thousand_platforms_fits_one_comment(tmp_path: Path) -> None:
    """bench/gen_config_tree.py writes 1,000 platforms, bench/gen_inventory.py an inventory for them."""
    config = tmp_path / "config"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gen_config_tree.py"), str(config), "--documents", "1040"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert len(list(config.glob("*/platforms/*.yaml"))) == 1000
    inventory = tmp_path / "inventory.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "gen_inventory.py"),
            "--hosts",
            "2500",
            "--out",
            str(inventory),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    repo = make_config_repo(tmp_path / "git", source=config)
    hosts = json.loads(inventory.read_text())["edgeHosts"]
    write_status_branch(
        repo,
        {
            "reconciler.yaml": root_file(repo.head(), [(URL, PROJECT)]),
            target_file(URL, PROJECT): render_snapshot(hosts, []),
        },
    )
    for extra in ([], ["--changes-only"]):
        result = plan("--repo", str(repo.bare), "--from-status", "--format", "markdown", *extra)
        assert result.returncode in (0, 1), result.stderr
        text = result.stdout
        assert len(text) <= MARKDOWN_LIMIT
        summary = next(line for line in text.splitlines() if line.startswith("| Platforms |"))
        assert sum(int(cell) for cell in summary.strip("|").split("|")[1:]) == 1000
        match = re.search(r"_(\d+) more entries do not fit", text)
        assert match is not None and len(_rows(text)) + int(match.group(1)) == 1000


def test_a_repository_url_is_cloned_once_and_planned_the_same(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str],
) -> None:
    repo, _, _ = deployed_repo
    local = plan("--repo", str(repo.bare), "--rev", "more-gpus", "--from-status", "--format", "json")
    with git_daemon(repo.bare.parent) as base:
        remote = plan(
            "--repo", f"{base}/{repo.bare.name}", "--rev", "more-gpus", "--from-status", "--format", "json"
        )
    assert remote.returncode == local.returncode == 0, remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)


def test_a_recorded_palette_endpoint_routes_as_run_did(tmp_path: Path) -> None:
    """``run --palette URL`` observed every namespace at URL: the plan routes there too."""
    repo = make_config_repo(tmp_path, source=sample_config(tmp_path))
    hosts, clusters, _ = deployed(repo.work, SAMPLE_INVENTORY)
    emulator = "http://127.0.0.1:8080"
    files: dict[str, bytes | str] = {
        "reconciler.yaml": root_file(repo.head(), [(emulator, PROJECT)]) + f"palette: '{emulator}'\n",
        target_file(emulator, PROJECT): render_snapshot(hosts, clusters),
    }
    write_status_branch(repo, files)
    result = plan("--repo", str(repo.bare), "--from-status", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert {p["action"] for p in json.loads(result.stdout)["platforms"]} == {"unchanged"}
    files["reconciler.yaml"] = root_file(repo.head(), [(emulator, PROJECT)])  # no palette recorded
    write_status_branch(repo, files)
    result = plan("--repo", str(repo.bare), "--from-status", "--format", "json")
    assert result.returncode == 2 and target_file(URL, PROJECT) in result.stderr


def test_recorded_targets_nothing_routes_to_are_planned_as_run_plans_them(tmp_path: Path) -> None:
    """A recorded target with a snapshot has its orphan clusters planned for deletion; one that was never
    observed (no snapshot) is skipped with a warning, as ``run`` skips an unreachable one."""
    repo = make_config_repo(tmp_path, source=sample_config(tmp_path))
    hosts, clusters, _ = deployed(repo.work, SAMPLE_INVENTORY)
    old, gone = ("https://old.example.com", "p-old"), ("https://gone.example.com", None)
    orphan = {
        "metadata": {
            "uid": "cluster-legacy",
            "name": "project-c-legacy",
            "labels": {
                "palette.ai/managed-by": "reconciler",
                "palette.ai/namespace": "project-c",
                "palette.ai/name": "legacy",
            },
        },
        "status": {"state": "Running"},
    }
    in_use = [{"uid": "cluster-legacy", "name": "legacy"}]
    old_hosts = [edge_host(f"edge-old-{i}", state="in-use", clusters=in_use) for i in range(2)]
    write_status_branch(
        repo,
        {
            "reconciler.yaml": root_file(repo.head(), [(URL, PROJECT), old, gone]),
            target_file(URL, PROJECT): render_snapshot(hosts, clusters),
            target_file(*old): render_snapshot(old_hosts, [orphan]),
        },
    )
    result = plan("--repo", str(repo.bare), "--from-status", "--changes-only", "--format", "json")
    assert result.returncode == 0, result.stderr
    [entry] = json.loads(result.stdout)["platforms"]
    assert (entry["namespace"], entry["name"], entry["action"]) == ("project-c", "legacy", "delete")
    assert sorted(entry["controlPlane"] + entry["workers"]) == ["edge-old-0", "edge-old-1"]
    assert "warning: no observed inventory for https://gone.example.com" in result.stderr


def _doc_examples() -> list[str]:
    """The ``reconciler plan`` lines of the bash blocks of docs/planning.md and of the plan sections of
    docs/pull-requests.md (its CI sections are run by tests/test_ci_integration.py)."""
    planning = (ROOT / "docs" / "planning.md").read_text()
    requests = (ROOT / "docs" / "pull-requests.md").read_text()
    requests = requests[requests.index("## `plan --from-status`") : requests.index("## Formats")]
    lines = []
    for text in (planning, requests):
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            lines += [
                ln.split("  #")[0].strip() for ln in block.splitlines() if ln.startswith("reconciler plan")
            ]
    return lines


@pytest.mark.parametrize("line", _doc_examples())
def test_the_docs_plan_examples_run_as_written(
    deployed_repo: tuple[ConfigRepo, dict[str, Any], str], tmp_path: Path, line: str
) -> None:
    from reconciler.emulator import EmulatorServer
    from reconciler.snapshots import load_snapshot

    repo, _, _ = deployed_repo
    clone = tmp_path / "checkout"
    git("clone", "-q", str(repo.bare), str(clone))
    head = git("rev-parse", "origin/more-gpus", cwd=clone).strip()
    status = git("rev-parse", f"origin/{STATUS}", cwd=clone).strip()
    snapshot = git("show", f"origin/{STATUS}:{target_file(URL, PROJECT)}", cwd=clone)
    (tmp_path / "snapshot.json").write_text(snapshot)
    shutil.copy(tmp_path / "snapshot.json", clone / "snapshot.json")
    key = "pk-docs-example-key-0000"
    with EmulatorServer.from_snapshot(load_snapshot(tmp_path / "snapshot.json"), key) as emulator:
        env = _clean_env({**OFFLINE, "HEAD_SHA": head, "STATUS_SHA": status[:7], "PALETTE_URL": emulator.url})
        env["PATH"] = f"{Path(reconciler_bin()).parent}:{env['PATH']}"
        env["PALETTE_API_KEY"] = key
        env["NO_PROXY"] = "127.0.0.1"
        done = subprocess.run(
            ["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert done.returncode == 0, (line, done.stderr)
    out = done.stdout or ((clone / "comment.md").read_text() if "comment.md" in line else "")
    if "plan.md" in line:
        out = (clone / "plan.md").read_text()
    if "--format json" in line:
        assert json.loads(out)["basis"]["revision"]
    else:
        assert out.splitlines()[0].startswith("planned at "), out
