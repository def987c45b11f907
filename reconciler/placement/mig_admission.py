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
- At the end: ``release_idle_gpus`` (not frozen GPUs), ``repad`` of the GPUs laid out in the pass, then
  the outputs, with the hosts whose GPUs are re-laid out (``relayout``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any

from reconciler.model.conditions import Reason
from reconciler.model.gpu import GpuFamily
from reconciler.model.mig import MigGpuType, catalogue_entry
from reconciler.model.pools import MigRequest, WorkloadKey, WorkloadRequest
from reconciler.placement.admission import (
    GpuRef,
    GpuUnit,
    MigInstance,
    MigPlacement,
    MigRefusal,
    PoolAdmission,
    PoolState,
    PreviousAdmission,
)
from reconciler.placement.mig import (
    MIG_CONFIG_LABEL,
    MigPlan,
    MigShortfall,
    MigUsage,
    PoolGpu,
    describe_shortfall,
    frozen_gpus,
    is_valid_layout,
    layout_json,
    mig_usage,
    plan_mig_admission,
    realise,
    release_idle_gpus,
    repad,
    state_of,
    usable_slices,
)
from reconciler.placement.mig import MigInstance as Slot
from reconciler.placement.mig import MigRefusal as PlanRefusal

_Key = tuple[str, int]  # a GPU: (host uid, device index)
WHOLE = "(whole)"  # what the layout planner sees as the holder of a GPU bound whole


def _label(key: WorkloadKey) -> str:
    return f"{key[0]}/{key[1]}"


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


# --- the recorded layouts ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class GpuLayout:
    """One GPU in MIG mode as the status records it: its instances, each bound to ``namespace/name`` or
    free (``workload`` None)."""

    host_uid: str
    gpu: int
    instances: tuple[Slot, ...]


class MigLayoutError(ValueError):
    """A recorded ``mig`` value that does not have the shape of ``pools[].mig``; the message names it."""


def parse_mig_layouts(data: Any, where: str = "mig") -> tuple[GpuLayout, ...]:
    """The layouts of ``pools[].mig`` (``plan --format json``): ``{host uid: [{gpu, instances: [{profile,
    start, workload}]}]}``; None is no layout. ``where`` prefixes every error (file and field)."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        raise MigLayoutError(f"{where}: expected a mapping of host uid to GPUs, got {_kind(data)}")
    out: list[GpuLayout] = []
    for host, entries in data.items():
        path = f"{where}[{json.dumps(host)}]"
        if not isinstance(host, str) or not host:
            raise MigLayoutError(f"{path}: a host uid must be a non-empty string")
        if not isinstance(entries, list):
            raise MigLayoutError(f"{path}: expected a list of GPUs, got {_kind(entries)}")
        seen: set[int] = set()
        for n, entry in enumerate(entries):
            at = f"{path}[{n}]"
            _fields(entry, at, ("gpu", "instances"))
            gpu = _count(entry.get("gpu"), f"{at}.gpu")
            if gpu in seen:
                raise MigLayoutError(f"{at}.gpu: GPU {gpu} of host {host} is listed twice")
            seen.add(gpu)
            raw = entry.get("instances")
            if not isinstance(raw, list):
                raise MigLayoutError(f"{at}.instances: expected a list, got {_kind(raw)}")
            out.append(
                GpuLayout(
                    host, gpu, tuple(sorted(_slot(i, f"{at}.instances[{k}]") for k, i in enumerate(raw)))
                )
            )
    return tuple(sorted(out))


def _slot(raw: Any, at: str) -> Slot:
    _fields(raw, at, ("profile", "start", "workload"))
    profile = raw.get("profile")
    if not isinstance(profile, str) or not profile:
        raise MigLayoutError(f"{at}.profile: expected a profile name such as 3g.40gb, got {_kind(profile)}")
    workload = raw.get("workload")
    if workload is not None:
        parts = workload.split("/") if isinstance(workload, str) else []
        if len(parts) != 2 or not all(parts):
            raise MigLayoutError(
                f"{at}.workload: expected namespace/name or null, got {json.dumps(workload)}"
            )
    return Slot(_count(raw.get("start"), f"{at}.start"), profile, workload)


def _fields(raw: Any, at: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(raw, Mapping):
        raise MigLayoutError(f"{at}: expected a mapping, got {_kind(raw)}")
    for key in raw:
        if key not in allowed:
            raise MigLayoutError(f"{at}: unexpected field {json.dumps(key)} (allowed: {', '.join(allowed)})")
    for key in allowed:
        if key not in raw and key != "workload":
            raise MigLayoutError(f"{at}: missing field {key}")


def _count(value: Any, at: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise MigLayoutError(f"{at}: expected a non-negative integer, got {json.dumps(value)}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def layouts_of(gpus: Iterable[PoolGpu]) -> tuple[GpuLayout, ...]:
    """The GPUs in MIG mode as ``GpuLayout``s (what ``parse_mig_layouts`` reads back from ``layout_json``)."""
    return tuple(
        sorted(
            GpuLayout(g.host, g.index, tuple(sorted(g.instances))) for g in gpus if g.instances is not None
        )
    )


def workload_mig_json(instances: Iterable[MigInstance]) -> list[dict[str, Any]]:
    """``workloads[].mig`` of ``plan --format json``: ``[{host, gpu, profile, start}]``, sorted."""
    return [
        {"host": i.host_uid, "gpu": i.gpu, "profile": i.profile, "start": i.start} for i in sorted(instances)
    ]


# --- the outcome ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigMachinePool:
    """Hosts sharing one layout: one worker machine pool of the pool's cluster (docs/mig.md)."""

    config: str  # the mig-parted config name, also the label value
    hosts: tuple[str, ...]  # host uids, sorted

    @property
    def labels(self) -> dict[str, str]:
        return {MIG_CONFIG_LABEL: self.config}


@dataclass(frozen=True, slots=True)
class PoolMigOutcome:
    """What one pool's pass leaves, for the plan, the status and the applier."""

    gpus: tuple[PoolGpu, ...]  # every GPU of the pool after the pass (``bound``: holder of a whole GPU)
    layouts: tuple[GpuLayout, ...]  # the GPUs in MIG mode: the next pass's recorded layouts
    mig: dict[str, list[dict[str, Any]]]  # pools[].mig
    mig_config: dict[str, Any] | None  # migConfig (None: no GPU in MIG mode)
    usage: MigUsage  # memory slices bound, free in instances, stranded
    machine_pools: tuple[MigMachinePool, ...]  # hosts by layout; hosts not listed stay in worker-pool
    host_configs: Mapping[str, str]  # host uid -> config name, for hosts with a GPU in MIG mode
    frozen_gpus: frozenset[GpuRef]  # GPUs whose layout an earlier workload holds: kept this pass
    workloads: dict[WorkloadKey, list[dict[str, Any]]]  # workloads[].mig of every workload with instances
    notes: tuple[str, ...]  # recorded layouts that were dropped, and why
    # Per host whose MIG configuration changes: which GPUs are re-laid out and which stay untouched
    # ("gpu-a100-03: GPUs 4-7 re-laid out; GPUs 0-3 untouched"), by host name.
    relayout: tuple[str, ...] = ()

    @property
    def frozen_hosts(self) -> frozenset[str]:
        """Hosts with a frozen GPU (their other GPUs may still change)."""
        return frozenset(ref.host_uid for ref in self.frozen_gpus)


def index_ranges(indices: Iterable[int]) -> str:
    """``GPU 4`` or ``GPUs 0-3, 6``: device indices as ranges."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    first = previous = ordered[0]
    for index in [*ordered[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        parts.append(str(first) if first == previous else f"{first}-{previous}")
        if index is not None:
            first = previous = index
    return f"GPU {parts[0]}" if len(ordered) == 1 else f"GPUs {', '.join(parts)}"


def relayout_lines(
    before: Mapping[tuple[str, int], frozenset[tuple[str, int]] | None],
    after: Iterable[PoolGpu],
    names: Mapping[str, str],
) -> tuple[str, ...]:
    """One line per host whose MIG configuration changes (whole <-> MIG, or another layout)."""
    changed: dict[str, list[int]] = {}
    same: dict[str, list[int]] = {}
    for gpu in after:
        now = None if gpu.instances is None else frozenset((i.profile, i.start) for i in gpu.instances)
        moved = before.get((gpu.host, gpu.index)) != now
        (changed if moved else same).setdefault(gpu.host, []).append(gpu.index)
    lines = []
    for host in sorted(changed, key=lambda h: (names.get(h, h), h)):
        line = f"{names.get(host, host)}: {index_ranges(changed[host])} re-laid out"
        if host in same:
            line += f"; {index_ranges(same[host])} untouched"
        lines.append(line)
    return tuple(lines)


_RELAYOUT_HOSTS_SHOWN = 5  # hosts a plan message names; more are counted


def relayout_summary(lines: Sequence[str]) -> str:
    """``MIG layout: gpu-a100-03: GPUs 4-7 re-laid out; GPUs 0-3 untouched``, for a pool's plan message
    (the first hosts by name; the rest counted)."""
    shown = list(lines[:_RELAYOUT_HOSTS_SHOWN])
    if len(lines) > _RELAYOUT_HOSTS_SHOWN:
        shown.append(f"and {_plural(len(lines) - _RELAYOUT_HOSTS_SHOWN, 'more host')}")
    return f"MIG layout: {' | '.join(shown)}"


# --- the planner ------------------------------------------------------------------------------------

_HOSTS_SHOWN = 4  # hosts a refusal names; more are counted


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
        recorded, notes = self._recorded(layouts, types, whole_of, owner_of, active)
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
        self.notes = tuple(notes)

    def _recorded(
        self,
        layouts: Iterable[GpuLayout],
        types: Mapping[_Key, MigGpuType | None],
        whole_of: Mapping[_Key, str],
        owner_of: Mapping[tuple[str, int, str, int], str],
        active: Set[str],
    ) -> tuple[dict[_Key, tuple[Slot, ...]], list[str]]:
        """The recorded layouts that still hold, each instance with the workload holding it (an earlier
        admission, or the recorded holder if it is still there), and notes on the others."""
        recorded: dict[_Key, tuple[Slot, ...]] = {}
        notes: list[str] = []
        for layout in sorted(layouts):
            ref = (layout.host_uid, layout.gpu)
            gpu_type = types.get(ref)
            why = self._unusable(ref, layout, gpu_type, whole_of, recorded)
            if why is not None:
                notes.append(f"MIG layout of GPU {layout.gpu} on host {layout.host_uid} dropped: {why}")
                continue
            recorded[ref] = tuple(
                sorted(
                    Slot(
                        s.start,
                        s.profile,
                        owner_of.get((layout.host_uid, layout.gpu, s.profile, s.start))
                        or (s.workload if s.workload in active else None),
                    )
                    for s in layout.instances
                )
            )
        return recorded, notes

    def _unusable(
        self,
        ref: _Key,
        layout: GpuLayout,
        gpu_type: MigGpuType | None,
        whole_of: Mapping[_Key, str],
        recorded: Mapping[_Key, tuple[Slot, ...]],
    ) -> str | None:
        if not self._mixed:
            return f"pool {self._pool.label} has mig.strategy {self._pool.mig_strategy}"
        if ref not in self._units:
            return "the GPU is not in the pool any more"
        if gpu_type is None:
            return "the GPU is not MIG-capable (agent migCapable and the MIG catalogue)"
        if ref in recorded:
            return "listed twice"
        placements = [(s.profile, s.start) for s in layout.instances]
        if not is_valid_layout(gpu_type, placements):
            return f"not a valid layout of {gpu_type.key}"
        if ref in whole_of:
            return f"{whole_of[ref]} holds the GPU whole"
        return None

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
        before = dict(self._gpus)
        bindings: list[MigInstance] = []
        switched: list[_Key] = []
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
            self._growth_types[memo] = _growth_type(view, wanted)
        return self._growth_types[memo]

    def _plan_on_one_host(
        self,
        refs: Sequence[_Key],
        hosts: Sequence[str],
        profiles: Mapping[str, int],
        label: str,
        free: frozenset[_Key],
    ) -> MigPlan | PlanRefusal:
        """The best host of ``hosts`` for all the instances (fewest GPUs switched, then fewest slices
        stranded, then the earlier host). Hosts in the same state give the same answer: planned once."""
        by_host: dict[str, list[_Key]] = {}
        for ref in refs:
            by_host.setdefault(ref[0], []).append(ref)
        best: tuple[tuple[int, int, int], list[PoolGpu], MigPlan] | None = None
        tried: set[tuple[Any, ...]] = set()
        for rank, host in enumerate(hosts):
            view = [self._view(ref, free) for ref in by_host.get(host, ())]
            state = tuple(state_of(g) for g in view)
            if not view or state in tried:
                continue
            tried.add(state)
            outcome = plan_mig_admission(view, profiles, label)
            if isinstance(outcome, MigPlan):
                cost = (outcome.switched, outcome.stranded - mig_usage(view).stranded, rank)
                if best is None or cost < best[0]:
                    best = (cost, view, outcome)
        if best is None:
            view = [self._view(ref, free) for host in dict.fromkeys(hosts) for ref in by_host.get(host, ())]
            types = {g.gpu_type for g in view if g.gpu_type is not None}
            if any(not any(t.profile(name) for t in types) for name in profiles):
                return PlanRefusal(MigShortfall.MIG_UNSUPPORTED, "", 0, 0)
            return describe_shortfall(view, profiles, growth_type=self._growth_type(refs, view, profiles))
        return best[2]

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
        """The message: what a new request can use where it was looked for (the pool, or the hosts of
        one replica), the GPUs held there, and the growth that would let it in."""
        pool = self._pool.label
        shown = ", ".join(f"{name} x{count}" for name, count in sorted(wanted.items()))
        scope, where = f"pool {pool}", set(hosts or ())
        if hosts is not None and not {ref[0] for ref in refs} <= where:
            refs = [ref for ref in refs if ref[0] in where]
            names = sorted(self._names.get(h, h) for h in where)
            scope = f"host {names[0]}" if len(names) == 1 else f"hosts {', '.join(names[:3])}"
            scope += f" and {len(names) - 3} more" if len(names) > 3 else ""
        view = [self._view(ref, free) for ref in refs]
        types = sorted({g.gpu_type.key: g.gpu_type for g in view if g.gpu_type is not None}.items())
        if outcome.reason is MigShortfall.MIG_UNSUPPORTED:
            return MigRefusal(Reason.MIG_UNSUPPORTED, _unsupported(family, shown, pool, wanted, view, types))
        room = " and ".join(f"{n} of {wanted[name]} {name}" for name, n in outcome.room)
        alone = ", each profile alone" if len(outcome.room) > 1 else ""
        usable = [usable_slices(g) for g in view]
        switchable = [g for g, n in zip(view, usable, strict=True) if n and g.instances is None]
        partial = [n for g, n in zip(view, usable, strict=True) if n and g.instances is not None]
        in_mig = sum(partial)
        head = (
            f"needs MIG instances {shown} of {family} ({outcome.needed_slices} memory slices); {scope} "
            f"can take {room} now{alone} ({outcome.free_slices} memory slices usable: "
            f"{_plural(len(switchable), f'whole {family} GPU')} free to switch to MIG, {in_mig} in free "
            f"space of {_plural(len(partial), 'GPU')} in MIG mode)"
        )
        if outcome.reason is MigShortfall.NO_FITTING_LAYOUT:
            head += (
                ": no single host holds them (one replica's instances go on one host)"
                if len(where) > 1
                else ": no valid layout holds them without moving bound instances"
            )
        held = [g for g, n in zip(view, usable, strict=True) if not n]
        if held:
            head += f"; held: {_listed(held, self._names, _held_kind)}"
        frozen = [g for g in view if g.frozen]
        if frozen:
            head += (
                f"; {_listed(frozen, self._names, lambda g: '')} keep their layouts while workloads "
                "admitted before use them"
            )
        grow = outcome.growth
        tail = f", or the pool grows by {_plural(grow, f'{family} GPU')}" if grow else ""
        return MigRefusal(
            Reason(outcome.reason.value), f"{head}; frees when MIG instances are released{tail}"
        )

    # -- the end of the pass --

    def _repad(self, gpus: Sequence[PoolGpu]) -> tuple[PoolGpu, ...]:
        """The GPUs laid out this pass get free instances of the profiles the pool's workloads ask for
        (``repad``): once a workload runs there, only those can serve the next requests."""
        changed = {
            (g.host, g.index)
            for g in gpus
            if g.instances is not None
            and self._before.get((g.host, g.index)) != frozenset((i.profile, i.start) for i in g.instances)
        }
        out = list(gpus)
        for family, asked in sorted(self._demand.items()):
            keys = {key for key in changed if self._units[key].family == family}
            if keys:
                out = list(repad(out, asked, keys))
        return tuple(out)

    def finish(self, result: PoolAdmission) -> PoolMigOutcome:
        """The layouts the pass leaves (idle ones back to whole, not frozen ones) and their outputs."""
        whole = {(u.host_uid, u.index): _label(d.key) for d in result.workloads.values() for u in d.gpus}
        gpus: list[PoolGpu] = []
        for ref, gpu in self._gpus.items():
            if ref in whole:
                assert gpu.instances is None or all(s.workload is None for s in gpu.instances), ref
                gpu = replace(gpu, instances=None, bound=whole[ref])
            gpus.append(gpu)
        final = self._repad(release_idle_gpus(gpus))
        real = realise(final)
        return PoolMigOutcome(
            gpus=final,
            layouts=layouts_of(final),
            mig=layout_json(final),
            mig_config=real.mig_config,
            usage=mig_usage(final),
            machine_pools=tuple(MigMachinePool(name, hosts) for name, hosts in real.machine_pools.items()),
            host_configs=real.host_configs,
            frozen_gpus=self._frozen,
            workloads={d.key: workload_mig_json(d.mig) for d in result.workloads.values() if d.mig},
            notes=self.notes,
            relayout=relayout_lines(self._before, final, self._names),
        )


def _growth_type(view: Sequence[PoolGpu], wanted: Mapping[str, int]) -> MigGpuType | None:
    """The MIG type a growing pool adds: the family's commonest one that offers every profile asked."""
    counts = Counter(
        g.gpu_type for g in view if g.gpu_type is not None and all(g.gpu_type.profile(n) for n in wanted)
    )
    if not counts:
        return None
    return min(counts, key=lambda t: (-counts[t], t.key))


def _unsupported(
    family: GpuFamily,
    shown: str,
    pool: str,
    wanted: Mapping[str, int],
    view: Sequence[PoolGpu],
    types: Sequence[tuple[str, MigGpuType]],
) -> str:
    if not view:
        return f"asks for MIG instances {shown} of {family}; pool {pool} has no {family} GPUs"
    if not types:
        return (
            f"asks for MIG instances {shown} of {family}; no {family} GPU of pool {pool} is MIG-capable (the "
            "agent must report migCapable: true for a model and memory in the MIG catalogue): ask for whole "
            "GPUs"
        )
    offered = "; ".join(f"{k} offers {', '.join(t.profiles)}" for k, t in types)
    missing = [name for name in sorted(wanted) if not any(t.profile(name) for _, t in types)]
    return (
        f"asks for MIG instances {shown} of {family}; the GPUs of pool {pool} have no {', '.join(missing)} "
        f"({offered}): ask for one of their profiles"
    )


def _held_kind(gpu: PoolGpu) -> str:
    if gpu.gpu_type is None:
        return "not MIG-capable"
    return "whole" if gpu.instances is None else "MIG, full"


def _listed(gpus: Sequence[PoolGpu], names: Mapping[str, str], kind: Callable[[PoolGpu], str]) -> str:
    """``gpu-a100-01 GPUs 0-3 (whole), GPUs 4-7 (MIG, full); ...``: GPUs by host, the first hosts by
    name, the rest counted."""
    kinds: dict[str, dict[str, list[int]]] = {}
    for gpu in gpus:
        kinds.setdefault(gpu.host, {}).setdefault(kind(gpu), []).append(gpu.index)
    hosts = sorted(kinds, key=lambda h: (names.get(h, h), h))
    shown = [
        f"{names.get(h, h)} "
        + ", ".join(f"{index_ranges(i)}{f' ({k})' if k else ''}" for k, i in sorted(kinds[h].items()))
        for h in hosts[:_HOSTS_SHOWN]
    ]
    more = len(hosts) - _HOSTS_SHOWN
    if more > 0:
        rest = sum(len(i) for h in hosts[_HOSTS_SHOWN:] for i in kinds[h].values())
        shown.append(f"{_plural(more, 'more host')} ({_plural(rest, 'GPU')})")
    return "; ".join(shown)
