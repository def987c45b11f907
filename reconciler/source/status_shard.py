"""The status branch as one shard (``run --namespaces --shard``) reads and writes it: its own files, and
its record at ``shards/<shard>.yaml`` shown as ``reconciler.yaml`` (docs/status-branch.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reconciler.logging import get_logger
from reconciler.resolve import NamespaceSelector
from reconciler.source.status_store import UNSET, StatusStore, Unset
from reconciler.status.render import INVALID_DIR, parse_recorded
from reconciler.status.snapshot import target_file
from reconciler.status.store import INVENTORY_DIR, RECORD_FILE, shard_owns, shard_record_path

log = get_logger(component="status")


class ShardStatusStore(StatusStore):
    """The status branch as one shard (``run --namespaces --shard``) sees and writes it.

    It reads and writes the same tree shape as an unsharded instance, ``reconciler.yaml`` included, so
    the controller does not know it is a shard: ``read`` shows the shard's own resource files, its
    record ``shards/<shard>.yaml`` *as* ``reconciler.yaml`` and the shared ``inventory/`` snapshots of
    the targets that record names; ``write``
    puts that record back at ``shards/<shard>.yaml`` and writes with ``owned`` = :func:`shard_owns`,
    so other shards' files are kept on every attempt.
    """

    def __init__(
        self,
        url: str,
        branch: str = "reconciler/status",
        workdir: Path | None = None,
        *,
        shard: str,
        namespaces: NamespaceSelector,
        **options: Any,
    ) -> None:
        super().__init__(url, branch, workdir, **options)
        self.shard = shard
        self.namespaces = namespaces
        self.record_path = shard_record_path(shard)

    def owns(self, path: str) -> bool:
        return shard_owns(path, self.shard, self.namespaces)

    def _view(self, files: dict[str, bytes], ids: dict[str, str]) -> tuple[dict[str, bytes], dict[str, str]]:
        shown = [path for path in files if path != self.record_path and self.owns(path)]
        view = {path: files[path] for path in shown}
        view_ids = {path: ids[path] for path in shown if path in ids}
        if self.record_path in files:
            record = files[self.record_path]
            view[RECORD_FILE] = record
            if self.record_path in ids:
                view_ids[RECORD_FILE] = ids[self.record_path]
            # The snapshots of the targets this shard records (whoever wrote them last): the ones it
            # compares its observations with. Other shards' targets are none of its business.
            for url, project in parse_recorded({RECORD_FILE: record}).targets:
                path = target_file(url, project)
                if path in files:
                    view[path] = files[path]
                    if path in ids:
                        view_ids[path] = ids[path]
        return view, view_ids

    def write(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str],
        *,
        owned: Callable[[str], bool] | None = None,
        expected: str | Unset | None = UNSET,
        may_push: Callable[[], bool] | None = None,
    ) -> str | None:
        if owned is not None:
            raise ValueError("a shard's store decides what it owns itself")
        placed = {(self.record_path if path == RECORD_FILE else path): data for path, data in files.items()}
        unowned = [p for p in placed if not self.owns(p) and not p.startswith(INVENTORY_DIR + "/")]
        # A document with an invalid namespace has its status under ``_invalid/``, which names no
        # namespace a shard could own: left out (with a warning), never a reason to write nothing.
        dropped = [p for p in unowned if p.startswith(INVALID_DIR + "/")]
        foreign = sorted(set(unowned) - set(dropped))
        if foreign:
            raise ValueError(f"shard {self.shard} may not write {', '.join(foreign[:3])}: not its namespaces")
        if dropped:
            log.warning(
                "status of documents with an invalid namespace not written by a shard", paths=dropped[:5]
            )
            placed = {p: data for p, data in placed.items() if p not in dropped}
        return super().write(placed, message, trailers, owned=self.owns, expected=expected, may_push=may_push)
