"""Commands a person waits for start and end quickly. ``validate`` and ``plan`` (offline or from the
status branch) never load the logging stack (structlog, and rich through it) nor the HTTP client; a
one-shot command exits without freeing its heap, its output flushed and its exit code kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests._ci_support import write_observed_status
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO, git, make_config_repo

# Runs the command in this process, then prints the top-level modules it imported.
PROBE = """
import json, sys
from reconciler.cli_app import app
sys.argv = ["reconciler", *sys.argv[1:]]
try:
    app()
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""
NEVER = {"structlog", "rich", "httpx", "uvicorn", "starlette", "prometheus_client", "watchfiles"}


def imported(*args: str, cache: Path) -> set[str]:
    env = {"RECONCILER_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_validate_and_plan_do_not_import_logging_or_http(tmp_path: Path) -> None:
    assert not imported("validate", str(SAMPLE_REPO), cache=tmp_path) & NEVER
    plan = ("plan", "--repo", str(SAMPLE_REPO), "--inventory", str(SAMPLE_INVENTORY))
    assert not imported(*plan, cache=tmp_path) & NEVER


def test_a_plan_from_the_status_branch_does_not_import_logging_or_http(tmp_path: Path) -> None:
    repo = make_config_repo(tmp_path / "config")
    hosts = json.loads(SAMPLE_INVENTORY.read_text())["edgeHosts"]
    write_observed_status(repo, hosts, "https://api.spectrocloud.com", "6514216503b1d1cd4f1bdc44")
    git("fetch", "-q", "origin", "reconciler/status:reconciler/status", cwd=repo.work)
    plan = ("plan", "--repo", str(repo.work), "--from-status", "--format", "json")
    modules = imported(*plan, cache=tmp_path / "cache")
    assert "git" in modules  # it did read the repository
    assert not modules & NEVER


def test_one_shot_commands_exit_without_freeing_but_with_their_output_and_code(tmp_path: Path) -> None:
    env = {"RECONCILER_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    plan = [sys.executable, "-m", "reconciler.cli", "plan", "--repo", str(SAMPLE_REPO)]
    plan += ["--inventory", str(SAMPLE_INVENTORY), "--format", "json"]
    done = subprocess.run(plan, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr  # the sample plans every platform
    assert json.loads(done.stdout)["platforms"]  # all of it was flushed
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bad.yaml").write_text("kind: MLPlatform\nmetadata: {name: x\n")
    done = subprocess.run([*plan[:3], "validate", str(broken)], capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "bad.yaml" in done.stdout + done.stderr
    missing = subprocess.run([*plan[:3], "validate", str(tmp_path / "nowhere")], capture_output=True, env=env)
    assert missing.returncode == 2
