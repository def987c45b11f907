"""Recorded observations cached on disk by the git blob id of their snapshot (``plan --from-status``).

A target's recorded snapshot (``inventory/*.json`` on the status branch) is read into host facts,
discovered and its clusters' members found on every plan: the same work on the same bytes until a pass
records another snapshot. What that gives (an :class:`~reconciler.plan.Observed`, before any namespace
filter) is a pure function of those bytes and of the code, so it is kept as one pickle per snapshot,
``<cache>/observations/<fingerprint>/<blob id>.pickle``, by the rules of the checked documents
(:mod:`reconciler.source.documents`): the fingerprint of the code names the directory, the directory
is safe to delete, a file that cannot be read is ignored, nothing is read from a directory or file not
private to this user (a pickle is code), and a one-shot command writes the file after its output, in a
child. Past :data:`MAX_KEPT` files, the oldest go. A snapshot that does not parse is not kept.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import stat
from collections.abc import Callable
from dataclasses import fields
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any

from reconciler.inventory import Machine
from reconciler.plan import Observed
from reconciler.process_exit import after_output, collector_paused
from reconciler.source.cache import blob_id
from reconciler.source.documents import code_fingerprint, open_private, private_to_user, write_whole

MAX_KEPT = 4


class ObservationCache:
    """The observations of one directory (``root`` None: nothing kept, every snapshot read)."""

    def __init__(self, root: Path | None) -> None:
        self.directory = root / code_fingerprint() if root is not None else None
        self.hit = False  # whether the last observed() was read from the cache

    def observed(self, data: bytes, read: Callable[[bytes], Observed | None]) -> Observed | None:
        """``read(data)``, or what it gave for these bytes before."""
        self.hit = False
        if self.directory is None:
            return read(data)
        path = self.directory / f"{blob_id(data)}.pickle"
        found = _load(path) if _private_directory(self.directory) else None
        if found is not None:
            self.hit = True
            return found
        made = read(data)
        if made is not None:
            after_output(partial(_write, path, made))
        return made


def _private_directory(directory: Path) -> bool:
    try:
        info = os.stat(directory, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and private_to_user(info)


def _load(path: Path) -> Observed | None:
    try:
        opened = open_private(path)
        if opened is None:
            return None
        with opened as file, collector_paused():  # many small objects, few cycles
            found = pickle.load(file)
    except Exception:  # unreadable, truncated, another format: read the snapshot instead
        return None
    return found if isinstance(found, Observed) else None


_machine_fields = attrgetter(*(f.name for f in fields(Machine)))


class _Pickler(pickle.Pickler):
    """A machine as a call of its class with its fields (the default, a slots dataclass's state, costs a
    Python call per machine when loaded)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is Machine:
            return Machine, _machine_fields(obj)
        return NotImplemented


def _dumps(observed: Observed) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(observed)
    return out.getvalue()


def _write(path: Path, observed: Observed) -> None:
    directory = path.parent
    with contextlib.suppress(Exception):  # a cache: the next plan reads the snapshot again
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private_directory(directory):
            return
        write_whole(path, _dumps(observed))
        kept = sorted(directory.glob("*.pickle"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[MAX_KEPT:]:
            if old != path:
                old.unlink(missing_ok=True)
