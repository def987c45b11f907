"""Static checks of the container image recipe (no Docker engine is available where tests run).

The image is never built here: these tests read the Dockerfile's instructions and check the properties
an operator relies on, and run its HEALTHCHECK command against a live server on loopback.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli_app import app
from reconciler.metrics import Metrics
from reconciler.server.app import Server

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    logical: list[str] = []
    current = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    pairs = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        pairs.append((keyword.upper(), rest.strip()))
    return pairs


def final_stage() -> list[tuple[str, str]]:
    """The instructions of the last stage (what the image actually is)."""
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def resolve(image: str) -> str:
    """Substitute ``${ARG}`` references with the ARG defaults declared before the first FROM."""
    defaults = {}
    for keyword, rest in instructions():
        if keyword == "FROM":
            break
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            defaults[name] = value
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), image)


def test_every_stage_is_based_on_the_slim_python_311_image() -> None:
    images = [resolve(rest.split()[0]) for keyword, rest in instructions() if keyword == "FROM"]
    assert images, "no FROM"
    assert all(image == "python:3.11-slim" for image in images), images


def test_runs_as_a_non_root_user() -> None:
    users = [rest for keyword, rest in final_stage() if keyword == "USER"]
    assert users, "the final stage never switches user"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    # The same UID is created in the image, so that files it writes have an owner.
    assert any(keyword == "RUN" and f"--uid {user}" in rest for keyword, rest in final_stage())


def test_installs_git_in_the_runtime_image() -> None:
    installs = [rest for keyword, rest in final_stage() if keyword == "RUN" and "apt-get install" in rest]
    assert any(re.search(r"\bgit\b", rest) for rest in installs)
    assert any("rm -rf /var/lib/apt/lists" in rest for rest in installs), "apt lists left in the image"


def test_installs_the_package_with_pip_pinned_by_the_lock_file() -> None:
    assert any(
        keyword == "RUN" and re.search(r"pip install -c requirements\.lock \.$", rest)
        for keyword, rest in instructions()
    )


def test_entrypoint_runs_the_reconcile_loop_configured_from_the_environment() -> None:
    stage = dict(final_stage())
    assert json.loads(stage["ENTRYPOINT"]) == ["reconciler"]
    assert json.loads(stage["CMD"]) == ["run"]
    env = " ".join(rest for keyword, rest in final_stage() if keyword == "ENV")
    # Listening on loopback only would make the webhook and /metrics unreachable from outside.
    assert "RECONCILER_LISTEN=0.0.0.0:9090" in env
    assert "EXPOSE" in stage and stage["EXPOSE"].split() == ["9090"]


def test_every_run_option_the_image_relies_on_reads_an_environment_variable() -> None:
    """`CMD ["run"]` has no flags: the required --repo and the listen address must come from RECONCILER_*."""
    import typer.main

    command = typer.main.get_command(app)
    run = command.commands["run"]  # type: ignore[attr-defined]
    envvars = {param.name: param.envvar for param in run.params}
    assert envvars["repo"] == "RECONCILER_REPO"
    assert envvars["listen"] == "RECONCILER_LISTEN"
    assert envvars["cache_dir"] == "RECONCILER_CACHE_DIR"


def healthcheck_command() -> list[str]:
    [check] = [rest for keyword, rest in final_stage() if keyword == "HEALTHCHECK"]
    _, _, command = check.partition("CMD ")
    assert command.startswith("["), "HEALTHCHECK should use the exec form"
    parsed: list[str] = json.loads(command)
    return parsed


def test_healthcheck_probes_healthz_with_python_not_curl() -> None:
    command = healthcheck_command()
    assert command[0] == "python"
    assert "http://127.0.0.1:9090/healthz" in " ".join(command)
    assert "curl" not in shlex.join(command)


def test_healthcheck_command_passes_against_a_live_server_and_fails_without_one() -> None:
    command = [sys.executable, *healthcheck_command()[1:]]
    try:
        server = Server(Metrics(), webhook_secret=None, on_webhook=lambda _payload: None, port=9090)
        server.start()
    except Exception as exc:  # the port the image uses may be taken on a shared machine
        pytest.skip(f"port 9090 unavailable here: {exc}")
    try:
        assert subprocess.run(command, capture_output=True, timeout=60).returncode == 0
    finally:
        server.stop()
    assert subprocess.run(command, capture_output=True, timeout=60).returncode != 0


def test_build_context_leaves_out_git_and_caches() -> None:
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for entry in (".git", ".venv", "**/__pycache__", ".mypy_cache"):
        assert entry in ignored
    # The package itself and the files pyproject.toml needs must stay in the context.
    for needed in ("reconciler", "pyproject.toml", "README.md"):
        assert needed not in ignored
