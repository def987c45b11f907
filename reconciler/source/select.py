"""Which files of a config repository are manifests: the one rule, for git trees and directories alike.

A path (relative to the repository root, with ``/``) is read when all of these hold:

- it ends in ``.yaml`` or ``.yml`` (any case);
- none of its components starts with ``.`` (``.github/``, ``.gitlab-ci.yml``, ``.pre-commit-config.yaml``);
- it lies under the subtree chosen with ``--path`` (the whole tree without it);
- the root's ``.reconcilerignore`` (gitignore syntax, as Flux's ``.sourceignore``) does not ignore it or
  one of its directories. As in git, a file inside an ignored directory cannot be re-included with
  ``!``: the directory is never entered.

Everything else is never parsed and never reported. Pure: the callers read the ignore file and list the
paths; this module only decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

IGNORE_FILE = ".reconcilerignore"
SUFFIXES = (".yaml", ".yml")


class SelectionError(ValueError):
    """A ``--path`` that cannot name a subtree of the repository (absolute, or climbing out with ``..``)."""


def normalize_subtree(path: str | None) -> str:
    """``--path`` as a relative directory without ``./`` or trailing ``/``; ``""`` for the whole tree."""
    if path is None:
        return ""
    text = path.replace("\\", "/").strip()
    if text.startswith("/"):
        raise SelectionError(f"--path {path!r}: give a directory relative to the repository root")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SelectionError(f"--path {path!r}: must stay inside the repository (no '..')")
    return "/".join(parts)


@dataclass
class FileSelection:
    """The file rule of one repository: its ignore patterns and the ``--path`` subtree."""

    ignore: str = ""
    subtree: str = ""
    _spec: pathspec.GitIgnoreSpec | None = field(init=False, repr=False)
    _dirs: dict[str, bool] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.subtree = normalize_subtree(self.subtree)
        self._spec = _ignore_spec(self.ignore) if self.ignore.strip() else None
        if self.subtree and not self.enters(self.subtree):
            # Reading nothing would look like an empty repository (run would prune everything).
            raise SelectionError(
                f"--path {self.subtree}: never read (a directory starting with '.' or in {IGNORE_FILE})"
            )

    @property
    def prefix(self) -> str:
        return f"{self.subtree}/" if self.subtree else ""

    def enters(self, directory: str) -> bool:
        """Whether a walk descends into ``directory`` (relative, no trailing ``/``)."""
        if not directory:
            return True
        known = self._dirs.get(directory)
        if known is not None:
            return known
        parent, _, name = directory.rpartition("/")
        inside = (
            not self.subtree
            or directory == self.subtree
            or directory.startswith(self.prefix)
            or self.subtree.startswith(f"{directory}/")
        )
        entered = (
            inside and not name.startswith(".") and self.enters(parent) and not self._ignored(f"{directory}/")
        )
        self._dirs[directory] = entered
        return entered

    def excludes(self, path: str) -> bool:
        """True when the rule leaves ``path`` out whatever its suffix (dot path, outside, ignored)."""
        parent, _, name = path.rpartition("/")
        if name.startswith(".") or not path.startswith(self.prefix) or not self.enters(parent):
            return True
        return self._ignored(path)

    def _ignored(self, path: str) -> bool:
        return self._spec is not None and bool(self._spec.patterns) and self._spec.match_file(path)

    def selects(self, path: str) -> bool:
        """True when ``path`` is a manifest to read."""
        return path.lower().endswith(SUFFIXES) and not self.excludes(path)


def _ignore_spec(text: str) -> pathspec.GitIgnoreSpec:
    """The patterns of a ``.reconcilerignore`` (imported only when there is one: it takes a while)."""
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(text.splitlines())
