"""What a pass came to: its result, and the one table that sorts its problems into Flux's kinds."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reconciler.metrics import PassOutcome
from reconciler.model.conditions import Phase, Reason
from reconciler.model.desired import DesiredState, PlatformKey
from reconciler.model.outcomes import Outcome
from reconciler.model.resources import ComputePool
from reconciler.plan import DONE, Action, Plan, PlatformPlan
from reconciler.resolve import Routing, Target
from reconciler.runtime.facts import Observation

MAX_RESTARTS = 3
"""Times a pass starts over because the config branch moved under it, before it gives up (error)."""


@dataclass
class PassResult:
    outcome: PassOutcome
    revision: str | None = None
    plan: list[PlatformPlan] = field(default_factory=list)
    phases: dict[PlatformKey, Phase] = field(default_factory=dict)
    commit: str | None = None
    error: str | None = None
    writes: int = 0
    duration: float = 0.0
    not_ready: str | None = (
        None  # why this instance must not act (e.g. the status branch follows another branch)
    )
    interrupted: bool = False  # a stop request cut the pass short: entries not started were not applied
    plans: dict[Target, Plan] = field(default_factory=dict)  # the plan stage's plans (pools, workloads too)


def idle_inputs(
    revision: str | None, desired: DesiredState, routing: Routing, seen: Observation
) -> tuple[str, bool]:
    """The fingerprint of a pass's inputs, and whether a pass over the same inputs may be skipped (no
    target failed or stalled; utilisation is no input of the fingerprint, so a pass with a scaling
    policy is never skipped)."""
    observed = sorted((t.url, t.project_uid or "", o.fingerprint) for t, o in seen.observed.items())
    fingerprint = hashlib.sha256(json.dumps([revision, observed]).encode()).hexdigest()
    routed_failed = any(t in routing.targets for t in seen.failed)
    calm = not routed_failed and not seen.stalled and not routing.unavailable
    return fingerprint, calm and not any(p.spec.scaling_policy_ref for p in desired.of_kind(ComputePool))


def target_order(target: Target) -> tuple[str, str]:
    return (target.url, target.project_uid or "")


def classify(
    *,
    routing: Routing,
    failed: Mapping[Target, str],
    stalled: Mapping[Target, str],
    outcomes: Mapping[PlatformKey, Outcome],
    invalid: bool,
    report_error: str | None,
) -> tuple[PassOutcome, str | None]:
    """The one place a pass's facts become its outcome: transient (retry with back-off), stalled (not
    retried until the key, Settings or configuration change), invalid (not retried until git changes).
    A recorded target nothing routes to any more is retried every pass, but its outage alone does not
    fail the pass: nothing desired waits on it."""
    transient = any(t in routing.targets for t in failed) or any(
        not o.ok and not o.unauthorized for o in outcomes.values()
    )
    refused = bool(stalled) or any(o.unauthorized for o in outcomes.values())
    problems = [
        f"{t.url}: {why}"
        for t, why in sorted(failed.items(), key=lambda item: target_order(item[0]))
        if t in routing.targets
    ]
    problems += [
        f"{t.url}: {why}" for t, why in sorted(stalled.items(), key=lambda item: target_order(item[0]))
    ]
    failed_writes = [o for o in outcomes.values() if not o.ok]
    if failed_writes:
        problems.append(f"{len(failed_writes)} Palette writes failed (first: {failed_writes[0].error})")
    if report_error is not None:
        problems.append(report_error)
    error = "; ".join(problems) or None
    if transient or report_error is not None:
        return PassOutcome.ERROR, error
    if refused:
        return PassOutcome.STALLED, error
    if invalid:
        return PassOutcome.INVALID, error
    return PassOutcome.SUCCESS, error


NO_SPACE = "No space left on device"


def _free_bytes(path: str) -> int | None:
    """Free bytes on the file system holding ``path`` (its nearest existing parent), or None."""
    probe = os.path.abspath(path)
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        return shutil.disk_usage(probe or "/").free
    except OSError:
        return None


def os_error(
    exc: OSError, where: str | None = None, free: Callable[[str], int | None] = _free_bytes
) -> tuple[PassOutcome, str, str]:
    """An OS error of a pass (a full disk, a read-only or vanished cache directory, too many open
    files): transient (the pass is retried with back-off, as for an outage), never an unclassified
    crash. Returns the outcome, the message (the error, the path and, for a full disk, the free space
    left) and the metric label (the errno name, ``ENOSPC``). ``where``: the path to report when the
    error carries none (the cache directory)."""
    code = errno.errorcode.get(exc.errno or 0, "OSError")
    path = exc.filename if isinstance(exc.filename, str) else where
    words = exc.strerror or str(exc)
    message = f"{code}: {words}"
    if path:
        message += f" ({path})"
    if exc.errno == errno.ENOSPC and path:
        left = free(path)
        message += f"; {left:,} bytes free there" if left is not None else "; free space unknown"
    return PassOutcome.ERROR, f"{message}: transient, the pass is retried with back-off", code


def no_space(error: str) -> bool:
    """Whether a git failure's message says the disk is full (git reports ENOSPC in words)."""
    return NO_SPACE.lower() in error.lower()


def summary(entries: list[PlatformPlan]) -> dict[str, int]:
    """Counts for the pass summary line."""
    counted = (Action.CREATE, Action.SCALE, Action.REPLACE, Action.DELETE, Action.REJECTED)
    counts = {**{DONE[a]: 0 for a in counted}, "prune_blocked": 0}
    for p in entries:
        if p.reason is Reason.PRUNE_BLOCKED:
            counts["prune_blocked"] += 1
        elif p.action in counted:
            counts[DONE[p.action]] += 1
    return counts
