"""Invariants of scaling over random utilisation traces, arrivals and slow or stuck actions.

A pool is simulated pass by pass (one pass per step): decisions are applied, actions complete after a
random delay or never (then abort fails them). Whatever happens: actions are never closer than the
cooldown, the bounds always hold, no action unbinds an admitted workload, and replaying a decision's
recorded inputs gives the recorded decision.
"""

from __future__ import annotations

from hypothesis import event, given, settings
from hypothesis import strategies as st

from reconciler.model.duration import parse_duration
from reconciler.scaling import (
    Direction,
    LastAction,
    Metric,
    PendingDemand,
    PoolView,
    Samples,
    ScalingHost,
    Series,
    decide,
    replay,
)
from tests._scaling_support import A100, spec

STEP = 15.0
T0 = 1_800_000_000.0
HISTORY = 240  # steps kept in a range answer (1h)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    sizes = st.sampled_from([1, 2, 4, 8])
    workers = [ScalingHost(f"w{i}", A100, draw(sizes), 32) for i in range(draw(st.integers(1, 5)))]
    free = [ScalingHost(f"f{i}", A100, draw(sizes), 32) for i in range(draw(st.integers(0, 6)))]
    total = sum(h.gpus for h in workers)
    low = draw(st.integers(0, total))
    high = draw(st.integers(total, total + 40))
    up = draw(st.integers(50, 95))
    policy = spec(
        gpu=[
            {
                "family": "NVIDIA-A100",
                "scaleUpThreshold": up,
                "scaleDownThreshold": draw(st.integers(5, up - 5)),
                "scaleUpDuration": draw(st.sampled_from(["30s", "1m", "2m"])),
                "scaleDownDuration": draw(st.sampled_from(["30s", "1m", "3m"])),
            }
        ],
        gpuResourceBounds=[{"family": "NVIDIA-A100", "minGPUCount": low, "maxGPUCount": high}],
        cooldownDuration=draw(st.sampled_from(["30s", "1m", "5m"])),
        abortDuration=draw(st.sampled_from(["1m", "10m"])),
    )
    admitted = draw(st.integers(0, total))
    steps = draw(st.integers(20, 160))
    levels = draw(st.lists(st.tuples(st.integers(1, 40), st.floats(0, 100)), min_size=1, max_size=8))
    trace: list[float | None] = []
    for length, level in levels:
        trace += [level] * length
    trace = (trace * (steps // len(trace) + 1))[:steps]
    for gap in draw(st.lists(st.integers(0, steps - 1), max_size=5)):
        trace[gap] = None
    return {
        "policy": policy,
        "workers": workers,
        "free": free,
        "admitted": admitted,
        "trace": trace,
        "arrivals": draw(st.lists(st.tuples(st.integers(0, steps - 1), st.integers(1, 16)), max_size=4)),
        "delays": draw(st.lists(st.one_of(st.none(), st.integers(0, 8)), min_size=1, max_size=6)),
    }


def bind(workers: list[ScalingHost], admitted: int) -> list[ScalingHost]:
    """Admitted GPUs bound host by host in name order (a simple stand-in for admission)."""
    out, left = [], admitted
    for host in sorted(workers, key=lambda h: h.name):
        take = min(left, host.gpus)
        left -= take
        out.append(ScalingHost(host.name, host.family, host.gpus, host.cpus, bound_gpus=take))
    return out


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_actions_are_spaced_bounded_never_unbind_and_replay(case: dict[str, object]) -> None:
    policy = case["policy"]
    workers: list[ScalingHost] = bind(list(case["workers"]), case["admitted"])  # type: ignore[arg-type]
    free: list[ScalingHost] = list(case["free"])  # type: ignore[arg-type]
    admitted: int = case["admitted"]  # type: ignore[assignment]
    trace: list[float | None] = case["trace"]  # type: ignore[assignment]
    delays: list[int | None] = case["delays"]  # type: ignore[assignment]
    bound = policy.gpu_resource_bounds[0]  # type: ignore[attr-defined]
    cooldown = parse_duration(policy.cooldown_duration)  # type: ignore[attr-defined]
    pending: list[PendingDemand] = []
    last: LastAction | None = None
    completes_at: float | None = None
    writes: list[float] = []
    failed = 0
    for k in range(len(trace)):
        now = T0 + k * STEP
        for at, gpus in case["arrivals"]:  # type: ignore[attr-defined]
            if at == k:
                pending.append(PendingDemand(f"ns/w{at}-{gpus}", A100, gpus, since=now))
        if last is not None and last.open and completes_at is not None and now >= completes_at:
            last = LastAction(last.direction, last.resource, last.host, last.written_at, completed_at=now)
        points = tuple(
            (T0 + i * STEP, v) for i in range(max(0, k - HISTORY), k + 1) if (v := trace[i]) is not None
        )
        samples = Samples(gpu=Series(Metric.GPU, "q", T0 + max(0, k - HISTORY) * STEP, now, STEP, points))
        pool = PoolView("p", "ns-p", tuple(workers), tuple(free), {A100: admitted})

        def fits_without(name: str) -> bool:
            return sum(h.gpus for h in workers if h.name != name) >= admitted

        d = decide(policy, samples, pool, last, pending, now, fits_without)  # type: ignore[arg-type]
        assert d.inputs is not None and replay(policy, d.inputs) == d  # type: ignore[arg-type]
        if d.abort is not None:
            assert last is not None
            failed += 1
            last = LastAction(last.direction, last.resource, last.host, last.written_at, failed_at=now)
        if not d.acts:
            continue
        assert d.host is not None
        assert last is None or not last.open
        if writes:
            assert now - writes[-1] >= cooldown
        writes.append(now)
        if d.direction is Direction.UP:
            free.remove(d.host)
            workers.append(d.host)
            if pending:
                pending.pop(0)
        else:
            assert d.host.bound_gpus == 0
            workers.remove(d.host)
            free.append(ScalingHost(d.host.name, d.host.family, d.host.gpus, d.host.cpus))
        total = sum(h.gpus for h in workers)
        assert bound.min_gpu_count <= total <= bound.max_gpu_count
        assert total >= admitted and sum(h.bound_gpus for h in workers) == admitted
        delay = delays[len(writes) % len(delays)]
        completes_at = None if delay is None else now + delay * STEP
        last = LastAction(d.direction, d.resource or "", d.host.name, written_at=now)
    event(f"actions: {'some' if writes else 'none'}; aborts: {'some' if failed else 'none'}")
