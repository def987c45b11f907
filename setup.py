"""Build hook: record the git commit the package is built from in ``reconciler/COMMIT``.

Everything else is in pyproject.toml. The commit is ``$RECONCILER_COMMIT`` when set (the Dockerfile's
build argument: its build context has no ``.git``), else ``git rev-parse HEAD`` of the source tree
(``pip install "git+<url>@<tag>"`` builds in a clone). ``reconciler --version`` prints it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


def _commit() -> str | None:
    given = os.environ.get("RECONCILER_COMMIT", "").strip()
    if re.fullmatch(r"[0-9a-f]{40}", given):
        return given
    here = Path(__file__).resolve().parent
    if not (here / ".git").exists():
        return None
    try:
        proc = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    head = proc.stdout.strip()
    return head if proc.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", head) else None


class BuildWithCommit(build_py):
    def run(self) -> None:
        super().run()
        commit = _commit()
        if commit is not None and not getattr(self, "editable_mode", False):
            target = Path(self.build_lib) / "reconciler" / "COMMIT"
            target.write_text(commit + "\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildWithCommit})
