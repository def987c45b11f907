"""The status branch's inventory snapshots, pure: no git, no network, no clock (a memo of each host's
encoded text makes a re-render after a few changes cheap; it changes no result).

Each Palette target the reconciler manages has one file, ``inventory/<host>-<projectUid or "tenant">.json``,
holding the last inventory observed there in the snapshot format of section 5. It keeps only what
discovery and planning read, so that a field nobody reads (a heartbeat, a modification time, an agent
version) never changes the bytes and never makes a status commit:

- hosts: exactly the fields :func:`reconciler.edgehost.read_host` reads
  (:func:`~reconciler.host_items.host_item` writes them);
- clusters: the managed clusters only (:func:`reconciler.snapshots.managed_clusters` decides which),
  each with exactly what that function reads: uid, name, labels, state, cloud config uid and project;
- the cluster profile catalogue, when given: ``{uid, name, type}``; for one read from Palette, the uids
  it was asked about too (``clusterProfilesAsked``).

Entries are sorted by uid and written as JSON with sorted keys, one value per line, so a diff of two
snapshots shows which hosts changed. ``plan --from-status`` reads them back with :func:`read_snapshots`,
mapping files to targets through the ``targets`` of ``reconciler.yaml``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from reconciler.edgehost import HostFacts, read_host
from reconciler.host_items import host_item
from reconciler.model.observed import ManagedCluster
from reconciler.snapshots import Snapshot, managed_clusters, parse_snapshot
from reconciler.status.render import RECONCILER_FILE, parse_previous, parse_recorded

INVENTORY_DIR = "inventory"
TENANT = "tenant"

TargetKey = tuple[str, str | None]  # (url, projectUid or None for the whole tenant)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SnapshotError(ValueError):
    """No ``reconciler.yaml`` on the status branch, or an unreadable snapshot (the message names the file)."""


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("_") or "_"


def target_file(url: str, project_uid: str | None) -> str:
    """The snapshot path of a target: ``inventory/<host>-<projectUid or "tenant">.json``.

    ``<host>`` is the URL's host name in lower case; an explicit port is appended after ``_``
    (``http://127.0.0.1:8080`` -> ``127.0.0.1_8080``) and so is a path (``/`` becomes ``_``). Any
    character other than letters, digits, ``.``, ``_`` and ``-`` becomes ``_``. The scheme is not part
    of the name: the file is found through ``reconciler.yaml``'s targets, never parsed back.
    """
    parts = urlsplit(url if "://" in url else "//" + url)
    name = (parts.hostname or url).lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None:
        name += f"_{port}"
    path = parts.path.strip("/")
    if path:
        name += "_" + path
    project = _safe(project_uid) if project_uid else TENANT
    return f"{INVENTORY_DIR}/{_safe(name)}-{project}.json"


def _cluster_item(cluster: ManagedCluster) -> dict[str, Any]:
    """A cluster as ``GET /v1/spectroclusters/{uid}`` shows it, with only what ``managed_clusters`` reads."""
    metadata: dict[str, Any] = {"uid": cluster.uid, "name": cluster.name, "labels": dict(cluster.labels)}
    if cluster.project_uid is not None:
        metadata["annotations"] = {"projectUid": cluster.project_uid}
    item: dict[str, Any] = {"metadata": metadata, "status": {"state": cluster.state}}
    if cluster.cloud_config_uid is not None:
        item["spec"] = {"cloudConfigRef": {"uid": cluster.cloud_config_uid}}
    return item


def _profile_item(profile: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "uid": str(profile.get("uid") or ""),
        "name": str(profile.get("name") or ""),
        "type": str(profile.get("type") or "infra"),
    }


def render_snapshot(
    edge_hosts: Iterable[Mapping[str, Any] | HostFacts],
    clusters: Iterable[Mapping[str, Any]],
    cluster_profiles: Iterable[Mapping[str, Any]] = (),
    asked: Iterable[str] | None = None,
) -> bytes:
    """The bytes of one target's ``inventory/*.json``: hosts as the search returns them, clusters in
    either shape Palette returns them (search summaries or ``GET``). The same facts give the same bytes.

    A host without a uid is left out (no snapshot can hold it); a uid seen twice (a page boundary that
    moved during the search) is kept once, as first seen. Without a catalogue, ``clusterProfiles`` is
    left out (the emulator then accepts any profile uid, as for any snapshot without one). ``asked``
    (a live read of the catalogue): the uids Palette answered for, written as ``clusterProfilesAsked``;
    ``cluster_profiles`` are then the ones it has (the others asked it answered 404 for).
    """
    facts_by_uid: dict[str, HostFacts] = {}
    for raw in edge_hosts:
        facts = read_host(raw)
        if facts is not None and facts.uid and facts.uid not in facts_by_uid:
            facts_by_uid[facts.uid] = facts
    managed = {c.uid: _cluster_item(c) for c in managed_clusters(clusters, list(facts_by_uid.values()))}
    sections: list[tuple[bytes, list[bytes]]] = []
    profiles = sorted((_profile_item(p) for p in cluster_profiles), key=lambda p: p["uid"])
    if profiles:
        sections.append((b"clusterProfiles", [_item_text(p) for p in profiles]))
    if asked is not None:
        sections.append((b"clusterProfilesAsked", [_item_text(u) for u in sorted(set(asked))]))
    sections.append((b"clusters", [_item_text(managed[uid]) for uid in sorted(managed)]))
    sections.append((b"edgeHosts", _host_texts([facts_by_uid[uid] for uid in sorted(facts_by_uid)])))
    # One join into the final bytes: no intermediate copy of a 60 MB document.
    pieces: list[bytes] = [b"{\n"]
    for index, (key, texts) in enumerate(sections):
        pieces.append(b' "%s": ' % key)
        if texts:
            pieces.append(b"[\n")
            for position, text in enumerate(texts):
                pieces.extend((b",\n", text) if position else (text,))
            pieces.append(b"\n ]")
        else:
            pieces.append(b"[]")
        pieces.append(b",\n" if index < len(sections) - 1 else b"\n}\n")
    return b"".join(pieces)


def _item_text(item: Mapping[str, Any] | str) -> bytes:
    """One entry of a snapshot's list, exactly as ``json.dumps(doc, indent=1, sort_keys=True)`` writes
    it there (two levels deep), in UTF-8: the document is assembled from these, so only changed hosts
    are encoded again."""
    text = json.dumps(item, indent=1, sort_keys=True, ensure_ascii=False)
    return ("  " + text.replace("\n", "\n  ")).encode("utf-8")


# The text of each host last rendered, by uid, with the facts it was rendered from: a host whose facts
# did not change is not encoded again (rendering 100,000 hosts otherwise costs seconds per change).
_HOST_TEXTS: dict[str, tuple[HostFacts, bytes]] = {}


def _host_texts(hosts: list[HostFacts]) -> list[bytes]:
    texts: list[bytes] = []
    for facts in hosts:
        known = _HOST_TEXTS.get(facts.uid)
        if known is None or (known[0] is not facts and known[0] != facts):
            known = (facts, _item_text(host_item(facts)))
            _HOST_TEXTS[facts.uid] = known
        texts.append(known[1])
    if len(_HOST_TEXTS) > 4 * len(hosts) + 10_000:  # hosts long gone: keep the ones just rendered
        current = {facts.uid for facts in hosts}
        for uid in [uid for uid in _HOST_TEXTS if uid not in current]:
            del _HOST_TEXTS[uid]
    return texts


_HOSTS_MARK = b'\n "edgeHosts": [\n'
_HOSTS_END = b"\n ]\n}\n"
_ITEM_START = b",\n  {"


def read_snapshot(data: bytes) -> tuple[Snapshot, list[Mapping[str, Any] | HostFacts]]:
    """One snapshot file read back, and its hosts: a host whose text is what was last rendered for it
    (by :func:`render_snapshot` in this process) comes back as those facts, not parsed again, so that
    reading 100,000 hosts costs what changed since the last render, not a 60 MB parse. The snapshot's
    ``edge_hosts`` are left empty (the hosts are the second value). Raises :class:`SnapshotError`.

    A file in another layout (written by an older version, or by hand) is parsed whole."""
    start = data.find(_HOSTS_MARK)
    try:
        if start < 0 or not data.endswith(_HOSTS_END):
            whole = parse_snapshot(data.decode("utf-8"), json_first=True)
            hosts: list[Mapping[str, Any] | HostFacts] = list(whole.edge_hosts)
            return replace(whole, edge_hosts=[]), hosts
        head = parse_snapshot((data[:start] + b'\n "edgeHosts": []\n}\n').decode("utf-8"), json_first=True)
        known = {text: facts for facts, text in _HOST_TEXTS.values()}
        body = data[start + len(_HOSTS_MARK) : len(data) - len(_HOSTS_END)]
        hosts = []
        for index, piece in enumerate(body.split(_ITEM_START)):
            text = piece if index == 0 else b"  {" + piece
            facts = known.get(text)
            hosts.append(facts if facts is not None else _host_entry(text, index))
        return head, hosts
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError(str(exc)) from None


def _host_entry(text: bytes, index: int) -> Mapping[str, Any]:
    item = json.loads(text)
    meta = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(meta, dict) or not meta.get("uid"):
        raise ValueError(f"snapshot edgeHosts[{index}] has no metadata.uid")
    entry: dict[str, Any] = item
    return entry


def recorded_palette(files: Mapping[str, bytes]) -> str | None:
    """The ``palette`` of ``reconciler.yaml``: the endpoint ``run --palette`` pointed every namespace at.

    ``plan --from-status`` routes with it, so it routes exactly as that ``run`` did (without it a plan
    would route to the Settings' ``hostUrl``, where ``run`` never went). An extension of the
    status branch's format (docs/status-branch.md):
    :func:`reconciler.status.render.reconciler_document` has to write it for it to be used.
    """
    data = files.get(RECONCILER_FILE)
    doc = parse_previous({RECONCILER_FILE: data}).get(RECONCILER_FILE) if data is not None else None
    value = doc.get("palette") if doc else None
    return value.rstrip("/") if isinstance(value, str) and value else None


def read_snapshots(files: Mapping[str, bytes]) -> dict[TargetKey, Snapshot]:
    """The last observed inventory of every target ``reconciler.yaml`` lists, by ``(url, projectUid)``.

    A target whose file is absent is absent from the result (the caller says what it needs);
    ``reconciler.yaml`` missing, or a snapshot that does not parse, is a :class:`SnapshotError` naming
    the file. ``reconciler.yaml`` is read by :func:`reconciler.status.render.parse_recorded`, the reader
    the controller uses.
    """
    if RECONCILER_FILE not in files:
        raise SnapshotError(
            f"{RECONCILER_FILE} is missing from the status branch (has a pass committed yet?)"
        )
    found: dict[TargetKey, Snapshot] = {}
    for url, project in parse_recorded(files).targets:
        path = target_file(url, project)
        data = files.get(path)
        if data is None:
            continue
        try:
            found[(url, project)] = parse_snapshot(data.decode("utf-8"), json_first=True)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{path}: {exc}") from None
    return found
