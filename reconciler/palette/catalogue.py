"""Palette's catalogue of cluster profiles, read for the uids the bundles name (docs/bundles.md).

The plan's bundle checks (:mod:`reconciler.bundles`) take the catalogue from the observation, whether an
inventory snapshot holds it or Palette answers for it here. Only a 404 says a uid is unknown to Palette:
a read that fails (a 5xx, a timeout, a refused key) or an answer that names no type leaves that uid not
known either way, so its bundle is not checked this pass (Palette's own 400 then speaks, as without a
catalogue).

What a process remembers between passes (:class:`ProfileMemory`, one per target): each answer with the
time it was read, asked again once it is :data:`REASK_SECONDS` old or as soon as a write that used the
uid failed (a profile deleted since then shows as a 404, not only as Palette's 400 on every create), and
the reason each unread uid was last logged for, so that the log says it once per change of answer rather
than every pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.model.catalogue import ProfileCatalogue
from reconciler.palette.errors import PaletteError
from reconciler.snapshots import profile_type

REASK_SECONDS = 3600.0  # an answer (a type, or none) is asked again once this old (docs/palette-requests.md)
TYPELESS = "Palette's answer names no infra, add-on or cluster type"


class ProfileReader(Protocol):
    def get_cluster_profile(self, uid: str) -> dict[str, Any] | None: ...


@dataclass(slots=True)
class ProfileMemory:
    """One target's catalogue answers kept between passes. ``answers``: uid -> (type, or None for an
    answer naming no type; when it was read); ``logged``: uid -> why it was last reported unread."""

    answers: dict[str, tuple[str | None, float]] = field(default_factory=dict)
    logged: dict[str, str] = field(default_factory=dict)

    def expire(self, uids: Iterable[str]) -> None:
        """Ask ``uids`` again next pass (a create, update or attach that used them failed)."""
        for uid in uids:
            self.answers.pop(uid, None)


@dataclass(frozen=True, slots=True)
class CatalogueRead:
    """What one read of the catalogue found: the catalogue, each uid it could not tell with why, and of
    those the ones whose reason was not reported before (``news``: what the pass logs)."""

    catalogue: ProfileCatalogue
    unread: dict[str, str] = field(default_factory=dict)
    news: dict[str, str] = field(default_factory=dict)


def read_catalogue(
    client: ProfileReader, uids: Iterable[str], memory: ProfileMemory, now: float
) -> CatalogueRead:
    """Palette's answer for each of ``uids`` (``GET /v1/clusterprofiles/{uid}``) at time ``now``. An
    answer in ``memory`` younger than :data:`REASK_SECONDS` is not asked again; a 404 or a failure is
    asked again next pass. A failed re-ask of a uid whose type is known keeps that type (a failed read
    never makes a uid unknown); a 404 drops it (unknown to Palette). ``memory`` keeps only ``uids``."""
    wanted = sorted(set(uids))
    types: dict[str, str] = {}
    asked: set[str] = set()
    unread: dict[str, str] = {}
    for uid in wanted:
        kept = memory.answers.get(uid)
        if kept is None or now - kept[1] >= REASK_SECONDS:
            try:
                answer = client.get_cluster_profile(uid)
            except PaletteError as exc:
                if kept is None or kept[0] is None:
                    unread[uid] = str(exc)
                    continue
            else:
                if answer is None:
                    memory.answers.pop(uid, None)
                    asked.add(uid)
                    continue
                kept = (profile_type(answer), now)
                memory.answers[uid] = kept
        if kept[0] is None:
            unread[uid] = TYPELESS
            continue
        asked.add(uid)
        types[uid] = kept[0]
    return CatalogueRead(ProfileCatalogue.of(types, asked), unread, _news(memory, wanted, unread))


def _news(memory: ProfileMemory, wanted: list[str], unread: dict[str, str]) -> dict[str, str]:
    """The unread uids whose reason is new since it was last logged; ``memory`` forgets the answers and
    reasons of uids no longer wanted, and the reason of a uid read since (a later failure is news)."""
    news = {uid: why for uid, why in unread.items() if memory.logged.get(uid) != why}
    memory.logged = dict(unread)
    keep = set(wanted)
    memory.answers = {uid: kept for uid, kept in memory.answers.items() if uid in keep}
    return news
