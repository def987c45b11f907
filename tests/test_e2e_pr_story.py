"""The pull-request story end to end (docs/status-branch.md), black box: a config repository with a
deployed state (real `run --once` passes against the emulator, which write `reconciler.yaml` and the
`inventory/` snapshots to the status branch), a branch that raises one platform's GPUs, planned from the
status branch with no Palette and no key; then the merge, a pass, and `status --history` naming it."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from tests._contract_support import git, make_config_repo, run_cli, running_emulator, with_key

MERGE = "Merge pull request #42 from team/more-notebook-gpus"


def test_a_pull_request_is_planned_from_the_status_branch_and_audited_after_the_merge(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tmp = tmp_path_factory.mktemp("pr-story")
    repo = make_config_repo(tmp)
    with running_emulator(tmp, provision_seconds=0.2, delete_seconds=0.1) as emulator:

        def run_once() -> None:
            result = run_cli(
                "run", "--repo", str(repo.bare), "--palette", emulator.url, "--once",
                "--listen", "127.0.0.1:0", "--cache-dir", str(tmp / "cache"), env=with_key(),
            )  # fmt: skip
            assert result.returncode == 0, result.stderr[-2000:]

        run_once()
        time.sleep(0.4)
        run_once()
        files = git("ls-tree", "-r", "--name-only", "reconciler/status", cwd=repo.bare).split()
        assert "reconciler.yaml" in files
        assert any(f.startswith("inventory/") and f.endswith(".json") for f in files), files

        # The pull request: notebooks 4 -> 6 H100 GPUs, on a branch.
        work = repo.work
        git("checkout", "-q", "-b", "more-notebook-gpus", cwd=work)
        path = work / "project-a" / "platforms" / "notebooks.yaml"
        doc = yaml.safe_load(path.read_text())
        doc["spec"]["gpus"][0]["count"] = 6
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        git("commit", "-qam", "notebooks: 6 GPUs", cwd=work)
        git("push", "-q", "origin", "more-notebook-gpus", cwd=work)
        pr_head = git("rev-parse", "HEAD", cwd=work).strip()

        # Planned against what is deployed: no Palette, no key (run_cli drops every PALETTE_* variable).
        common = ("plan", "--repo", str(repo.bare), "--from-status", "--rev", pr_head, "--changes-only")
        markdown = run_cli(*common, "--format", "markdown")
        assert markdown.returncode == 0, markdown.stderr
        plan = json.loads(run_cli(*common, "--format", "json").stdout)
        assert [(p["namespace"], p["name"], p["action"]) for p in plan["platforms"]] == [
            ("project-a", "notebooks", "scale")
        ]
        assert plan["platforms"][0]["gpus"]["NVIDIA-H100"] >= 6  # allocated GPUs cover the request
        assert "project-a/notebooks" in markdown.stdout and "scale" in markdown.stdout
        assert "clearml-prod" not in markdown.stdout, "changes only"

        # The merge and a pass; the audit trail names the merge.
        git("checkout", "-q", "main", cwd=work)
        git("merge", "-q", "--no-ff", "-m", MERGE, "more-notebook-gpus", cwd=work)
        git("push", "-q", "origin", "main", cwd=work)
        run_once()
        history = json.loads(
            run_cli(
                "status", "--repo", str(repo.bare), "project-a/notebooks", "--history", "--format", "json"
            ).stdout
        )
        newest = history["history"][0]
        assert newest["sourceSubject"] == MERGE
        assert newest["sourceRevision"] == git("rev-parse", "main", cwd=work).strip()
