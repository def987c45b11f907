"""``reconciler --version``: the version, and the git commit the running code was built from.

Where the commit comes from, first found wins:

1. the git checkout the package is imported from (an editable install or a source checkout):
   ``git rev-parse HEAD`` of the directory holding ``reconciler/``, with "with local changes" when
   tracked files differ from it;
2. the file ``reconciler/COMMIT`` written when the package was built (``setup.py``: the environment
   variable ``RECONCILER_COMMIT``, else ``git rev-parse HEAD`` of the source being built; the Dockerfile
   passes its ``RECONCILER_COMMIT`` build argument);
3. otherwise "unknown".
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import reconciler

COMMIT_FILE = "COMMIT"
_SHA = re.compile(r"[0-9a-f]{40}")


def _git(checkout: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _from_checkout(package: Path) -> str | None:
    """HEAD of the checkout whose top directory holds the package (not of some repository around a
    virtual environment that happens to contain it)."""
    checkout = package.parent
    if not (checkout / ".git").exists():
        return None
    top = _git(checkout, "rev-parse", "--show-toplevel")
    head = _git(checkout, "rev-parse", "HEAD")
    if top is None or head is None or Path(top).resolve() != checkout.resolve() or not _SHA.fullmatch(head):
        return None
    changed = _git(checkout, "status", "--porcelain", "--untracked-files=no")
    return f"{head} with local changes" if changed else head


def _from_file(package: Path) -> str | None:
    try:
        text = (package / COMMIT_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text if _SHA.fullmatch(text) else None


def commit() -> str:
    """The commit the running code was built from (module docstring), or ``unknown``."""
    package = Path(reconciler.__file__).resolve().parent
    return _from_checkout(package) or _from_file(package) or "unknown"


def version_line() -> str:
    return f"reconciler {reconciler.__version__} (commit {commit()})"
