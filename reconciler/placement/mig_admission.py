"""MIG admission of one pool for one pass: the ``MigPlanner`` that ``admit_pool`` drives (docs/mig.md).

Pure. Built from what the plan already has for the pool::

    layouts = parse_mig_layouts(recorded_pool_status_mig, where="<status file>: mig")
    planner = PoolMigPlanner(pool, layouts, previous, workloads)   # the lists admit_pool gets too
    result = admit_pool(pool, workloads, previous, planner)
    outcome = planner.finish(result)     # pools[].mig, migConfig, usage, machine pools, workloads[].mig

Rules it adds to admission's:

- A GPU is MIG-capable when its unit says so (``gpu_units``: the agent's ``migCapable`` and the catalogue)
  and the catalogue has an entry for its family and memory. Without ``mig.strategy: mixed`` every GPU
  is whole: recorded layouts are dropped and previous instances cannot be held.
- Recorded layouts are kept when they are valid layouts of the GPU's catalogue type, the GPU is still in
  the pool and no earlier admission binds it whole; anything else is dropped with a note.
- Frozen GPUs: the GPUs where a workload admitted in an earlier pass, and still in the pool this pass
  (neither removed nor suspended), holds an instance, by the previous admissions and the recorded
  layout. mig-parted re-creates every instance of a GPU it reconfigures and skips the GPUs whose
  configuration already matches, so only these keep their layout: the other GPUs of the same host may
  switch to MIG, be re-laid out or return to whole. Fixed for the pass, so the outcome does not depend
  on the order admission visits workloads in. There new instances only take free instances of the
  existing layout.
- Instances start the pass free; ``hold`` binds a previous admission's instances back (all or nothing).
- A layout no one holds on a GPU that is not frozen is not in MIG mode for admission: its GPU is offered
  whole in the same pass (as a removed workload's GPUs are). The planner may still reuse its free
  instances (reusing an existing layout switches no GPU); if a whole request takes it, the layout goes.
- A request's instances are placed per family (profile names repeat across families) with
  ``plan_mig_admission``, on one host when admission names the hosts of a replica; refusals map to
  ``MIGUnsupported``, ``PoolCapacityExceeded`` and ``NoFittingLayout`` with messages counting what a new
  request can use, naming the GPUs held and the growth that would unblock it.
- The pass's new MIG demand (with whole GPUs beside the instances or not) is planned jointly at its
  first placement (``mig_admission_joint``, one host per replica); its replicas then take what that plan
  gave them (a replica with whole GPUs offered another host than its planned one first declines it),
  the rest is planned as above.
  The pool's pass (``mig_pool.admit_mig_pool``) runs this planner with ``joint=False`` first and keeps
  the joint pass only when it is no worse (``may_plan_jointly``, ``at_fewest_gpus``, ``joint_followed``);
  the one-at-a-time planner records the GPUs as its first placement of the new demand saw them, so the
  joint plan is made from it (``joint_plan``) and handed to the joint pass's planner (``plan=``).
- At the end: ``release_idle_gpus`` (not frozen GPUs), ``repad`` of the GPUs laid out in the pass, then
  the outputs, with the hosts whose GPUs are re-laid out (``relayout``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import MigGpuType, catalogue_entry
from reconciler.model.pools import MigRequest, WorkloadKey, WorkloadRequest
from reconciler.placement.admission_types import PoolAdmission, PoolState, PreviousAdmission
from reconciler.placement.mig import MigInstance as Slot
from reconciler.placement.mig import (
    MigPlan,
    PoolGpu,
    frozen_gpus,
    plan_mig_admission,
    release_idle_gpus,
    stranded_slices,
    usable_slices,
)
from reconciler.placement.mig import MigRefusal as PlanRefusal
from reconciler.placement.mig_admission_joint import MAX_GPUS, Defer, JointPlan, new_demand, plan_joint
from reconciler.placement.mig_joint import fewest
from reconciler.placement.mig_layouts import (
    GpuLayout,
    kept_layouts,
)
from reconciler.placement.mig_outcome import (
    PoolMigOutcome,
    outcome_of,
    repadded,
)
from reconciler.placement.mig_request import growth_type, plan_on_one_host, refusal
from reconciler.placement.seam import MigPlacement, MigRefusal
from reconciler.placement.units import GpuRef, GpuUnit, MigInstance

# The recorded layouts and the outcome live in their own modules; their names are importable from here.
__all__ = ["WHOLE", "PoolMigPlanner"]

_Key = tuple[str, int]  # a GPU: (host uid, device index)
WHOLE = "(whole)"  # what the layout planner sees as the holder of a GPU bound whole


def _label(key: WorkloadKey) -> str:
    return f"{key[0]}/{key[1]}"


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    gpus: Mapping[_Key, PoolGpu]
    told: frozenset[_Key]
    untold: frozenset[_Key]
    released: Mapping[str, tuple[tuple[_Key, str, int], ...]]
    version: int


class PoolMigPlanner:
    """The ``MigPlanner`` of one pool for one pass (see the module docstring)."""

    def __init__(
        self,
        pool: PoolState,
        layouts: Iterable[GpuLayout] = (),
        previous: Sequence[PreviousAdmission] = (),
        workloads: Sequence[WorkloadRequest] = (),
        *,
        joint: bool = True,
        plan: JointPlan | None = None,
    ) -> None:
        self._pool = pool
        self._mixed = pool.mig_strategy == "mixed"
        # GPUs are keyed (host uid, index) inside: tuples hash fast, and a pass looks them up a lot.
        self._units: dict[_Key, GpuUnit] = {
            (u.host_uid, u.index): u for u in sorted(pool.gpus, key=lambda u: u.order)
        }
        self._key_of = {id(u): key for key, u in self._units.items()}  # admission hands these units back
        self._family_keys: dict[GpuFamily, list[_Key]] = {}
        for key, unit in self._units.items():
            self._family_keys.setdefault(unit.family, []).append(key)
        self._names = {u.host_uid: u.host_name for u in self._units.values()}
        types: dict[_Key, MigGpuType | None] = {
            ref: catalogue_entry(u.family, u.memory_bytes, mig_capable=u.mig_capable) if self._mixed else None
            for ref, u in self._units.items()
        }
        active = {_label(r.key) for r in workloads if not r.removed and not r.suspended}
        self._demand: dict[GpuFamily, Counter[str]] = {}
        for request in workloads:
            if not request.removed and not request.suspended:
                for mig in request.mig:
                    self._demand.setdefault(mig.family, Counter())[mig.profile] += mig.count
        earlier = [p for p in sorted(previous, key=lambda p: p.key) if _label(p.key) in active]
        whole_of = {(ref.host_uid, ref.index): _label(p.key) for p in earlier for ref in p.gpus}
        owner_of = {(i.host_uid, i.gpu, i.profile, i.start): _label(p.key) for p in earlier for i in p.mig}
        recorded, notes = kept_layouts(pool, self._units.keys(), layouts, types, whole_of, owner_of, active)
        self._before = {
            ref: None if ref not in recorded else frozenset((s.profile, s.start) for s in recorded[ref])
            for ref in self._units
        }
        start = [
            PoolGpu(u.host_uid, u.index, types[ref], whole_of.get(ref), recorded.get(ref), u.host_name)
            for ref, u in self._units.items()
        ]
        frozen = frozen_gpus(start, active) if self._mixed else frozenset()
        self._frozen = frozenset(GpuRef(*key) for key in frozen)
        # Nothing is bound at the start of the pass: ``hold`` binds instances back, and which GPUs are
        # bound whole is what admission says at each ``place``. Frozen for the pass, so the outcome does
        # not depend on the order admission visits workloads in.
        self._gpus: dict[_Key, PoolGpu] = {
            (g.host, g.index): replace(
                g,
                bound=None,
                instances=None
                if g.instances is None
                else tuple(replace(s, workload=None) for s in g.instances),
                frozen=(g.host, g.index) in frozen,
            )
            for g in start
        }
        self._told: set[_Key] = set()  # GPUs admission has been told are in MIG mode
        self._untold = {k for k, g in self._gpus.items() if g.instances is not None}  # the others in MIG mode
        self._bound_views: dict[_Key, tuple[PoolGpu, PoolGpu]] = {}
        self._growth_types: dict[tuple[GpuFamily, tuple[str, ...]], MigGpuType | None] = {}
        self._version = self._next_version = 0  # a new version whenever the layouts or bindings change
        self._released: dict[str, list[tuple[_Key, str, int]]] = {}  # instances released this pass
        self._refused: dict[tuple[Any, ...], tuple[int, frozenset[_Key], MigRefusal]] = {}
        # The pass's new MIG demand, planned jointly at the first placement of one of its workloads.
        self._new = new_demand(workloads, {_label(p.key) for p in earlier if p.mig}) if self._mixed else []
        self._new_labels = {d.label for d in self._new}
        self._planning = joint  # False: the GPUs the joint plan would see are only recorded (``joint_plan``)
        self._given = plan  # the plan of the same GPUs, made from a pass one at a time
        self._joint: JointPlan | None = None
        self._joint_views: dict[GpuFamily, list[PoolGpu]] | None = None
        self.joint_followed = False  # a replica took what the joint plan gave it (``mig_pool`` compares)
        self.notes = tuple(notes)

    def _changed(self) -> None:
        self._next_version += 1
        self._version = self._next_version

    # -- the MigPlanner protocol --

    def hold(self, key: WorkloadKey, instances: Sequence[MigInstance]) -> bool:
        if not instances:
            return True
        if not self._mixed:
            return False
        label = _label(key)
        changed: dict[_Key, list[Slot]] = {}
        for inst in instances:
            ref = (inst.host_uid, inst.gpu)
            gpu = self._gpus.get(ref)
            if gpu is None or gpu.instances is None:
                return False
            slots = changed.setdefault(ref, list(gpu.instances))
            free = [
                k
                for k, s in enumerate(slots)
                if (s.start, s.profile, s.workload) == (inst.start, inst.profile, None)
            ]
            if not free:
                return False
            slots[free[0]] = replace(slots[free[0]], workload=label)
        for ref, slots in changed.items():
            self._gpus[ref] = replace(self._gpus[ref], instances=tuple(slots))
        self._changed()
        return True

    def release(self, key: WorkloadKey) -> None:
        label = _label(key)
        for ref, gpu in self._gpus.items():
            if gpu.instances is not None and any(s.workload == label for s in gpu.instances):
                mine = [(ref, s.profile, s.start) for s in gpu.instances if s.workload == label]
                self._released.setdefault(label, []).extend(mine)
                freed = tuple(replace(s, workload=None) if s.workload == label else s for s in gpu.instances)
                self._gpus[ref] = replace(gpu, instances=freed)
                self._changed()

    def _keep_released(
        self, label: str, family: GpuFamily, wanted: dict[str, int], hosts: Sequence[str] | None
    ) -> tuple[list[MigInstance], Sequence[str] | None]:
        """A workload placed again (its request changed) first takes back the free instances it held
        that its request still asks for: what runs is not moved. Returns them and the hosts left for the
        rest (a replica's instances stay on one host)."""
        mine = [
            (ref, profile, start)
            for ref, profile, start in self._released.get(label, ())
            if self._units[ref].family == family and wanted.get(profile, 0) > 0
        ]
        on = {ref[0] for ref, _, _ in mine}
        if not mine or (hosts is not None and (len(on) > 1 or not on <= set(hosts))):
            return [], hosts
        kept: list[MigInstance] = []
        for ref, profile, start in mine:
            gpu = self._gpus[ref]
            slots = list(gpu.instances or ())
            free = [
                k for k, s in enumerate(slots) if (s.profile, s.start, s.workload) == (profile, start, None)
            ]
            if not free or wanted[profile] == 0:
                continue
            slots[free[0]] = replace(slots[free[0]], workload=label)
            self._gpus[ref] = replace(gpu, instances=tuple(slots))
            wanted[profile] -= 1
            kept.append(MigInstance(ref[0], ref[1], profile, start))
        return kept, (sorted(on) if hosts is not None and kept else hosts)

    def mig_mode(self) -> frozenset[GpuRef]:
        keys = {
            key
            for key, gpu in self._gpus.items()
            if gpu.instances is not None
            and (gpu.frozen or any(s.workload is not None for s in gpu.instances))
        }
        self._tell(keys)
        return frozenset(GpuRef(*key) for key in keys)

    def free_slices(self) -> dict[tuple[GpuFamily, str], int]:
        """Memory slices a new request could still use on the GPUs admission knows are in MIG mode, per
        family and host uid (the others are free whole GPUs, counted by admission): a bound for its
        search."""
        room: dict[tuple[GpuFamily, str], int] = {}
        for key in self._told:
            gpu = self._gpus[key]
            if gpu.instances is not None:
                where = (self._units[key].family, key[0])
                room[where] = room.get(where, 0) + usable_slices(gpu)
        return room

    def _tell(self, keys: Iterable[_Key]) -> None:
        self._told.update(keys)
        self._untold.difference_update(keys)

    def checkpoint(self) -> object:
        """The planner's state, to :meth:`rollback` to (a later replica of the workload failed)."""
        released = {label: tuple(mine) for label, mine in self._released.items()}
        return _Checkpoint(
            dict(self._gpus), frozenset(self._told), frozenset(self._untold), released, self._version
        )

    def rollback(self, state: object) -> None:
        """Back to a :meth:`checkpoint`: every placement since is undone."""
        assert isinstance(state, _Checkpoint)
        self._gpus, self._version = dict(state.gpus), state.version
        self._told, self._untold = set(state.told), set(state.untold)
        self._released = {label: list(mine) for label, mine in state.released.items()}

    def place(
        self,
        key: WorkloadKey,
        requests: Sequence[MigRequest],
        whole_free: Sequence[GpuUnit],
        hosts: Sequence[str] | None = None,
    ) -> MigPlacement | MigRefusal:
        """Bind every requested instance at once, switching GPUs of ``whole_free`` to MIG mode if needed.
        ``hosts`` (uids, in order of preference): all the instances of a family on ONE of them (one
        replica): the host where the planner places them best, ties to the earlier host."""
        label = _label(key)
        wanted: dict[GpuFamily, dict[str, int]] = {}
        for request in requests:
            if request.count > 0:
                per = wanted.setdefault(request.family, {})
                per[request.profile] = per.get(request.profile, 0) + request.count
        if not self._mixed:
            return MigRefusal(
                Reason.MIG_UNSUPPORTED, f"pool {self._pool.label} has mig.strategy {self._pool.mig_strategy}"
            )
        key_of = self._key_of
        free = frozenset(key_of.get(id(u)) or (u.host_uid, u.index) for u in whole_free)
        self._forget_taken_whole(free)
        # The same request in the same state gets the same refusal: retries of pending workloads after a
        # pass's admissions cost nothing until something changes.
        asked = (label, tuple(sorted((f, tuple(sorted(p.items()))) for f, p in wanted.items())))
        memo = (*asked, None if hosts is None else tuple(hosts))
        cached = self._refused.get(memo)
        if cached is not None and cached[0] == self._version and cached[1] == free:
            return cached[2]
        if self._joint_views is None and label in self._new_labels:
            self._joint_views = self._views_for_joint(free)
            if self._planning:
                given = self._given
                self._joint = given if given is not None else plan_joint(self._new, self._joint_views)
        followed = None if self._joint is None else self._joint.follow(label, wanted, self._gpus, free, hosts)
        if isinstance(followed, Defer):
            named = self._names.get(followed.host, followed.host)
            return MigRefusal(Reason.NO_FITTING_LAYOUT, f"{label}: planned on host {named} in this pass")
        if followed is not None:
            changed, instances, switched = followed
            self.joint_followed = True
            self._gpus.update(changed)
            self._tell(switched)
            self._changed()
            return MigPlacement(tuple(sorted(instances)), tuple(GpuRef(*key) for key in sorted(switched)))
        before = dict(self._gpus)
        bindings: list[MigInstance] = []
        switched = []
        for family, per_family in sorted(wanted.items()):
            refs = self._family_keys.get(family, [])
            profiles = dict(per_family)
            kept, where = self._keep_released(label, family, profiles, hosts)
            bindings.extend(kept)
            if not any(profiles.values()):
                continue
            outcome = (
                self._plan(refs, profiles, label, free)
                if where is None
                else self._plan_on_one_host(refs, where, profiles, label, free)
            )
            if isinstance(outcome, PlanRefusal):
                self._gpus = before
                refusal = self._refusal(family, profiles, outcome, refs, free, where)
                self._refused[memo] = (self._version, free, refusal)
                return refusal
            for position in outcome.changed:
                gpu = outcome.gpus[position]
                ref = (gpu.host, gpu.index)
                self._gpus[ref] = gpu
                if ref in free:
                    switched.append(ref)  # a whole GPU, or a layout admission offered whole
            bindings.extend(MigInstance(b.host, b.gpu, b.profile, b.start) for b in outcome.bindings)
        self._tell(switched)
        self._changed()
        return MigPlacement(tuple(sorted(bindings)), tuple(GpuRef(*key) for key in sorted(switched)))

    # -- helpers --

    def _views_for_joint(self, free: frozenset[_Key]) -> dict[GpuFamily, list[PoolGpu]]:
        """The GPUs of the new demand's families as they are now: what its joint plan is made over (see
        ``mig_admission_joint``)."""
        families = {d.family for d in self._new}
        return {f: [self._view(ref, free) for ref in self._family_keys.get(f, [])] for f in families}

    def joint_plan(self) -> JointPlan | None:
        """The joint plan a pass with joint planning would make, from this pass: passes with and without
        it run alike up to its first placement of the new demand, where that plan is made (over the
        GPUs as they were then, recorded here). None: the pass placed none of it."""
        return None if self._joint_views is None else plan_joint(self._new, self._joint_views)

    def _plan(
        self, refs: Sequence[_Key], profiles: Mapping[str, int], label: str, free: frozenset[_Key]
    ) -> MigPlan | PlanRefusal:
        view = [self._view(ref, free) for ref in refs]
        return plan_mig_admission(view, profiles, label, growth_type=self._growth_type(refs, view, profiles))

    def _growth_type(
        self, refs: Sequence[_Key], view: Sequence[PoolGpu], wanted: Mapping[str, int]
    ) -> MigGpuType | None:
        """The MIG type a growing pool adds: the family's commonest one that offers every profile asked
        (the same all pass: GPU types do not change)."""
        memo = (self._units[refs[0]].family if refs else GpuFamily(""), tuple(sorted(wanted)))
        if memo not in self._growth_types:
            self._growth_types[memo] = growth_type(view, wanted)
        return self._growth_types[memo]

    def _plan_on_one_host(
        self,
        refs: Sequence[_Key],
        hosts: Sequence[str],
        profiles: Mapping[str, int],
        label: str,
        free: frozenset[_Key],
    ) -> MigPlan | PlanRefusal:
        """The best host of ``hosts`` for all the instances (``mig_request.plan_on_one_host``)."""
        return plan_on_one_host(
            refs,
            hosts,
            profiles,
            label,
            lambda ref: self._view(ref, free),
            lambda view: self._growth_type(refs, view, profiles),
        )

    def _forget_taken_whole(self, free: Set[_Key]) -> None:
        """A layout admission was never told about whose GPU is no longer free was bound whole: it goes."""
        for ref in sorted(self._untold - free):
            gpu = self._gpus[ref]
            if gpu.instances is not None:
                assert all(s.workload is None for s in gpu.instances)
                self._gpus[ref] = replace(gpu, instances=None)
                self._changed()
        self._untold &= free

    def _view(self, ref: _Key, free: Set[_Key]) -> PoolGpu:
        gpu = self._gpus[ref]
        if gpu.instances is not None or ref in free:
            return gpu
        cached = self._bound_views.get(ref)
        if cached is None or cached[0] is not gpu:
            cached = (gpu, replace(gpu, bound=WHOLE))
            self._bound_views[ref] = cached
        return cached[1]

    def _refusal(
        self,
        family: GpuFamily,
        wanted: Mapping[str, int],
        outcome: PlanRefusal,
        refs: Sequence[_Key],
        free: Set[_Key],
        hosts: Sequence[str] | None,
    ) -> MigRefusal:
        """The message (``mig_request.refusal``), over the GPUs as this request sees them."""
        view_of = lambda ref: self._view(ref, free)  # noqa: E731
        return refusal(self._pool.label, self._names, family, wanted, outcome, refs, view_of, hosts)

    def may_plan_jointly(self) -> bool:
        """Whether the pass has new MIG demand a joint plan covers (``mig_admission_joint``): a family of
        at most ``MAX_GPUS`` GPUs in the pool."""
        return any(len(self._family_keys.get(d.family, ())) <= MAX_GPUS for d in self._new)

    def at_fewest_gpus(self) -> bool:
        """Whether no plan of the instances bound now could hold them on fewer GPUs not frozen
        or strand fewer slices on them (``mig_joint.fewest`` per family): joint planning of the pass
        cannot do better."""
        for refs in self._family_keys.values():
            gpus = [self._gpus[ref] for ref in refs]
            asked = Counter(
                s.profile for g in gpus if not g.frozen for s in g.instances or () if s.workload is not None
            )
            used = [g for g in gpus if not g.frozen and any(s.workload for s in g.instances or ())]
            kept = [g if g.frozen else replace(g, instances=None) for g in gpus]
            if (len(used), sum(stranded_slices(g) for g in used)) > fewest(kept, asked):
                return False
        return True

    # -- the end of the pass --

    def finish(self, result: PoolAdmission) -> PoolMigOutcome:
        """The layouts the pass leaves (idle ones back to whole, not frozen ones) and their outputs."""
        whole = {(u.host_uid, u.index): _label(d.key) for d in result.workloads.values() for u in d.gpus}
        gpus: list[PoolGpu] = []
        for ref, gpu in self._gpus.items():
            if ref in whole:
                assert gpu.instances is None or all(s.workload is None for s in gpu.instances), ref
                gpu = replace(gpu, instances=None, bound=whole[ref])
            gpus.append(gpu)
        final = repadded(
            release_idle_gpus(gpus), self._before, self._demand, lambda key: self._units[key].family
        )
        mig = {d.key: d.mig for d in result.workloads.values() if d.mig}
        return outcome_of(final, self._frozen, mig, self.notes, self._before, self._names)
