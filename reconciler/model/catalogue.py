"""Palette's catalogue of cluster profiles as an observation shows it (pure; docs/bundles.md).

Two sources give it. An inventory snapshot's ``clusterProfiles`` is the whole catalogue: a uid it does
not list is unknown to Palette. Palette itself is asked about the uids the bundles name
(``GET /v1/clusterprofiles/{uid}``): a uid it answered for has its type, one it answered 404 for is
unknown to Palette, and one whose read failed (or was never asked) is not known either way, never
"unknown to Palette".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PROFILE_TYPES = ("infra", "add-on", "full")  # the types a catalogue knows (Palette's "cluster" is "full")


@dataclass(frozen=True, slots=True)
class ProfileCatalogue:
    """Cluster profile types by uid (``infra | add-on | full``), and what the observation knows.

    ``asked``: None for a whole catalogue (a snapshot's); else the uids Palette answered for, found or
    404 (a live read, or a recorded one): any other uid is not known either way."""

    types: tuple[tuple[str, str], ...] = ()  # (uid, type), sorted by uid
    asked: frozenset[str] | None = None

    @classmethod
    def of(cls, types: Mapping[str, str], asked: Iterable[str] | None = None) -> ProfileCatalogue:
        known = frozenset(asked) | frozenset(types) if asked is not None else None
        return cls(tuple(sorted(types.items())), known)

    @property
    def by_uid(self) -> dict[str, str]:
        return dict(self.types)

    @property
    def missing(self) -> tuple[str, ...]:
        """The uids Palette answered 404 for (of a partial catalogue; none for a whole one)."""
        found = self.by_uid
        return tuple(sorted(u for u in self.asked or () if u not in found))

    def knows(self, uid: str) -> bool:
        """Whether the observation says what ``uid`` is: a type, or unknown to Palette."""
        return self.asked is None or uid in self.asked
