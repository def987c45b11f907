"""Git trees built in process: a file map turned into blobs and trees with their ids, nothing written
(the status branch's commits are made of them; :mod:`reconciler.source.status_store`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

_FILE_MODE = b"100644"
_TREE_MODE = b"40000"


@dataclass
class Dir:
    files: dict[str, bytes] = field(default_factory=dict)
    dirs: dict[str, Dir] = field(default_factory=dict)


def split_path(path: str) -> list[str]:
    """The components of a status file path; ValueError for anything git or a reader would trip on."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\0" in path:
        raise ValueError(f"invalid status file path {path!r}")
    for part in parts:
        if part in ("", ".", "..") or part.lower() == ".git":
            raise ValueError(f"invalid status file path {path!r}")
    return parts


def build_dirs(files: Mapping[str, bytes], skipped: list[str] | None = None) -> Dir:
    """The directory tree of ``files``. A path git or a reader would trip on (``..``, ``.git``, empty
    components, a file that is also a directory) is left out and named in ``skipped``: one bad path
    never keeps the other files from being written. Without ``skipped`` it raises ValueError."""
    root = Dir()
    for path in sorted(files):
        try:
            parts = split_path(path)
            node = root
            for part in parts[:-1]:
                if part in node.files:
                    raise ValueError(f"status path {path!r} runs through the file {part!r}")
                node = node.dirs.get(part) or node.dirs.setdefault(part, Dir())
            if parts[-1] in node.dirs:
                raise ValueError(f"status path {path!r} is also a directory")
        except ValueError:
            if skipped is None:
                raise
            skipped.append(path)
            continue
        node.files[parts[-1]] = bytes(files[path])
    return root


def hash_tree(
    node: Dir,
    objects: dict[str, tuple[bytes, bytes]],
    paths: dict[str, str] | None = None,
    prefix: str = "",
) -> bytes:
    """The binary id of ``node``'s tree; every blob and tree of it is added to ``objects``
    (hex id -> (kind, content)), so that they can be written only when a commit needs them, and each
    file's blob id to ``paths`` (path -> hex id) when given."""
    entries: list[tuple[bytes, bytes, bytes]] = []  # (sort key, mode, name)
    ids: dict[bytes, bytes] = {}
    for name, data in node.files.items():
        raw = name.encode()
        ids[raw] = hash_object(b"blob", data, objects)
        if paths is not None:
            paths[prefix + name] = ids[raw].hex()
        entries.append((raw, _FILE_MODE, raw))
    for name, child in node.dirs.items():
        raw = name.encode()
        ids[raw] = hash_tree(child, objects, paths, f"{prefix}{name}/")
        entries.append((raw + b"/", _TREE_MODE, raw))
    entries.sort()
    body = b"".join(mode + b" " + raw + b"\0" + ids[raw] for _key, mode, raw in entries)
    return hash_object(b"tree", body, objects)


def hash_object(kind: bytes, data: bytes, objects: dict[str, tuple[bytes, bytes]]) -> bytes:
    hasher = hashlib.sha1(b"%s %d\0" % (kind, len(data)), usedforsecurity=False)
    hasher.update(data)  # not header + data: a 60 MB snapshot would be copied once more
    digest = hasher.digest()
    objects[digest.hex()] = (kind, data)
    return digest
