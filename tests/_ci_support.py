"""Just enough of a GitHub Actions runner and a GitLab runner to run the project's CI files for real.

- :func:`run_composite_action` runs the ``run:`` steps of ``action.yml`` with bash, as a runner does: the
  ``${{ }}`` expressions of inputs, ``env:`` and ``working-directory`` evaluated from the inputs and a
  ``github`` context; ``$GITHUB_OUTPUT``, ``$GITHUB_ENV`` and ``$GITHUB_PATH`` honoured between steps.
  ``uses:`` steps (actions/setup-python) are what the machine already has, so they are not run.
- :func:`run_gitlab_job` runs a job's ``before_script`` and ``script`` lines in one bash with
  ``set -eo pipefail``, as GitLab's shell executor does, with the file's ``variables`` in the environment.
- :class:`FakeForge` serves the few comment/note endpoints of GitHub's and GitLab's REST APIs on loopback.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from reconciler.status.snapshot import render_snapshot, target_file
from tests._contract_support import ConfigRepo, git
from tests._git_support import serving

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def _lookup(name: str, context: Mapping[str, Any]) -> str:
    """``inputs.x``, ``github.event.pull_request.number``, ``steps.id.outputs.k``, or a '...' literal."""
    if name.startswith("'") and name.endswith("'"):
        return name[1:-1]
    value: Any = context
    for part in name.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def evaluate(text: str, context: Mapping[str, Any]) -> str:
    """Every ``${{ a || b }}`` of ``text`` replaced by its value (the first non-empty operand)."""

    def one(match: re.Match[str]) -> str:
        for operand in match.group(1).split("||"):
            value = _lookup(operand.strip(), context)
            if value:
                return value
        return ""

    return _EXPRESSION.sub(one, text)


def _read_pairs(path: Path) -> dict[str, str]:
    pairs: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                pairs[key] = value
    return pairs


@dataclass
class StepResult:
    name: str
    returncode: int
    stdout: str
    stderr: str


@dataclass
class ActionRun:
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def returncode(self) -> int:
        return next((s.returncode for s in self.steps if s.returncode != 0), 0)

    def log(self) -> str:
        return "\n".join(f"--- {s.name} ({s.returncode})\n{s.stdout}\n{s.stderr}" for s in self.steps)


def run_composite_action(
    action: Mapping[str, Any],
    with_inputs: Mapping[str, str],
    github: Mapping[str, Any],
    workspace: Path,
    runner_temp: Path,
    env: Mapping[str, str],
    *,
    skip: Sequence[str] = (),
) -> ActionRun:
    """Run the composite ``action``'s ``run:`` steps until one fails; see the module docstring. Steps
    whose name starts with one of ``skip`` are not run (what an earlier job left is reused)."""
    context: dict[str, Any] = {"github": github, "steps": {}}
    context["inputs"] = {
        name: evaluate(str(with_inputs.get(name, spec.get("default", ""))), context)
        for name, spec in action.get("inputs", {}).items()
    }
    files = {name: runner_temp / f"{name.lower()}-{id(context)}" for name in ("GITHUB_ENV", "GITHUB_PATH")}
    result = ActionRun()
    for index, step in enumerate(action["runs"]["steps"]):
        if "run" not in step or str(step.get("name", "")).startswith(tuple(skip)):
            continue
        output = runner_temp / f"output-{id(context)}-{index}"
        output.write_text("")
        step_env = {**env, **_read_pairs(files["GITHUB_ENV"])}
        paths = files["GITHUB_PATH"].read_text().split() if files["GITHUB_PATH"].exists() else []
        step_env["PATH"] = ":".join([*reversed(paths), step_env["PATH"]])
        step_env.update(
            GITHUB_WORKSPACE=str(workspace),
            RUNNER_TEMP=str(runner_temp),
            GITHUB_OUTPUT=str(output),
            **{name: str(path) for name, path in files.items()},
        )
        step_env.update({k: evaluate(str(v), context) for k, v in step.get("env", {}).items()})
        cwd = workspace / evaluate(step.get("working-directory", "."), context)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", evaluate(step["run"], context)],
            cwd=cwd,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        result.steps.append(
            StepResult(step.get("name", f"step {index}"), done.returncode, done.stdout, done.stderr)
        )
        if "id" in step:
            outputs = _read_pairs(output)
            context["steps"][step["id"]] = {"outputs": outputs}
            result.outputs[step["id"]] = outputs
        if done.returncode != 0:
            break
    return result


def gitlab_job_script(document: Mapping[str, Any], job: str, installed: bool = False) -> str:
    """The job's ``before_script`` and ``script`` (through ``extends``), as one bash script; with
    ``installed``, without the ``pip install`` lines (an earlier job installed into the same Python)."""
    spec = dict(document[job])
    for parent in [spec["extends"]] if isinstance(spec.get("extends"), str) else spec.get("extends", []):
        spec = {**document[parent], **spec}
    before = [line for line in spec.get("before_script", []) if not (installed and "pip install" in line)]
    lines = [*before, *spec.get("script", [])]
    return "set -eo pipefail\n" + "\n".join(lines) + "\n"


def run_gitlab_job(
    document: Mapping[str, Any],
    job: str,
    cwd: Path,
    env: Mapping[str, str],
    overrides: Mapping[str, str],
    *,
    installed: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``job`` with the file's variables, ``overrides`` (what a project's CI/CD settings would set)
    and the predefined ``CI_*`` variables in ``env`` (``installed``: see :func:`gitlab_job_script`)."""
    variables = {k: str(v) for k, v in document.get("variables", {}).items()}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", gitlab_job_script(document, job, installed)],
        cwd=cwd,
        env={**env, **variables, **overrides},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


# --- a status branch ----------------------------------------------------------------------------------


def write_observed_status(repo: ConfigRepo, hosts: list[dict[str, Any]], url: str, project: str) -> None:
    """What a first pass records on ``reconciler/status``: the config revision, its one target and
    that target's inventory (``hosts``, no cluster yet)."""
    work = repo.work.parent / "status-work"
    git("init", "-q", "-b", "reconciler/status", str(work))
    (work / "inventory").mkdir()
    (work / target_file(url, project)).write_bytes(render_snapshot(hosts, []))
    (work / "reconciler.yaml").write_text(
        f"branch: main\nrevision: {repo.head()}\ntargets:\n  - {{url: '{url}', projectUid: '{project}'}}\n"
    )
    git("add", "-A", ".", cwd=work)
    git("commit", "-q", "-m", "observed", cwd=work)
    git("push", "-q", str(repo.bare), "HEAD:refs/heads/reconciler/status", cwd=work)


# --- a forge's comment API -----------------------------------------------------------------------------


class FakeForge:
    """Comments (GitHub: ``/repos/O/R/issues/N/comments``) and notes (GitLab:
    ``/api/v4/projects/P/merge_requests/N/notes``) kept in memory; every request is recorded."""

    def __init__(self) -> None:
        self.threads: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[tuple[str, str, Mapping[str, str]]] = []
        self._next = 1000
        self._lock = threading.Lock()

    def _thread_of(self, path: str) -> tuple[str, int | None]:
        github = re.fullmatch(r"(/repos/[^/]+/[^/]+)/issues/(\d+)/comments", path)
        if github:
            return f"{github.group(1)}#{github.group(2)}", None
        edit = re.fullmatch(r"(/repos/[^/]+/[^/]+)/issues/comments/(\d+)", path)
        if edit:
            return edit.group(1), int(edit.group(2))
        gitlab = re.fullmatch(r"(/api/v4/projects/[^/]+/merge_requests/\d+/notes)(?:/(\d+))?", path)
        if gitlab:
            return gitlab.group(1), int(gitlab.group(2)) if gitlab.group(2) else None
        raise KeyError(path)

    def handle(self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes) -> tuple[int, Any]:
        path = urlparse(raw_path).path
        with self._lock:
            self.requests.append((method, path, dict(headers)))
            thread, item = self._thread_of(path)
            if method == "GET":
                return 200, self.threads.get(thread, [])
            payload = json.loads(body or b"{}")
            if method == "POST":
                self._next += 1
                entry = {"id": self._next, "body": payload["body"]}
                self.threads.setdefault(thread, []).append(entry)
                return 201, entry
            for entries in self.threads.values():
                for entry in entries:
                    if entry["id"] == item:
                        entry["body"] = payload["body"]
                        return 200, entry
            return 404, {"message": "Not Found"}

    @contextmanager
    def serve(self) -> Iterator[str]:
        forge = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    code, answer = forge.handle(
                        self.command, self.path, dict(self.headers), self.rfile.read(length)
                    )
                except KeyError:
                    code, answer = 404, {"message": "Not Found"}
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = _any

            def log_message(self, *_args: object) -> None:
                pass

        with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
            yield url
