"""The scaling decision (docs/scaling.md, "Precisely"): pure, one pool, one pass, at most one host.

``decide(policy, samples, pool, last_action, pending, now)`` reads no clock and no network; everything
it used is in :attr:`Decision.inputs`, so :func:`replay` gives the same decision from the record.

Order of the rules, first match wins:

1. An action written to Palette and not complete: wait (``ScalingInProgress``), or, once
   ``abortDuration`` has passed since the write, report it ``ScalingFailed`` (the caller records the
   failure; the failed host is not tried again in that direction, nothing is retried blindly).
2. Within ``cooldownDuration`` of the last action's write (or failure): ``Cooldown``.
3. Scale up, by one host, within bounds: demand first (a workload pending with PoolCapacityExceeded
   for a family for that family's ``scaleUpDuration``), then GPU utilisation per family in the
   policy's order, then CPU. A wish that no host can meet is ``ScalingLimited`` (the bound) or
   ``NoCandidateHost``; a host the namespace's Project ``gpuQuota`` has no room for is ``QuotaReached``
   (``PoolView.quota_room``); any wish to grow also rules out shrinking in the same pass.
4. Scale down, by one host, only with every configured metric available and no pending demand:
   GPU families in order, then CPU. The host removed holds no bound GPU and the admitted workloads
   still fit without it (the caller's ``fits_without``, admission's own binding).
5. Otherwise ``Steady``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from reconciler.model.duration import format_duration, parse_duration
from reconciler.model.gpu import GpuFamily, canonical_family
from reconciler.model.scaling import ScalingPolicy, ScalingPolicySpec
from reconciler.scaling.decision_types import (
    CPU,
    Decision,
    DecisionInputs,
    Direction,
    LastAction,
    PendingDemand,
    PoolView,
    Samples,
    ScalingReason,
    Trigger,
    Upcoming,
)
from reconciler.scaling.explain import cannot_remove, no_host, sentence
from reconciler.scaling.findings import Findings
from reconciler.scaling.hosts import (
    ScalingHost,
    cores_of,
    cpu_host_to_add,
    cpu_host_to_remove,
    gpu_host_to_add,
    gpu_host_to_remove,
    gpus_of,
)
from reconciler.scaling.series import Window

FitsWithout = Callable[[str], bool]


def upcoming_demand(
    spec: ScalingPolicySpec, pool: PoolView, pending: tuple[PendingDemand, ...]
) -> tuple[Upcoming, ...]:
    """For each pending workload of a family the policy scales, the host a demand scale-up would add for
    it (one that holds one of its replicas, within the family's bound) and when its window ends."""
    out: list[Upcoming] = []
    for demand in sorted(pending, key=lambda p: (p.since, p.workload)):
        family = canonical_family(demand.family)
        rule = next((r for r in spec.gpu if r.canonical == family), None)
        if rule is None:
            continue
        room = _gpu_room(spec, pool, family)
        host = gpu_host_to_add(
            family, pool.free, room, shortfall=demand.gpus, per_host=demand.per_host, mig=demand.mig
        )
        if host is not None and demand.workload not in {u.workload for u in out}:
            window = parse_duration(rule.scale_up_duration)
            out.append(Upcoming(demand.workload, host.name, demand.since + window, window))
    return tuple(out)


def decide(
    policy: ScalingPolicy | ScalingPolicySpec,
    samples: Samples,
    pool: PoolView,
    last_action: LastAction | None,
    pending: tuple[PendingDemand, ...] | list[PendingDemand],
    now: float,
    fits_without: FitsWithout | None = None,
) -> Decision:
    """The decision for one pool at ``now`` (see the module docstring for the rules)."""
    spec = policy.spec if isinstance(policy, ScalingPolicy) else policy
    asked: list[tuple[str, bool]] = []

    def fits(host: str) -> bool:
        answer = True if fits_without is None else bool(fits_without(host))
        asked.append((host, answer))
        return answer

    pending_t = tuple(pending)
    decision = _Pass(spec, samples, pool, last_action, pending_t, now, fits).run()
    inputs = DecisionInputs(samples, pool, last_action, pending_t, now, tuple(asked))
    upcoming = upcoming_demand(spec, pool, pending_t) if decision.direction is not Direction.DOWN else ()
    return replace(decision, inputs=inputs, upcoming=upcoming)


def replay(policy: ScalingPolicy | ScalingPolicySpec, inputs: DecisionInputs) -> Decision:
    """Decide again from a recorded decision's inputs (admission's answers included)."""
    answers = dict(inputs.fits)
    return decide(
        policy,
        inputs.samples,
        inputs.pool,
        inputs.last_action,
        inputs.pending,
        inputs.now,
        lambda host: answers[host],
    )


# --- room within the bounds, and hosts not tried again ----------------------------------------------


def _gpu_room(spec: ScalingPolicySpec, pool: PoolView, family: GpuFamily) -> int:
    """GPUs of ``family`` the pool may still gain (its current count when the policy bounds none)."""
    bound = spec.bound_for(family)
    current = gpus_of(pool.workers, family)
    return (bound.max_gpu_count if bound else current) - current


def _cpu_room_up(spec: ScalingPolicySpec, pool: PoolView) -> int:
    bounds = spec.cpu_resource_bounds
    current = cores_of(pool.workers)
    return (bounds.max_cpu_count if bounds else current) - current


def _cpu_room_down(spec: ScalingPolicySpec, pool: PoolView) -> int | None:
    bounds = spec.cpu_resource_bounds
    return None if bounds is None else cores_of(pool.workers) - bounds.min_cpu_count


def _excluded(last: LastAction | None, direction: Direction) -> frozenset[str]:
    """A failed action's host is not tried again in the same direction (no blind retry)."""
    if last is not None and last.failed_at is not None and last.direction is direction:
        return frozenset({last.host})
    return frozenset()


# --- the rules, in order ------------------------------------------------------------------------------


class _Pass:
    """The rules of one decision in order (the module docstring), first match wins. A wish that cannot
    be met is kept as :attr:`refused` (the first one only) and answers if no later rule acts."""

    def __init__(
        self,
        spec: ScalingPolicySpec,
        samples: Samples,
        pool: PoolView,
        last: LastAction | None,
        pending: tuple[PendingDemand, ...],
        now: float,
        fits: FitsWithout,
    ) -> None:
        self.spec, self.samples, self.pool, self.last, self.pending = spec, samples, pool, last, pending
        self.now, self.fits = now, fits
        self.found = Findings(spec, samples, now)
        self.refused: Decision | None = None

    def run(self) -> Decision:
        waiting = self._last_action()
        if waiting is not None:
            return waiting
        exclude = _excluded(self.last, Direction.UP)
        grow = self._demand_up(exclude) or self._gpu_up(exclude) or self._cpu_up(exclude)
        if grow is not None:
            return grow
        if self.refused is not None:  # any wish to grow rules out shrinking
            return self.refused
        return self._scale_down()

    # 1 and 2: an action still open (wait, or report it failed), then the cooldown

    def _last_action(self) -> Decision | None:
        last = self.last
        if last is not None and last.open:
            abort = parse_duration(self.spec.abort_duration)
            if self.now - last.written_at >= abort:
                message = (
                    f"scale-{last.direction} of {self.pool.name} ({last.resource}, host {last.host}) not "
                    f"complete {format_duration(abort)} after its write: Failed, not retried"
                )
                return self.found.decision(Direction.NONE, ScalingReason.FAILED, message, abort=last)
            message = f"scale-{last.direction} of {self.pool.name} (host {last.host}) in progress"
            return self.found.decision(Direction.NONE, ScalingReason.IN_PROGRESS, message)
        if last is not None:
            since = max(last.written_at, last.failed_at or last.written_at)
            cooldown = parse_duration(self.spec.cooldown_duration)
            if self.now - since < cooldown:
                left = format_duration(round(cooldown - (self.now - since), 3))
                return self.found.decision(Direction.NONE, ScalingReason.COOLDOWN, f"cooldown: {left} left")
        return None

    # 3: scale up: demand first (a pending workload is work waiting, utilisation only a symptom),
    # then GPU utilisation per family in the policy's order, then CPU

    def _demand_up(self, exclude: frozenset[str]) -> Decision | None:
        for rule in self.spec.gpu:
            family = rule.canonical
            due = parse_duration(rule.scale_up_duration)
            waiting = sorted(
                (
                    p
                    for p in self.pending
                    if canonical_family(p.family) == family and self.now - p.since >= due
                ),
                key=lambda p: (p.since, p.workload),
            )
            if not waiting:
                continue
            room = _gpu_room(self.spec, self.pool, family)
            # The longest-waiting workload that one more host lets be admitted.
            for first in waiting:
                host = gpu_host_to_add(
                    family,
                    self.pool.free,
                    room,
                    shortfall=first.gpus,
                    exclude=exclude,
                    per_host=first.per_host,
                    mig=first.mig,
                )
                if host is not None:
                    return self._act(Direction.UP, Trigger.PENDING_DEMAND, family, host, first)
            if self.refused is None:
                self.refused = no_host(self.found, self.pool, family, room, exclude, waiting[0])
        return None

    def _gpu_up(self, exclude: frozenset[str]) -> Decision | None:
        for rule in self.spec.gpu:
            family = rule.canonical
            window = self.found.window(
                self.samples.gpu, rule.scale_up_duration, rule.scale_up_threshold, True
            )
            if window is None or not window.held:
                continue
            room = _gpu_room(self.spec, self.pool, family)
            host = gpu_host_to_add(family, self.pool.free, room, exclude=exclude)
            if host is not None:
                return self._act(Direction.UP, Trigger.UTILISATION_HIGH, family, host, window)
            if self.refused is None:
                self.refused = no_host(self.found, self.pool, family, room, exclude)
        return None

    def _cpu_up(self, exclude: frozenset[str]) -> Decision | None:
        cpu = self.spec.cpu
        if cpu is None:
            return None
        window = self.found.window(self.samples.cpu, cpu.scale_up_duration, cpu.scale_up_threshold, True)
        if window is None or not window.held:
            return None
        room = _cpu_room_up(self.spec, self.pool)
        gpu_room = {
            b.canonical: b.max_gpu_count - gpus_of(self.pool.workers, b.canonical)
            for b in self.spec.gpu_resource_bounds
        }
        host = cpu_host_to_add(self.pool.free, room, gpu_room, exclude=exclude)
        if host is not None:
            return self._act(Direction.UP, Trigger.UTILISATION_HIGH, CPU, host, window)
        if self.refused is None:
            self.refused = no_host(self.found, self.pool, CPU, room, exclude)
        return None

    # 4: scale down, only with every configured metric available and no pending demand: GPU families
    # in order, then CPU

    def _scale_down(self) -> Decision:
        if not self.found.available:
            message = f"no scale-down: {self.found.why_message}"
            return self.found.decision(Direction.NONE, ScalingReason.STEADY, message)
        if self.pending:
            first = min(self.pending, key=lambda p: (p.since, p.workload))
            message = f"no scale-down: {first.workload} is pending"
            return self.found.decision(Direction.NONE, ScalingReason.STEADY, message)
        exclude = _excluded(self.last, Direction.DOWN)
        at_min_workers = len(self.pool.workers) - 1 < self.pool.min_workers
        cpu_room = _cpu_room_down(self.spec, self.pool)
        shrink = self._gpu_down(exclude, at_min_workers, cpu_room) or self._cpu_down(
            exclude, at_min_workers, cpu_room
        )
        # 5: otherwise steady
        return shrink or self.refused or self.found.decision(Direction.NONE, ScalingReason.STEADY, "steady")

    def _gpu_down(
        self, exclude: frozenset[str], at_min_workers: bool, cpu_room: int | None
    ) -> Decision | None:
        workers = self.pool.workers
        for rule in self.spec.gpu:
            family = rule.canonical
            window = self.found.window(
                self.samples.gpu, rule.scale_down_duration, rule.scale_down_threshold, False
            )
            if window is None or not window.held:
                continue
            bound = self.spec.bound_for(family)
            room = 0 if at_min_workers else gpus_of(workers, family) - (bound.min_gpu_count if bound else 0)
            admitted = self.pool.admitted.get(family, 0)
            host = gpu_host_to_remove(family, workers, room, admitted, self.fits, cpu_room, exclude)
            if host is not None:
                return self._act(Direction.DOWN, Trigger.UTILISATION_LOW, family, host, window)
            if self.refused is None:
                self.refused = cannot_remove(self.found, self.pool, family, room)
        return None

    def _cpu_down(
        self, exclude: frozenset[str], at_min_workers: bool, cpu_room: int | None
    ) -> Decision | None:
        cpu = self.spec.cpu
        if cpu is None or cpu_room is None:
            return None
        room = 0 if at_min_workers else cpu_room
        window = self.found.window(self.samples.cpu, cpu.scale_down_duration, cpu.scale_down_threshold, False)
        if window is None or not window.held:
            return None
        workers = self.pool.workers
        gpu_room = {
            b.canonical: gpus_of(workers, b.canonical) - b.min_gpu_count
            for b in self.spec.gpu_resource_bounds
        }
        governed = frozenset(r.canonical for r in self.spec.gpu)
        host = cpu_host_to_remove(workers, room, gpu_room, governed, self.fits, exclude)
        if host is not None:
            return self._act(Direction.DOWN, Trigger.UTILISATION_LOW, CPU, host, window)
        if self.refused is None:
            self.refused = cannot_remove(self.found, self.pool, CPU, room)
        return None

    def _act(
        self,
        direction: Direction,
        trigger: Trigger,
        resource: str,
        host: ScalingHost,
        evidence: Window | PendingDemand,
    ) -> Decision:
        """The action, unless the namespace's Project ``gpuQuota`` has no room for the host added."""
        room = self.pool.quota_room.get(host.family) if host.family is not None else None
        if direction is Direction.UP and room is not None and host.gpus > room:
            message = (
                f"{self.pool.name} stops at its project's GPU quota: host {host.name} has {host.gpus} "
                f"{host.family} GPUs and the quota leaves {room}; no host added"
            )
            return self.found.decision(
                Direction.NONE, ScalingReason.QUOTA_REACHED, message, resource=resource
            )
        message = sentence(self.pool.name, direction, resource, host, evidence, self.spec, self.now)
        reason = ScalingReason.SCALED_UP if direction is Direction.UP else ScalingReason.SCALED_DOWN
        return self.found.decision(
            direction, reason, message, resource=resource, host=host, evidence=evidence, trigger=trigger
        )
