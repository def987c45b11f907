"""Palette's catalogue of cluster profiles, read for the uids the bundles name (docs/bundles.md).

The plan's bundle checks (:mod:`reconciler.bundles`) take the catalogue from the observation, whether an
inventory snapshot holds it or Palette answers for it here. Only a 404 says a uid is unknown to Palette:
a read that fails (a 5xx, a timeout, a refused key) or an answer that names no type leaves that uid not
known either way, so its bundle is not checked this pass (Palette's own 400 then speaks, as without a
catalogue).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.model.catalogue import ProfileCatalogue
from reconciler.palette.errors import PaletteError
from reconciler.snapshots import profile_type


class ProfileReader(Protocol):
    def get_cluster_profile(self, uid: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True)
class CatalogueRead:
    """What one read of the catalogue found: the catalogue, and each uid it could not tell, with why."""

    catalogue: ProfileCatalogue
    unread: dict[str, str] = field(default_factory=dict)


def read_catalogue(
    client: ProfileReader, uids: Iterable[str], found: MutableMapping[str, str]
) -> CatalogueRead:
    """Palette's answer for each of ``uids`` (``GET /v1/clusterprofiles/{uid}``). ``found``: types read
    before, which are not asked again (a profile's type never changes); it gains the types read now. A
    uid Palette answered 404 for is asked again next time (it is in the catalogue's ``asked``, without a
    type: unknown to Palette)."""
    types: dict[str, str] = {}
    asked: set[str] = set()
    unread: dict[str, str] = {}
    for uid in sorted(set(uids)):
        kind = found.get(uid)
        if kind is None:
            try:
                answer = client.get_cluster_profile(uid)
            except PaletteError as exc:
                unread[uid] = str(exc)
                continue
            if answer is not None:
                kind = profile_type(answer)
                if kind is None:
                    unread[uid] = "Palette's answer names no infra, add-on or cluster type"
                    continue
                found[uid] = kind
        asked.add(uid)
        if kind is not None:
            types[uid] = kind
    return CatalogueRead(ProfileCatalogue.of(types, asked), unread)
