"""A package's names resolve, and a module lends no names it does not define (no re-exports to go stale)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import reconciler

PACKAGE = Path(reconciler.__file__).resolve().parent
PACKAGES = sorted(m.name for m in pkgutil.walk_packages(reconciler.__path__, "reconciler.") if m.ispkg)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_name_a_package_lists_resolves(name: str) -> None:
    """Names loaded on first use (``source``, ``palette``, ``runtime``) come from a map a rename can break."""
    package = importlib.import_module(name)
    missing = [n for n in getattr(package, "__all__", ()) if not hasattr(package, n)]
    assert missing == []


def defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def lent(tree: ast.Module) -> list[str]:
    own = defined(tree)
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t for t in node.targets if isinstance(t, ast.Name)] and any(
            t.id == "__all__" for t in node.targets if isinstance(t, ast.Name)
        ):
            assert isinstance(node.value, ast.List | ast.Tuple)
            names += [e.value for e in node.value.elts if isinstance(e, ast.Constant) and e.value not in own]
        elif isinstance(node, ast.ImportFrom):
            names += [f"{a.name} as {a.asname}" for a in node.names if a.asname == a.name]
    return names


def test_a_module_lists_only_the_names_it_defines() -> None:
    """``__all__`` of a module (not a package) and ``import X as X`` lend nothing defined elsewhere:
    importers import a name from the module that defines it."""
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.name != "__init__.py":
            offenders += [f"{rel}: {name}" for name in lent(ast.parse(path.read_text(), str(path)))]
    assert offenders == []
