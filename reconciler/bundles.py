"""Profile Bundles against Palette's catalogue of cluster profiles (pure; docs/bundles.md).

Validation cannot know a cluster profile's type: Palette does. The observation carries the catalogue
(:class:`~reconciler.model.catalogue.ProfileCatalogue`): an inventory snapshot's ``clusterProfiles``, or
Palette's own answers for the uids the bundles name (``GET /v1/clusterprofiles/{uid}``, read by the
observe stage). The plan checks every bundle in use against it before anything is placed, each user
against the catalogue of the target its pool goes to, a workload placed through an Environment against
each of its candidate pools' targets' (:func:`target_catalogues`), one rule for either source:

- every uid is known to Palette;
- an Infrastructure or Fullstack bundle holds exactly one ``infra`` or ``full`` profile, an Application
  bundle none;
- an AIWorkload's Fullstack bundle has the infrastructure profile of the pool it runs on.

A pool or workload whose bundle breaks one of these (for an Environment's workload: in every observed
candidate's target, since no candidate could then deploy it) is rejected with reason ``InvalidSpec`` and
a message naming the bundle and the uid; nothing is sent to Palette for it. It is carried the way an invalid
resource is (:func:`reject_bad_bundles` moves it to ``invalid``), so that what already runs keeps running:
a pool keeps its cluster, a workload its GPUs and attached profiles (invalid is not absent).
A bundle with a uid the observation does not know either way (no catalogue, or a Palette read that
failed) is not checked: a failed read is never "unknown to Palette". Palette's own answer to a create or
attach (400 for an unknown uid) is then what the resource reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from reconciler.model.bundle import APPLICATION, ProfileBundle
from reconciler.model.catalogue import ProfileCatalogue
from reconciler.model.conditions import Reason
from reconciler.model.desired import DesiredState, Identity, SourceRef
from reconciler.model.diagnostics import Diagnostic
from reconciler.model.resources import AIWorkload, ComputePool
from reconciler.profiles import platform_cluster_profiles, profile_bundle
from reconciler.resolve import Routing, Target

BUILDING_TYPES = frozenset({"infra", "full"})  # the types Palette builds an edge-native cluster from
Catalogue = Mapping[str, str]  # cluster profile uid -> infra | add-on | full, of the uids known
User = ComputePool | AIWorkload  # what deploys a bundle
# The catalogues a user's bundle is checked against: one per target it may go to, in candidate order
# (one for a pool or a workload naming its pool; none: not checked). Rejected only when every one refuses.
CatalogueOf = Callable[[User], Sequence[ProfileCatalogue | None]]
CandidatesOf = Callable[[AIWorkload], Sequence[str]]  # an Environment's workload's candidate pool names


def catalogue_of(
    profiles: Iterable[Mapping[str, object]] | None, asked: Iterable[str] | None = None
) -> ProfileCatalogue | None:
    """A snapshot's ``clusterProfiles`` as a catalogue (None when it has none): the whole catalogue, or,
    with ``asked`` (``clusterProfilesAsked``: a recorded live read), what Palette answered for those."""
    if profiles is None and asked is None:
        return None
    types = {str(p["uid"]): str(p.get("type") or "infra") for p in profiles or () if p.get("uid")}
    return ProfileCatalogue.of(types, asked)


def bundle_uids(desired: DesiredState) -> tuple[str, ...]:
    """Every cluster profile uid a bundle of ``desired`` names, sorted: what the observe stage asks
    Palette about (a shard's ``desired`` holds its own namespaces only, so each shard asks about its
    own bundles: docs/bundles.md)."""
    return tuple(sorted({r.uid for b in desired.of_kind(ProfileBundle) for r in b.spec.cluster_profiles}))


def infrastructure_uid(bundle: ProfileBundle, catalogue: Catalogue) -> str | None:
    """The bundle's infra or full profile per the catalogue (the first, when it wrongly has several)."""
    return next((r.uid for r in bundle.spec.cluster_profiles if catalogue.get(r.uid) in BUILDING_TYPES), None)


def bundle_problem(bundle: ProfileBundle, catalogue: Catalogue) -> str | None:
    """Why the bundle cannot be deployed as Palette's catalogue describes its profiles, or None."""
    name = bundle.metadata.name
    refs = bundle.spec.cluster_profiles
    for ref in refs:
        if ref.uid not in catalogue:
            return f"profile bundle {name}: cluster profile {ref.uid} unknown to Palette"
    building = [r.uid for r in refs if catalogue[r.uid] in BUILDING_TYPES]
    kind = bundle.spec.type
    if kind == APPLICATION:
        if building:
            uid = building[0]
            return (
                f"profile bundle {name}: cluster profile {uid} is of type {catalogue[uid]}; an Application "
                "bundle holds add-on profiles only"
            )
        return None
    if not building:
        uids = ", ".join(r.uid for r in refs)
        return (
            f"profile bundle {name}: cluster profile {uids} is of type add-on; a {kind} bundle holds exactly "
            "one infra or full cluster profile"
        )
    if len(building) > 1:
        uid = building[1]
        return (
            f"profile bundle {name}: cluster profile {uid} is a second infra or full profile (after "
            f"{building[0]}); a {kind} bundle holds exactly one"
        )
    if refs[0].uid != building[0]:
        return (
            f"profile bundle {name}: cluster profile {building[0]} is its {catalogue[building[0]]} profile "
            "and comes first in spec.clusterProfiles (infrastructure first, then the add-ons)"
        )
    return None


def infrastructure_mismatch(
    desired: DesiredState, workload: AIWorkload, bundle: ProfileBundle, catalogue: Catalogue
) -> str | None:
    """Why a workload's Fullstack bundle does not fit its pool: its infrastructure profile is not the
    pool's. None for other bundle types, for a workload without a (valid) pool, or when it matches."""
    if bundle.spec.type != "Fullstack" or workload.spec.compute_pool_ref is None:
        return None
    pool = desired.get(ComputePool, workload.metadata.namespace, workload.spec.compute_pool_ref.name)
    uid = infrastructure_uid(bundle, catalogue)
    if pool is None or uid is None:
        return None
    own = [r.uid for r in platform_cluster_profiles(desired, pool)]
    if uid in own:
        return None
    # The pool's first profile is its infrastructure one when the catalogue does not say (docs/bundles.md).
    theirs = next((u for u in own if catalogue.get(u) in BUILDING_TYPES), own[0] if own else None)
    return (
        f"profile bundle {bundle.metadata.name}: infrastructure profile {uid} does not match the one of pool "
        f"{pool.metadata.name} ({theirs or 'none'})"
    )


def target_catalogues(
    routing: Routing, catalogues: Mapping[Target, ProfileCatalogue | None], candidates_of: CandidatesOf
) -> CatalogueOf:
    """Each user's catalogues: the one of the target its pool is routed to, a pool's own or a workload's
    ``computePoolRef`` pool's (a provisioned pool's workload points at it). A workload placed through an
    Environment (its pool is chosen at admission, after these checks) has one per observed target of its
    candidate pools (``candidates_of``), in candidate order, each target once. A pool routed nowhere, or
    to a target not observed, gives none (such a user, or candidate, is not checked)."""

    def observed(namespace: str, names: Sequence[str]) -> list[ProfileCatalogue | None]:
        targets = [routing.target_of_pool((namespace, n)) for n in names]
        seen = [t for t in dict.fromkeys(targets) if t is not None and t in catalogues]
        return [catalogues[t] for t in seen]

    def of(user: User) -> Sequence[ProfileCatalogue | None]:
        ns = user.metadata.namespace
        if isinstance(user, AIWorkload):
            if user.spec.compute_pool_ref is None:
                return observed(ns, candidates_of(user)) if user.spec.environment_ref is not None else ()
            return observed(ns, [user.spec.compute_pool_ref.name])
        return observed(ns, [user.metadata.name])

    return of


def bundle_rejections(desired: DesiredState, catalogue_of_user: CatalogueOf) -> dict[Identity, str]:
    """Every pool and AIWorkload of ``desired`` that a bundle check rejects, with the message. A user is
    rejected when each catalogue ``catalogue_of_user`` gives it refuses its bundle (the message: the
    first's); one that does not know a uid of the bundle either way (or is None), or none at all, leaves
    the user unchecked."""
    verdicts: dict[tuple[str, str, int], str | None] = {}
    out: dict[Identity, str] = {}
    users: list[User] = [*desired.of_kind(ComputePool), *desired.of_kind(AIWorkload)]
    for user in users:
        bundle = profile_bundle(desired, user)
        if bundle is None:
            continue
        problems = [_problem(desired, user, bundle, c, verdicts) for c in catalogue_of_user(user)]
        if problems and all(problems):
            out[(user.kind, user.metadata.namespace, user.metadata.name)] = str(problems[0])
    return out


def _problem(
    desired: DesiredState,
    user: User,
    bundle: ProfileBundle,
    observed: ProfileCatalogue | None,
    verdicts: dict[tuple[str, str, int], str | None],
) -> str | None:
    """Why ``user`` cannot deploy ``bundle`` per one target's catalogue; None when it can or when that
    catalogue does not know every uid of the bundle either way."""
    if observed is None or not all(observed.knows(r.uid) for r in bundle.spec.cluster_profiles):
        return None
    catalogue = observed.by_uid
    key = (bundle.metadata.namespace, bundle.metadata.name, id(observed))
    if key not in verdicts:
        verdicts[key] = bundle_problem(bundle, catalogue)
    problem = verdicts[key]
    if problem is None and isinstance(user, AIWorkload):
        problem = infrastructure_mismatch(desired, user, bundle, catalogue)
    return problem


def reject_bad_bundles(desired: DesiredState, rejected: Mapping[Identity, str]) -> DesiredState:
    """``desired`` with every pool and workload in ``rejected`` (:func:`bundle_rejections`) moved to
    ``invalid`` (reason InvalidSpec, the diagnostic at the resource's document). Unchanged when none is."""
    if not rejected:
        return desired
    invalid = dict(desired.invalid)
    for identity, message in rejected.items():
        loaded = desired.resources[identity]
        source: SourceRef = loaded.source
        kind, ns, name = identity
        diagnostic = Diagnostic(
            source.file,
            source.line,
            source.column,
            message,
            kind=kind,
            namespace=ns,
            name=name,
            field="spec.profileBundleRef",
            reason=Reason.INVALID_SPEC,
        )
        invalid[identity] = [*invalid.get(identity, []), diagnostic]
    return replace(
        desired,
        resources={k: v for k, v in desired.resources.items() if k not in rejected},
        invalid=invalid,
    )
