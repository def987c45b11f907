"""Reproducible installs (docs/operations.md): one lock file of exact versions, used everywhere."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"requirements.lock: {line!r} is not an exact pin"
        pins[_normal(name.strip())] = version.strip()
    return pins


def _requirement_names() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return [_normal(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]) for req in requirements]


def test_every_dependency_and_dev_tool_is_pinned_exactly() -> None:
    locked = _locked()
    missing = [name for name in _requirement_names() if name not in locked]
    assert not missing, f"not in requirements.lock: {missing} (re-run pip-compile, see docs/operations.md)"


def test_pyproject_keeps_lower_bounds_not_pins() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in project["dependencies"]:
        assert "==" not in req, f"{req}: pyproject.toml keeps lower bounds; exact versions live in the lock"


def test_readme_ci_and_dockerfile_install_through_the_lock() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    installs = [line for line in readme.splitlines() if "pip install" in line and line.startswith("python3")]
    assert len(installs) >= 2, "the README's two quick-start commands"
    for line in installs:
        assert "-c requirements.lock" in line, line
    test_command = next(line for line in installs if "pytest" in line)
    assert test_command in ci, ".ci/run must run exactly the README's test command"
    assert "-c requirements.lock" in (ROOT / "Dockerfile").read_text()
