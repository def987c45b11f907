"""Import rules the import-linter contracts (pyproject.toml, run by ``lint-imports``) cannot say.

The layers, the independence of the pass's stages, the pure core and the emulator are the tool's; here:
only ``reconciler.palette`` and ``reconciler.prometheus`` talk HTTP and only ``reconciler.source`` and
``reconciler.status`` talk git (a rule over every module, not a layer); the lease and the clock know
no backend; and no stage or pipeline module asks which implementation stands behind a port.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "reconciler"
IMPLEMENTATIONS = (
    "GitSource",
    "DirectorySource",
    "StatusStore",
    "ShardStatusStore",
    "NoStatus",
    "ScalingStage",
)


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def starts(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_only_the_palette_package_speaks_http_and_only_source_and_status_speak_git() -> None:
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        names = imports(path)
        # The emulator is a server, not a client of Palette; the webhook server is starlette, not httpx.
        # Prometheus (utilisation for scaling) is the one other HTTP service the reconciler reads.
        if any(starts(n, ("httpx",)) for n in names) and not rel.startswith(("palette/", "prometheus/")):
            offenders.append(f"{rel}: httpx")
        if any(starts(n, ("git",)) for n in names) and not rel.startswith(("source/", "status/")):
            offenders.append(f"{rel}: git")
    assert offenders == []


@pytest.mark.parametrize("name", ["lease.py", "clock.py"])
def test_the_lease_and_the_clock_speak_neither_git_nor_palette(name: str) -> None:
    """``runtime/lease.py`` holds what a lease is, not where it lives: the git lease is in ``source/``."""
    banned = ("git", "httpx", "reconciler.source", "reconciler.status", "reconciler.palette")
    assert sorted(n for n in imports(PACKAGE / "runtime" / name) if starts(n, banned)) == []


def test_no_stage_asks_which_implementation_stands_behind_a_port() -> None:
    """Stages speak to ports (``runtime/ports.py``, ``runtime/branch.py``, ``scaling.stage.SampleSource``);
    only ``runtime/wiring.py`` names the implementations it builds."""
    pattern = re.compile(r"isinstance\([^)]*\b(" + "|".join(IMPLEMENTATIONS) + r")\b")
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sorted((PACKAGE / "runtime").rglob("*.py"))
        if path.name != "wiring.py" and pattern.search(path.read_text())
    ]
    assert offenders == []
