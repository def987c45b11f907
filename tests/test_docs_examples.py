"""Every shell example in README.md and docs/ either runs as written or says why it cannot here.

Each command line of a ```bash block is matched by exactly one rule below: a rule that runs it (in a
workspace where the placeholders exist: a config repository `.` with a status branch written by a real
`run --once` against the emulator, which keeps running, `path/to/config-repo`, `snapshot.json`,
`my-workload.yaml`, ...; `$HEAD_SHA`/`$PR_HEAD` its HEAD, `$STATUS_SHA` its status branch's tip,
`$PALETTE_URL` the emulator, the API key given only to the examples that say they need it) and checks
its exit status, or a rule that names why it cannot run offline (it needs Palette, a forge, a cluster,
docker, or it is the test suite itself). A new example that no rule matches fails the test, so
an example cannot be added unchecked. Server commands (`reconciler emulator`) are started, must say they
listen, and are stopped; `--port 8080` becomes a free port.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests._contract_support import (
    API_KEY,
    SAMPLE_INVENTORY,
    assert_no_secret,
    make_config_repo,
    reconciler_bin,
    run_cli,
    running_emulator,
    with_key,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample-repo"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.S)


def commands() -> list[tuple[str, str]]:
    """(file, command) of every command line of every shell block; continuations joined, comments cut."""
    found = []
    for path in DOCS:
        for block in BLOCK.findall(path.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#\s.*$", "", line).strip()
                if line and not line.startswith("#"):
                    found.append((str(path.relative_to(ROOT)), " ".join(line.split())))
    return found


@dataclass(frozen=True)
class Rule:
    pattern: str
    why_not: str = ""  # set: not run offline, for this reason
    where: str = "repo"  # repo: the workspace config repository; root: the project; scratch: an empty dir
    codes: tuple[int, ...] = (0,)
    server: bool = False
    key: bool = False  # the example says it needs the API key (exported): the emulator's is given

    def matches(self, command: str) -> bool:
        return re.search(self.pattern, command) is not None


NEEDS_PALETTE = "needs a real Palette endpoint and key"
RULES = (
    Rule(
        r"^python3 -m pip install|^python3 -m venv|python3 -m pytest",
        "installs the project or runs the suite itself",
    ),
    Rule(r"^python3? bench/|^python bench/", "a benchmark script: figures are measured, not tested (bench/)"),
    Rule(r"reconciler demo", "the demo has its own end-to-end test (tests/test_e2e_demo.py)"),
    Rule(r"^ruff check \. && mypy", "the lint and type gate, run by CI"),
    Rule(
        r"reconciler run ",
        "a long-running loop against a real Palette and forge (tested in tests/test_e2e_*.py)",
    ),
    Rule(r"https://git\.example", "names a remote repository that does not exist here"),
    Rule(r"--palette https://api\.spectrocloud\.com|--palette http://127\.0\.0\.1:8080", NEEDS_PALETTE),
    Rule(r"^export PALETTE_API_KEY=\.\.\.", "sets a placeholder key"),
    Rule(
        r"^kubectl |^docker ",
        "needs a Kubernetes cluster or docker (tests/test_deploy*.py, test_server_dockerfile.py)",
    ),
    Rule(
        r"^url=|^body=|^sig=|^id=|^key=|^curl ",
        "signs and posts a webhook to a running reconciler (tests/test_server_*.py)",
    ),
    Rule(r"^git (log|fetch|show) .*reconciler/status", "reads a status branch of a deployed repository"),
    Rule(r"reconciler emulator ", where="root", server=True),
    Rule(r"^reconciler --version$", where="scratch"),
    Rule(r"^reconciler schemas ", where="scratch"),
    Rule(
        r"^reconciler (validate|plan --repo) sample-repo|--inventory sample-repo/inventory\.json",
        where="root",
        codes=(0, 1),
    ),
    Rule(r"^reconciler validate ", codes=(0,)),
    Rule(r'^reconciler plan .*--palette "\$PALETTE_URL"', codes=(0, 1), key=True),
    Rule(r"^reconciler plan ", codes=(0, 1)),
    Rule(r"^reconciler status ", codes=(0,)),
    Rule(r"^reconciler inventory show --inventory ", codes=(0,)),
)


def rule_of(command: str) -> Rule:
    matching = [r for r in RULES if r.matches(command)]
    assert matching, f"no rule runs or explains this example: {command}"
    return matching[0]


def _runs(command: str) -> bool:
    """Whether a rule runs it (an example no rule covers fails test_every_example_is_run_or_explained)."""
    return any(r.matches(command) for r in RULES) and not rule_of(command).why_not


def _workload(name: str) -> str:
    doc = yaml.safe_load((SAMPLE / "project-b" / "workloads" / "notebook.yaml").read_text())
    doc["metadata"]["name"] = name
    return yaml.safe_dump(doc, sort_keys=False)


@dataclass
class Workspace:
    repo: Path
    scratch: Path
    emulator_inventory: Path
    env: dict[str, str]  # the variables the examples use


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    tmp = tmp_path_factory.mktemp("docs-examples")
    source = tmp / "source"
    shutil.copytree(
        SAMPLE, source / "clusters" / "prod", ignore=shutil.ignore_patterns("*.json", "README.md")
    )
    config = make_config_repo(tmp / "config", source)
    with running_emulator(tmp, provision_seconds=0.1, delete_seconds=0.1) as emulator:
        once = ("--once", "--listen", "127.0.0.1:0", "--cache-dir", str(tmp / "cache"))
        done = run_cli("run", "--repo", str(config.bare), "--palette", emulator.url, *once, env=with_key())
        assert done.returncode == 0, done.stderr[-2000:]
        yield _prepared(tmp, config.work, emulator.url)


def _prepared(tmp: Path, repo: Path, palette_url: str) -> Workspace:
    shutil.copy(SAMPLE_INVENTORY, repo / "snapshot.json")
    (repo.parent / "sample.yaml").write_text(yaml.safe_dump(yaml.safe_load(SAMPLE_INVENTORY.read_text())))
    for name, file in (("my-workload", "my-workload.yaml"), ("what-if-a", "a.yaml"), ("what-if-b", "b.yaml")):
        (repo.parent / file).write_text(_workload(name))  # outside the tree, given by path
    shutil.copytree(SAMPLE, repo.parent / "path" / "to" / "config-repo")
    single = repo.parent / "project-a" / "platforms"
    single.mkdir(parents=True)
    first = sorted((SAMPLE / "project-a" / "platforms").glob("*.yaml"))[0]
    shutil.copy(first, single / "x.yaml")
    scratch = tmp / "scratch"
    scratch.mkdir()
    head = _git(repo, "rev-parse", "HEAD")
    status = _git(repo, "ls-remote", "origin", "refs/heads/reconciler/status").split()[0]
    variables = {"HEAD_SHA": head, "PR_HEAD": head, "STATUS_SHA": status, "PALETTE_URL": palette_url}
    return Workspace(repo, scratch, SAMPLE_INVENTORY, variables)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def _adapt(command: str, ws: Workspace) -> str:
    """The placeholder files of the docs, made real: the example files beside the repository, a free port
    (the variables are in the workspace's environment)."""
    files = (
        "path/to/config-repo",
        "my-workload.yaml",
        "a.yaml",
        "b.yaml",
        "sample.yaml",
        "project-a/platforms/x.yaml",
    )
    for name in files:
        command = re.sub(rf"(?<![\w/.-]){re.escape(name)}(?![\w/.-])", str(ws.repo.parent / name), command)
    command = command.replace(
        "/tmp/inventory.json", str(ws.emulator_inventory)
    )  # what bench/gen_inventory writes
    return command.replace("--port 8080", "--port 0").replace("reconciler ", f"{reconciler_bin()} ", 1)


def _serve(command: str, cwd: Path) -> None:
    with subprocess.Popen(command, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "listening on http://127.0.0.1:" in line, (
                line,
                proc.stderr.read() if proc.poll() is not None else "",
            )
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


EXAMPLES = commands()


def test_every_example_is_run_or_explained() -> None:
    assert len(EXAMPLES) > 30
    for _, command in EXAMPLES:
        rule_of(command)
    run = [c for _, c in EXAMPLES if not rule_of(c).why_not]
    assert len(run) >= 20, "most examples run"


@pytest.mark.parametrize(("where", "command"), [e for e in EXAMPLES if _runs(e[1])],
                         ids=lambda v: v[:60])  # fmt: skip
def test_the_example_runs_as_written(workspace: Workspace, where: str, command: str) -> None:
    rule = rule_of(command)
    cwd = {"repo": workspace.repo, "root": ROOT, "scratch": workspace.scratch}[rule.where]
    real = _adapt(command, workspace)
    if rule.server:
        _serve(real, cwd)
        return
    env = {k: v for k, v in os.environ.items() if k != "PALETTE_API_KEY"} | workspace.env
    if rule.key:
        env["PALETTE_API_KEY"] = API_KEY
    done = subprocess.run(
        real, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode in rule.codes, f"{where}: {command}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    assert_no_secret(done.stdout, done.stderr)
