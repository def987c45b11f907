"""``reconciler status`` (docs/planning.md), black box against a real bare repository whose status
branch was written by real ``run --once`` passes against the emulator; the HTML page is rendered by
headless Chromium (Debian's package; CI installs it) and its screenshot checked."""

from __future__ import annotations

import html
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests._contract_support import (
    SAMPLE_COMPUTES,
    SAMPLE_PLATFORMS,
    SAMPLE_POOLS,
    SAMPLE_WORKLOADS,
    ConfigRepo,
    Emulator,
    assert_no_secret,
    git,
    git_rc,
    make_config_repo,
    run_cli,
    running_emulator,
    with_key,
)
from tests._page_support import chromium, headless, probe_page

MERGE_SUBJECT = "Merge pull request #7 from team/raise-notebooks"


@dataclass
class Deployed:
    repo: ConfigRepo
    emulator: Emulator
    tmp: Path

    def run_once(self) -> None:
        result = run_cli(
            "run", "--repo", str(self.repo.bare), "--palette", self.emulator.url, "--once",
            "--listen", "127.0.0.1:0", "--cache-dir", str(self.tmp / "cache"), env=with_key(),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]

    def status(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = run_cli("status", "--repo", str(self.repo.bare), *args)
        assert_no_secret(result.stdout, result.stderr)
        return result


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    tmp = tmp_path_factory.mktemp("status-command")
    repo = make_config_repo(tmp)
    with running_emulator(tmp, provision_seconds=0.2, delete_seconds=0.1) as emulator:
        story = Deployed(repo, emulator, tmp)
        story.run_once()
        time.sleep(0.4)
        story.run_once()  # the clusters are Running now
        yield story


def test_table_lists_every_platform_with_phase_and_cluster(deployed: Deployed) -> None:
    result = deployed.status()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    tip = deployed.repo.status_git("rev-parse", "reconciler/status")
    assert (
        lines[0].startswith(f"status {tip[:7]} of 20") and f"(config {deployed.repo.head()[:7]})" in lines[0]
    )
    assert lines[2].split()[:4] == ["KIND", "RESOURCE", "PHASE", "REASON"]
    for namespace, name in SAMPLE_PLATFORMS:
        line = next(line for line in lines if f" {namespace}/{name} " in line)
        assert line.startswith("MLPlatform")
        assert "Running" in line and f"{namespace}-{name}" in line


def test_json_has_the_documented_shape(deployed: Deployed) -> None:
    result = deployed.status("--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["revision"] == deployed.repo.head()
    tip = deployed.repo.status_git("rev-parse", "reconciler/status")
    assert doc["basis"]["statusCommit"] == tip and doc["basis"]["observation"] == "none"
    assert doc["basis"]["revision"] == deployed.repo.head() and doc["basis"]["statusTime"].endswith("Z")
    keys = {"kind", "namespace", "name", "phase", "reason", "message", "cluster", "gpus", "hosts", "since"}
    assert doc["resources"] and all(set(r) == keys for r in doc["resources"])
    assert [(r["namespace"], r["name"]) for r in doc["resources"]] == sorted(
        SAMPLE_PLATFORMS + SAMPLE_POOLS + SAMPLE_WORKLOADS + SAMPLE_COMPUTES
    )
    running = [r for r in doc["resources"] if r["phase"] == "Running"]
    assert running and all(r["hosts"] and r["cluster"] and r["since"] for r in running)


def test_table_shows_pool_capacity_and_why_work_waits(deployed: Deployed) -> None:
    out = deployed.status().stdout
    pool = next(line for line in out.splitlines() if line.startswith("project-b/shared-a100 "))
    assert pool.split()[:6] == ["project-b/shared-a100", "shared", "NVIDIA-A100", "8", "7", "1"]
    assert "3 admitted, 1 waiting" in pool and "none (NoPolicy)" in pool
    waits = next(line for line in out.splitlines() if line.startswith("AIWorkload  project-b/sweep"))
    assert "PoolCapacityExceeded: needs 4 NVIDIA-A100 GPUs" in waits
    compute = deployed.status("project-a/edge-compute").stdout
    assert compute.splitlines()[3].startswith("Compute") and "hosts available" in compute


def test_one_resource_and_unknown_ones(deployed: Deployed) -> None:
    namespace, name = SAMPLE_PLATFORMS[0]
    one = json.loads(deployed.status(f"{namespace}/{name}", "--format", "json").stdout)
    assert [(r["namespace"], r["name"]) for r in one["resources"]] == [(namespace, name)]
    missing = deployed.status("nowhere/nothing")
    assert missing.returncode == 2 and "nowhere/nothing" in missing.stderr


def test_history_names_the_merge_that_caused_each_change(deployed: Deployed) -> None:
    work = deployed.repo.work
    namespace, name = "project-a", "notebooks"
    path = next(work.rglob("*.yaml").__iter__())  # make sure the tree is there
    assert path.exists()
    platform_file = next(
        p for p in work.rglob("*.yaml")
        if (doc := yaml.safe_load(p.read_text())) and isinstance(doc, dict)
        and doc.get("kind") == "MLPlatform" and doc["metadata"]["name"] == name
    )  # fmt: skip
    git("checkout", "-q", "-b", "raise-notebooks", cwd=work)
    doc = yaml.safe_load(platform_file.read_text())
    doc["spec"]["suspend"] = True
    platform_file.write_text(yaml.safe_dump(doc))
    git("commit", "-qam", "suspend notebooks", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    git("merge", "-q", "--no-ff", "-m", MERGE_SUBJECT, "raise-notebooks", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    deployed.run_once()

    result = deployed.status(f"{namespace}/{name}", "--history", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["resource"]["phase"] == "Suspended"
    newest = doc["history"][0]
    assert newest["sourceRevision"] == deployed.repo.head()
    assert newest["sourceSubject"] == MERGE_SUBJECT
    assert newest["sourceAuthor"] and "<" in newest["sourceAuthor"]
    assert newest["phase"] == "Suspended"
    assert [h["phase"] for h in doc["history"]][-1] == "Provisioning", "oldest first change is the create"
    times = [h["time"] for h in doc["history"]]
    assert times == sorted(times, reverse=True)
    text = deployed.status(f"{namespace}/{name}", "--history").stdout
    assert MERGE_SUBJECT in text


def test_history_reads_the_source_subject_and_author_from_the_trailers(
    deployed: Deployed, tmp_path: Path
) -> None:
    """A copy of the status branch alone (no config commit to fall back on) still names the merge."""
    work = deployed.repo.work
    sandbox = work / "project-a" / "platforms" / "cpu-sandbox.yaml"
    doc = yaml.safe_load(sandbox.read_text())
    doc["spec"]["suspend"] = not doc["spec"].get("suspend", False)
    git("checkout", "-q", "-b", "toggle-sandbox", cwd=work)
    sandbox.write_text(yaml.safe_dump(doc))
    git("commit", "-qam", "toggle the sandbox", cwd=work)
    git("checkout", "-q", "main", cwd=work)
    git("merge", "-q", "--no-ff", "--no-commit", "toggle-sandbox", cwd=work)
    subject = "Merge pull request #8 from team/toggle-sandbox"
    git("commit", "-q", "--author=Pat Merger <pat@example.com>", "-m", subject, cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    deployed.run_once()

    alone = tmp_path / "status-only.git"
    git(
        "clone",
        "-q",
        "--bare",
        "--no-local",  # fetch what the branch reaches, not a copy of every object
        "--single-branch",
        "--branch",
        "reconciler/status",
        deployed.repo.bare.as_uri(),
        str(alone),
    )
    assert git_rc("--git-dir", str(alone), "cat-file", "-e", f"{deployed.repo.head()}^{{commit}}") != 0
    result = run_cli("status", "--repo", str(alone), "project-a/cpu-sandbox", "--history", "--format", "json")
    assert result.returncode == 0, result.stderr
    newest = json.loads(result.stdout)["history"][0]
    assert newest["sourceRevision"] == deployed.repo.head()
    assert newest["sourceSubject"] == subject
    assert newest["sourceAuthor"] == "Pat Merger <pat@example.com>"
    assert newest["phase"] == ("Suspended" if doc["spec"]["suspend"] else "Running")


def test_a_clone_is_fetched_first_and_no_fetch_reads_its_copy_and_says_so(deployed: Deployed) -> None:
    clone = str(deployed.repo.work)
    tip = deployed.repo.status_git("rev-parse", "reconciler/status")
    git("update-ref", "-d", "refs/remotes/origin/reconciler/status", cwd=deployed.repo.work)
    unfetched = run_cli("status", "--repo", clone, "--no-fetch")
    assert unfetched.returncode == 2 and "no status branch" in unfetched.stderr, "nothing fetched yet"
    fetched = run_cli("status", "--repo", clone)
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.splitlines()[0].startswith(f"status {tip[:7]} of ")
    assert "not fetched" not in fetched.stdout
    as_is = run_cli("status", "--repo", clone, "--no-fetch", "--format", "json")
    assert as_is.returncode == 0 and json.loads(as_is.stdout)["basis"]["statusCommit"] == tip
    text = run_cli("status", "--repo", clone, "--no-fetch").stdout.splitlines()[0]
    assert "not fetched: --no-fetch read the local copy as it is" in text


def test_without_a_status_branch_it_says_so(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path)
    result = run_cli("status", "--repo", str(repo.bare))
    assert result.returncode == 2
    assert "no status branch" in result.stderr


def test_html_page_draws_every_held_host_and_says_why_work_waits_in_chromium(
    deployed: Deployed, tmp_path: Path
) -> None:
    from PIL import Image

    binary = chromium()
    page = tmp_path / "inventory.html"
    result = deployed.status("--html", str(page))
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text, "self-contained"
    tip = deployed.repo.status_git("rev-parse", "reconciler/status")
    basis = text[text.index('id="basis"') :].split("</p>")[0]
    assert "made 20" in basis and f"from status {tip[:7]} of 20" in basis, basis

    dom = headless(binary, tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    statuses = json.loads(deployed.status("--format", "json").stdout)["resources"]
    held = {host for r in statuses if r["kind"] != "Compute" for host in r["hosts"]}
    assert held
    for host in held:
        assert f'data-host="{host}"' in dom.stdout
    assert dom.stdout.count('class="host') >= len(held)
    assert 'id="capacity"' in dom.stdout
    attention = dom.stdout[dom.stdout.index('id="attention"') :]
    for pending in (r for r in statuses if r["phase"] == "Pending"):
        assert f'data-resource="{pending["namespace"]}/{pending["name"]}"' in attention
        assert f"{pending['reason']}: {html.escape(pending['message'], quote=True)}" in attention

    phone = probe_page(text, tmp_path, 390)
    assert phone["texts"] >= 3 * len(held) and phone["min"] >= 11 and phone["width"] <= 390

    for width in (1400, 390):
        shot = tmp_path / f"shot-{width}.png"
        done = headless(binary, tmp_path, f"--screenshot={shot}", f"--window-size={width},900", page.as_uri())
        assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
        image = Image.open(shot).convert("RGB")
        assert image.width == width
        colours = image.getcolors(maxcolors=1 << 20) or []
        assert len(colours) > 50, "the screenshot is (nearly) blank"
        white = max(colours)[0] / (image.width * image.height)
        assert white < 0.97, f"{white:.0%} of the page is one colour"
