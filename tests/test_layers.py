"""Import rules between layers (DESIGN.md section 2), checked on the source, as import-linter would.

Pure modules never import I/O modules or I/O libraries; only ``reconciler.palette`` talks HTTP to
Palette, and only ``reconciler.source`` and ``reconciler.status`` talk to git.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "reconciler"

PURE = [
    "model",
    "manifests",
    "placement",
    "inventory.py",
    "edgehost.py",
    "resolve.py",
    "allocate.py",
    "plan.py",
    "deletions.py",
    "compute_status.py",
    "profiles.py",
    "plan_report.py",
    "scaling",
    "status/render.py",
    "status/changes.py",
]
IO_MODULES = (
    "reconciler.palette",
    "reconciler.prometheus",
    "reconciler.source",
    "reconciler.status",
    "reconciler.apply",
    "reconciler.controller",
    "reconciler.server",
    "reconciler.emulator",
    "reconciler.commands",
    "reconciler.cli",
)
IO_LIBRARIES = ("httpx", "git", "watchfiles", "uvicorn", "starlette", "socket", "subprocess", "requests")


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def files(parts: list[str]) -> list[Path]:
    out: list[Path] = []
    for part in parts:
        target = PACKAGE / part
        out.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return out


def starts(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# Pure modules inside an I/O package (``reconciler.status.render``): other pure modules may import them.
PURE_MODULES = {
    "reconciler." + p.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".") for p in files(PURE)
}


@pytest.mark.parametrize("path", files(PURE), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_pure_modules_import_no_io(path: Path) -> None:
    bad = sorted(
        n
        for n in imports(path)
        if (starts(n, IO_MODULES) and n not in PURE_MODULES) or starts(n, IO_LIBRARIES)
    )
    assert bad == [], f"{path.relative_to(PACKAGE)} imports I/O: {bad}"


def test_only_the_palette_package_speaks_http_and_only_source_and_status_speak_git() -> None:
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        names = imports(path)
        # The emulator is a server, not a client of Palette; the webhook server is starlette, not httpx.
        # Prometheus (utilisation for scaling) is the one other HTTP service the reconciler reads.
        if starts_any(names, ("httpx",)) and not rel.startswith(("palette/", "prometheus/")):
            offenders.append(f"{rel}: httpx")
        if starts_any(names, ("git",)) and not rel.startswith(("source/", "status/")):
            offenders.append(f"{rel}: git")
    assert offenders == []


def starts_any(names: set[str], prefixes: tuple[str, ...]) -> bool:
    return any(starts(n, prefixes) for n in names)


@pytest.mark.parametrize("path", files(["runtime"]), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_runtime_speaks_neither_git_nor_palette(path: Path) -> None:
    """``runtime/`` holds what a lease is, not where it lives: the git lease is in ``source/``."""
    banned = ("git", "httpx", "reconciler.source", "reconciler.status", "reconciler.palette")
    bad = sorted(n for n in imports(path) if starts(n, banned))
    assert bad == [], f"{path.relative_to(PACKAGE)} imports {bad}"


def test_status_snapshot_format_is_pure() -> None:
    """``status/snapshot.py`` is the snapshot format, not the branch: no git, no HTTP, no Palette client.
    Besides pure modules it uses only ``palette.observe`` (the snapshot reader, which reads files but
    speaks neither HTTP nor git), so the format has one reader."""
    path = PACKAGE / "status" / "snapshot.py"
    allowed = PURE_MODULES | {"reconciler.palette.observe"}
    bad = sorted(
        n for n in imports(path) if n not in allowed and (starts(n, IO_MODULES) or starts(n, IO_LIBRARIES))
    )
    assert bad == []
    observe = imports(PACKAGE / "palette" / "observe.py")
    assert not [
        n for n in observe if starts(n, IO_LIBRARIES) or (starts(n, IO_MODULES) and n not in PURE_MODULES)
    ]


def test_the_emulator_imports_nothing_from_the_client() -> None:
    """The emulator shares Palette's shapes and limits (observe, pacing), never the client's code."""
    client_side = ("reconciler.palette.client", "reconciler.palette.hosts", "reconciler.palette.retry")
    offenders = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / "emulator").rglob("*.py"))
        for name in sorted(imports(path))
        if starts(name, client_side) or name == "reconciler.palette"
    ]
    assert offenders == []
