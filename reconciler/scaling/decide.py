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
from datetime import UTC, datetime
from typing import Protocol

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
from reconciler.scaling.hosts import (
    ScalingHost,
    cores_of,
    cpu_host_to_add,
    cpu_host_to_remove,
    gpu_host_to_add,
    gpu_host_to_remove,
    gpus_of,
)
from reconciler.scaling.series import Availability, Metric, Series, Window, held

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
        bound = spec.bound_for(family)
        current = gpus_of(pool.workers, family)
        room = (bound.max_gpu_count if bound else current) - current
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


class _Pass:
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
        self.windows: list[Window] = []
        self.available, self.why, self.why_message = self._availability()

    # --- inputs ------------------------------------------------------------------------------------

    def _configured(self) -> list[Series | None]:
        out: list[Series | None] = []
        if self.spec.gpu:
            out.append(self.samples.gpu)
        if self.spec.cpu is not None:
            out.append(self.samples.cpu)
        return out

    def _availability(self) -> tuple[bool, Availability, str]:
        for series in self._configured():
            if series is None:
                return False, Availability.NO_DATA, "no range query was made for a configured metric"
            status, message = series.availability(self.now)
            if status is not Availability.AVAILABLE:
                return False, status, message
        return True, Availability.AVAILABLE, "metrics available"

    def _window(self, series: Series | None, duration: str, threshold: float, above: bool) -> Window | None:
        if series is None:
            return None
        window = held(series, self.now, parse_duration(duration), threshold, above)
        self.windows.append(window)
        return window

    def _done(
        self,
        direction: Direction,
        reason: ScalingReason,
        message: str,
        resource: str | None = None,
        host: ScalingHost | None = None,
        evidence: Window | PendingDemand | None = None,
        abort: LastAction | None = None,
        trigger: Trigger | None = None,
    ) -> Decision:
        return Decision(
            direction=direction,
            reason=reason,
            message=message,
            resource=resource,
            host=host,
            prometheus_available=self.available,
            metrics=self.why,
            prometheus_message=self.why_message,
            windows=tuple(self.windows),
            evidence=evidence,
            abort=abort,
            trigger=trigger,
        )

    def _excluded(self, direction: Direction) -> frozenset[str]:
        """A failed action's host is not tried again in the same direction (no blind retry)."""
        last = self.last
        if last is not None and last.failed_at is not None and last.direction is direction:
            return frozenset({last.host})
        return frozenset()

    # --- the rules ---------------------------------------------------------------------------------

    def run(self) -> Decision:
        last = self.last
        if last is not None and last.open:
            abort = parse_duration(self.spec.abort_duration)
            if self.now - last.written_at >= abort:
                message = (
                    f"scale-{last.direction} of {self.pool.name} ({last.resource}, host {last.host}) not "
                    f"complete {format_duration(abort)} after its write: Failed, not retried"
                )
                return self._done(Direction.NONE, ScalingReason.FAILED, message, abort=last)
            message = f"scale-{last.direction} of {self.pool.name} (host {last.host}) in progress"
            return self._done(Direction.NONE, ScalingReason.IN_PROGRESS, message)
        if last is not None:
            since = max(last.written_at, last.failed_at or last.written_at)
            cooldown = parse_duration(self.spec.cooldown_duration)
            if self.now - since < cooldown:
                left = format_duration(round(cooldown - (self.now - since), 3))
                return self._done(Direction.NONE, ScalingReason.COOLDOWN, f"cooldown: {left} left")
        grow = self._scale_up()
        if grow is not None:
            return grow
        return self._scale_down()

    def _scale_up(self) -> Decision | None:
        blocked: Decision | None = None
        free, workers = self.pool.free, self.pool.workers
        exclude = self._excluded(Direction.UP)
        # Demand first: a pending workload is work waiting, utilisation only a symptom.
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
            room = self._gpu_room(family)
            # The longest-waiting workload that one more host lets be admitted.
            for first in waiting:
                host = gpu_host_to_add(
                    family,
                    free,
                    room,
                    shortfall=first.gpus,
                    exclude=exclude,
                    per_host=first.per_host,
                    mig=first.mig,
                )
                if host is not None:
                    return self._act(Direction.UP, Trigger.PENDING_DEMAND, family, host, first)
            blocked = blocked or self._no_host(family, room, exclude, waiting[0])
        for rule in self.spec.gpu:
            family = rule.canonical
            window = self._window(self.samples.gpu, rule.scale_up_duration, rule.scale_up_threshold, True)
            if window is None or not window.held:
                continue
            room = self._gpu_room(family)
            host = gpu_host_to_add(family, free, room, exclude=exclude)
            if host is not None:
                return self._act(Direction.UP, Trigger.UTILISATION_HIGH, family, host, window)
            blocked = blocked or self._no_host(family, room, exclude)
        cpu = self.spec.cpu
        if cpu is not None:
            window = self._window(self.samples.cpu, cpu.scale_up_duration, cpu.scale_up_threshold, True)
            if window is not None and window.held:
                room = self._cpu_room_up()
                gpu_room = {
                    b.canonical: b.max_gpu_count - gpus_of(workers, b.canonical)
                    for b in self.spec.gpu_resource_bounds
                }
                host = cpu_host_to_add(free, room, gpu_room, exclude=exclude)
                if host is not None:
                    return self._act(Direction.UP, Trigger.UTILISATION_HIGH, CPU, host, window)
                blocked = blocked or self._no_host(CPU, room, exclude)
        return blocked

    def _scale_down(self) -> Decision:
        if not self.available:
            return self._done(Direction.NONE, ScalingReason.STEADY, f"no scale-down: {self.why_message}")
        if self.pending:
            first = min(self.pending, key=lambda p: (p.since, p.workload))
            return self._done(
                Direction.NONE, ScalingReason.STEADY, f"no scale-down: {first.workload} is pending"
            )
        blocked: Decision | None = None
        workers = self.pool.workers
        exclude = self._excluded(Direction.DOWN)
        at_min_workers = len(workers) - 1 < self.pool.min_workers
        cpu_room = self._cpu_room_down()
        for rule in self.spec.gpu:
            family = rule.canonical
            window = self._window(
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
            blocked = blocked or self._cannot_remove(family, room)
        cpu = self.spec.cpu
        if cpu is not None and cpu_room is not None:
            cpu_room = 0 if at_min_workers else cpu_room
            window = self._window(self.samples.cpu, cpu.scale_down_duration, cpu.scale_down_threshold, False)
            if window is not None and window.held:
                gpu_room = {
                    b.canonical: gpus_of(workers, b.canonical) - b.min_gpu_count
                    for b in self.spec.gpu_resource_bounds
                }
                governed = frozenset(r.canonical for r in self.spec.gpu)
                host = cpu_host_to_remove(workers, cpu_room, gpu_room, governed, self.fits, exclude)
                if host is not None:
                    return self._act(Direction.DOWN, Trigger.UTILISATION_LOW, CPU, host, window)
                blocked = blocked or self._cannot_remove(CPU, cpu_room)
        return blocked or self._done(Direction.NONE, ScalingReason.STEADY, "steady")

    # --- helpers -----------------------------------------------------------------------------------

    def _gpu_room(self, family: GpuFamily) -> int:
        bound = self.spec.bound_for(family)
        current = gpus_of(self.pool.workers, family)
        return (bound.max_gpu_count if bound else current) - current

    def _cpu_room_up(self) -> int:
        bounds = self.spec.cpu_resource_bounds
        current = cores_of(self.pool.workers)
        return (bounds.max_cpu_count if bounds else current) - current

    def _cpu_room_down(self) -> int | None:
        bounds = self.spec.cpu_resource_bounds
        return None if bounds is None else cores_of(self.pool.workers) - bounds.min_cpu_count

    def _no_host(
        self, resource: str, room: int, exclude: frozenset[str], demand: PendingDemand | None = None
    ) -> Decision:
        what = "host" if resource == CPU else f"{resource} host"
        unit = "cores" if resource == CPU else "GPUs"
        if demand is not None and room > 0:
            need = max(demand.gpus, demand.per_host, 1)
            big = [
                h for h in self.pool.free if h.family == resource and h.gpus >= need and h.name not in exclude
            ]
            if not big or (demand.mig and not any(h.mig_capable for h in big)):
                kind = "MIG-capable " if demand.mig else ""
                message = (
                    f"no free {kind}{what} with at least {need} GPUs to add to {self.pool.name}: one more "
                    f"host would not let {demand.workload} be admitted"
                )
                return self._done(Direction.NONE, ScalingReason.NO_CANDIDATE, message, resource=resource)
        if room <= 0:
            message = f"{self.pool.name} is at its maximum ({unit}): no {what} added"
            return self._done(Direction.NONE, ScalingReason.LIMITED, message, resource=resource)
        candidates = [
            h for h in self.pool.free if (resource == CPU or h.family == resource) and h.name not in exclude
        ]
        if candidates:
            message = (
                f"every free {what} would take {self.pool.name} past its maximum ({room} {unit} of room)"
            )
            return self._done(Direction.NONE, ScalingReason.LIMITED, message, resource=resource)
        message = f"no free {what} to add to {self.pool.name}"
        return self._done(Direction.NONE, ScalingReason.NO_CANDIDATE, message, resource=resource)

    def _cannot_remove(self, resource: str, room: int) -> Decision:
        if room <= 0:
            message = f"{self.pool.name} is at its minimum ({resource}): no host removed"
            return self._done(Direction.NONE, ScalingReason.LIMITED, message, resource=resource)
        message = (
            f"no {resource} host of {self.pool.name} can go: each holds bound GPUs, would take the pool "
            "below a minimum, or its admitted workloads would no longer fit"
        )
        return self._done(Direction.NONE, ScalingReason.WOULD_UNBIND, message, resource=resource)

    def _act(
        self,
        direction: Direction,
        trigger: Trigger,
        resource: str,
        host: ScalingHost,
        evidence: Window | PendingDemand,
    ) -> Decision:
        room = self.pool.quota_room.get(host.family) if host.family is not None else None
        if direction is Direction.UP and room is not None and host.gpus > room:
            message = (
                f"{self.pool.name} stops at its project's GPU quota: host {host.name} has {host.gpus} "
                f"{host.family} GPUs and the quota leaves {room}; no host added"
            )
            return self._done(Direction.NONE, ScalingReason.QUOTA_REACHED, message, resource=resource)
        message = sentence(self.pool.name, direction, resource, host, evidence, self.spec, self.now)
        reason = ScalingReason.SCALED_UP if direction is Direction.UP else ScalingReason.SCALED_DOWN
        return self._done(
            direction, reason, message, resource=resource, host=host, evidence=evidence, trigger=trigger
        )


def sentence(
    pool: str,
    direction: Direction,
    resource: str,
    host: ScalingHost,
    evidence: Window | PendingDemand,
    spec: ScalingPolicySpec,
    now: float,
) -> str:
    """The status commit's first line, for instance "scaled up shared-a100 by 1 NVIDIA-A100 host
    (8 GPUs): GPU utilisation 91% > 80% over 5m0s, 10 samples"."""
    verb = "scaled up" if direction is Direction.UP else "scaled down"
    if resource == CPU:
        what = f"1 host ({host.cpus} cores)"
    else:
        what = f"1 {resource} host ({host.gpus} GPU{'' if host.gpus == 1 else 's'})"
    if isinstance(evidence, PendingDemand):
        why = (
            f"{evidence.workload} pending for {format_duration(round(now - evidence.since, 3))} "
            f"(needs {evidence.gpus} more {resource} GPU{'' if evidence.gpus == 1 else 's'})"
        )
    else:
        label = "GPU" if evidence.metric is Metric.GPU else "CPU"
        sign = ">" if direction is Direction.UP else "<"
        threshold = _rule_threshold(spec, resource, direction)
        why = (
            f"{label} utilisation {evidence.mean:.0f}% {sign} {threshold:g}% over "
            f"{format_duration(evidence.duration)}, {len(evidence.values)} samples"
        )
    return f"{verb} {pool} by {what}: {why}"


def commit_message(decision: Decision, policy: str) -> str:
    """The status commit of an action: the sentence, then the policy, query, window and values used."""
    lines = [decision.message, "", f"policy: {policy}"]
    evidence = decision.evidence
    if isinstance(evidence, Window):
        lines += [
            f"query: {evidence.query}",
            f"window: {_iso(evidence.start)} .. {_iso(evidence.end)} step {format_duration(evidence.step)}",
            f"samples: {len(evidence.values)} of {evidence.expected}",
            "values: " + ", ".join(f"{v:.4g}" for v in evidence.values),
        ]
    elif isinstance(evidence, PendingDemand):
        lines.append(f"pending: {evidence.workload} since {_iso(evidence.since)}, {evidence.gpus} GPUs short")
    return "\n".join(lines) + "\n"


def _rule_threshold(spec: ScalingPolicySpec, resource: str, direction: Direction) -> float:
    rule = _rule(spec, resource)
    return rule.scale_up_threshold if direction is Direction.UP else rule.scale_down_threshold


class _RuleLike(Protocol):  # what CpuScaling and GpuScaling share
    @property
    def scale_up_threshold(self) -> float: ...
    @property
    def scale_down_threshold(self) -> float: ...


def _rule(spec: ScalingPolicySpec, resource: str) -> _RuleLike:
    if resource == CPU and spec.cpu is not None:
        return spec.cpu
    return next(r for r in spec.gpu if r.canonical == resource)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
