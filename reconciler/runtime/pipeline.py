"""One reconcile pass as a short list of stages: fetch -> load -> observe -> plan -> apply -> report.

Each stage is a function (``runtime/stages/``) that takes what the previous ones made; this module only
composes them, keeps what survives between passes (the revision loaded, the last clean pass's inputs,
the warnings already given) and turns every exit into metrics, health, readiness and one summary line
(:meth:`Pipeline._finish`). Errors are sorted as in Flux (``runtime/outcome.classify``): transient ones
back off and retry; a target that refuses its key is stalled; invalid input waits for a change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from reconciler.deletions import approved_deletions
from reconciler.fencing import Fenced
from reconciler.logging import get_logger, pass_context
from reconciler.metrics import PassOutcome
from reconciler.model.desired import DesiredState
from reconciler.plan import merge
from reconciler.resolve import Routing, Target
from reconciler.runtime import loop
from reconciler.runtime.branch import BranchReader, branch_mismatch
from reconciler.runtime.clock import utc_stamp
from reconciler.runtime.facts import Applied, Loaded, Observation, Planned
from reconciler.runtime.lease import Lease
from reconciler.runtime.outcome import MAX_RESTARTS, PassResult, classify, idle_inputs, no_space, os_error
from reconciler.runtime.parts import Parts
from reconciler.runtime.ports import HeadMoved
from reconciler.runtime.preview import PreviewOptions, preview
from reconciler.runtime.preview_observe import ObserveError, RecordedObserver
from reconciler.runtime.stages import apply, fetch, load, plan, report
from reconciler.runtime.warnings import Health, Warnings, deletion_notes, mig_figures
from reconciler.source import GitError
from reconciler.status.drift import drift_note, plan_drift
from reconciler.status.records import Records, checked
from reconciler.status.report_facts import ReportFacts

log = get_logger(component="controller")


class Pipeline:
    """Reconciles one config repository branch against Palette, pass after pass."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.options = parts.options
        self.metrics = parts.metrics
        self.clock = parts.clock
        self.branch = BranchReader(parts.status)
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.last: PassResult | None = None
        self._revision: str | None = None
        self._desired: DesiredState | None = None
        self._mismatch: str | None = None
        self._clean: tuple[str, str | None] | None = None  # fingerprint and status tip of a clean pass
        self._warnings = Warnings()
        self._health = Health(parts.metrics, parts.clock, parts.options.unhealthy_bound)

    @property
    def lease(self) -> Lease:
        """One writer: Palette and the status branch are written only while held, and every write asks
        its fence at the moment it is sent (``reconciler.fencing``)."""
        return self.parts.lease

    @lease.setter
    def lease(self, lease: Lease) -> None:
        self.parts.lease = self.parts.fence.lease = lease

    def close(self) -> None:
        self.parts.close()

    def health(self) -> str | None:
        """None when healthy; else why: passes have failed continuously for longer than the bound."""
        return self._health.health()

    def readiness(self) -> str | None:
        """None when ready; else why not (no pass yet, or the status branch follows another branch)."""
        return self._health.not_ready

    def request_pass(self) -> None:
        """Start a pass (with a source check) as soon as possible: the webhook calls this."""
        self.wake.set()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def run_forever(self, on_pass: Callable[[PassResult], None] | None = None) -> None:
        loop.run_forever(self, self.options, on_pass)

    def dashboard_requests(self) -> int:
        """The most ``/v1/dashboard`` requests one target's last observation took (paces the loop)."""
        return max(self.parts.observer.dashboard_requests.values(), default=0)

    # -- the pass -----------------------------------------------------------------------------------

    def reconcile_once(self, *, check_source: bool = True) -> PassResult:
        """One pass: fetch, load, observe, plan, apply, report; then :meth:`_finish`."""
        started = time.perf_counter()
        held = self.options.dry_run or self.lease.holds()
        self.metrics.set_lease_held(held and not self.options.dry_run)
        if not held:
            # A standby reads nothing and writes nothing: the holder spends the Palette budget. It is
            # ready all the same (a rollout of two replicas completes): the lease is not readiness.
            log.info("standing by", holder=self.lease.holder())
            return self._finish(PassResult(PassOutcome.STANDBY, revision=self._revision), 0.0)
        try:
            result = self._attempt(check_source)
        except Fenced as exc:  # the lease ran out mid-pass: what was done stands; stand by, as a standby
            log.warning("writer lease ran out during the pass: nothing more is sent", error=str(exc))
            self.metrics.set_lease_held(False)
            result = PassResult(PassOutcome.STANDBY, revision=self._revision)
        except GitError as exc:
            log.warning("git unavailable; nothing applied", error=str(exc))
            if no_space(str(exc)):
                self.metrics.on_os_error("ENOSPC")
            result = PassResult(PassOutcome.ERROR, revision=self._revision, error=str(exc))
        except OSError as exc:  # a full disk, a cache directory gone read-only: transient, classified
            cache = self.options.cache_dir
            outcome, message, code = os_error(exc, str(cache) if cache is not None else None)
            log.warning("OS error; the pass is retried", error=message, errno=code)
            self.metrics.on_os_error(code)
            result = PassResult(outcome, revision=self._revision, error=message)
        except Exception as exc:  # a bug or an unforeseen failure must not end the loop: back off, retry
            log.exception("pass failed", revision=self._revision)
            result = PassResult(
                PassOutcome.ERROR, revision=self._revision, error=f"{type(exc).__name__}: {exc}"
            )
        return self._finish(result, time.perf_counter() - started)

    def _attempt(self, check_source: bool) -> PassResult:
        """The pass, started over at the new head when the config branch moves under it (the fence)."""
        for attempt in range(MAX_RESTARTS):
            try:
                return self._pass(check_source or attempt > 0)
            except HeadMoved as moved:
                log.info(
                    "config branch moved during the pass; planning again at its head",
                    held=moved.held,
                    head=moved.head,
                )
                if self.stopping.is_set():
                    error = f"stopped: {moved}"
                    return PassResult(
                        PassOutcome.ERROR, revision=self._revision, interrupted=True, error=error
                    )
                self.parts.fence()  # a pass planned again asks the lease again
        error = f"the config branch kept moving: gave up after {MAX_RESTARTS} attempts"
        return PassResult(PassOutcome.ERROR, revision=self._revision, error=error)

    def _finish(self, result: PassResult, duration: float) -> PassResult:
        """The one place a pass's result becomes metrics, health, readiness and its summary line."""
        result.duration = duration
        result.interrupted = result.interrupted or self.stopping.is_set()
        self._health.finish(result)
        self.last = result
        return result

    def _pass(self, check_source: bool) -> PassResult:
        loaded = self._fetch_and_load(check_source)  # 1. fetch and 2. load
        desired, records, revision = loaded.desired, loaded.records, loaded.revision
        with pass_context(revision):
            if self._mismatch is not None:
                log.warning(
                    "status branch follows another config branch; writing nothing", reason=self._mismatch
                )
                return PassResult(
                    PassOutcome.STALLED, revision=revision, not_ready=self._mismatch, error=self._mismatch
                )
            observer = self.parts.observer  # 3. observe
            routing = observer.route(desired)
            seen = observer.observe(desired, routing, records.files, records.docs)
            fingerprint, calm = idle_inputs(revision, desired, routing, seen)
            if (
                calm
                and self._clean is not None
                and fingerprint == self._clean[0]
                and not self._status_moved()
            ):
                log.debug("nothing changed since the last pass")
                phases = dict(self.last.phases) if self.last is not None else {}
                return PassResult(PassOutcome.SKIPPED, revision=revision, phases=phases)
            planned = self._plan(desired, routing, seen, records)  # 4. plan
            plans = planned.plans
            drift = self._drift(desired, routing, planned, records, seen)
            records = self._checked(records, planned)
            tip = self.branch.tip
            applied = self._apply(desired, planned, records, seen)  # 5. apply
            if self.branch.tip != tip:  # the apply stage wrote a scaling intent ahead: report over it
                records = checked(self.branch.records(), desired, seen.observed)
            seen = self.parts.observer.refused(desired, plans, seen, applied.writes)
            self.parts.observer.expect_gone(plans)
            result = self._report(desired, routing, planned, seen, applied, records, drift)  # 6. report
        writes = applied.writes
        result.outcome, result.error = classify(
            routing=routing,
            failed=seen.failed,
            stalled=seen.stalled,
            outcomes=writes,
            invalid=desired.has_errors,
            report_error=result.error,
        )
        result.writes, result.plans = len(writes), dict(plans)
        # Only a pass that changed nothing may be skipped next time with the same inputs.
        # An open create intent is not settled either: the next pass looks again (listing, lookup).
        clean = result.outcome in (PassOutcome.SUCCESS, PassOutcome.INVALID) and not writes and calm
        clean = clean and not applied.creates
        self._clean = (fingerprint, self.branch.tip) if clean else None
        return result

    def _fetch_and_load(self, check_source: bool) -> Loaded:
        """The desired state of the config branch's head, and the status branch's records (read once)."""
        desired = self._desired
        if not check_source and desired is not None:
            # A resync pass: Palette only (the fence confirms the head before writing).
            return Loaded(self._revision, desired, self.branch.records())
        head = fetch.sync(self.parts.source, self.metrics)
        records = self.branch.records()
        recorded = records.recorded
        self.parts.observer.known_targets |= {Target(url, project) for url, project in recorded.targets}
        opts = self.options
        self._mismatch = branch_mismatch(recorded.branch, opts.branch, opts.status_branch, opts.switch_branch)
        if head != self._revision or desired is None:
            desired = load.load(
                self.parts.source,
                head,
                previous=desired,
                records=records,
                history=self.parts.history is not None,
                namespaces=opts.namespaces,
            )
            self._desired, self._revision = desired, head
        return Loaded(head, desired, records)

    def _status_moved(self) -> bool:
        """Whether someone else (a hand edit, another writer) moved the status branch since this process
        last read or wrote it: then an idle pass is not skipped, so the branch is repaired now."""
        if self.options.dry_run or self._clean is None:
            return False
        return self.parts.status.tip() != self._clean[1]

    def _plan(self, desired: DesiredState, routing: Routing, seen: Observation, records: Records) -> Planned:
        """The plan stage ``reconciler plan`` shares, with the status branch's records."""
        planned = plan.plan_pass(
            desired,
            routing,
            seen.observed,
            records,
            samples=self.parts.samples,
            now=self.clock.time(),
            max_deletions=self.options.max_deletions,
            namespaces=self.options.namespaces,
            approved_deletions=self._approved(),
        )
        self._warnings.scaling(planned.scaling, dry_run=self.options.dry_run)
        return planned

    @staticmethod
    def _checked(records: Records, planned: Planned) -> Records:
        """The records the plan stage checked against the observation; its repairs are logged here."""
        found = planned.records
        if found is None:
            return records
        for problem in found.problems[len(records.problems) :]:  # as read-time problems are logged
            log.warning(problem.meaning, error=problem.error)
        return found

    def _approved(self) -> int | None:
        """The head commit's ``Reconciler-Allow-Deletions: N`` (a directory has no commit message)."""
        history, head = self.parts.history, self._revision
        return approved_deletions(history.commit_message(head) if history is not None and head else None)

    def _drift(
        self, desired: DesiredState, routing: Routing, planned: Planned, records: Records, seen: Observation
    ) -> list[str]:
        """After a merge: what this pass does differently from what its pull request's plan said. That
        plan is made as ``reconciler plan --from-status`` makes it (:func:`reconciler.runtime.preview.
        preview` over the recorded inventory, no Prometheus), with this pass's desired state and records."""
        if records.recorded.revision in (None, self._revision):
            return []
        opts = self.options
        observer = RecordedObserver(opts.palette_url, live=seen.observed, namespaces=opts.namespaces)
        observer.use_recorded_palette = False  # routed as this pass routes
        settings = PreviewOptions(
            max_deletions=opts.max_deletions,
            approved_deletions=self._approved(),
            namespaces=opts.namespaces,
        )
        try:
            expected = preview(desired, observer.bind(records), records, settings)
        except ObserveError:
            return []  # no recorded inventory of some target: no pull request could have been planned
        # The pull request's plan covers the targets this pass observed (a target it could not read
        # has no entries in either).
        shown = {t: p for t, p in expected.planned.plans.items() if t in planned.plans}
        lines = plan_drift(merge(desired.revision, shown, []), merge(desired.revision, planned.plans, []))
        for line in lines:
            log.warning("the pass differs from the plan against the recorded inventory", difference=line)
        return lines

    def _confirm(self) -> None:
        fetch.confirm_head(self.parts.history, self.metrics, self._revision)

    def _writes_allowed(self) -> bool:
        return not self.stopping.is_set() and self.lease.holds()

    def _apply(self, desired: DesiredState, planned: Planned, records: Records, seen: Observation) -> Applied:
        return apply.apply_pass(
            desired,
            planned.plans,
            records.pools.attached,
            client=self.parts.observer.client,
            confirm=self._confirm,
            stopped=self.stopping.is_set,
            writes_allowed=self._writes_allowed,
            fence=self.parts.fence,
            scaling=planned.scaling,  # recorded as intended before the Palette writes
            status=self.branch,
            now=self.clock.time,
            dry_run=self.options.dry_run,
            concurrency=self.options.apply_concurrency,
            listed=listed_names(seen),
        )

    def _report(
        self,
        desired: DesiredState,
        routing: Routing,
        planned: Planned,
        seen: Observation,
        applied: Applied,
        records: Records,
        drift: list[str],
    ) -> PassResult:
        """The status branch after this pass (assembled by status/report.py), written when it changed."""
        plans = planned.plans
        if plans:
            self.metrics.set_pool_mig({p.key: mig_figures(p) for pl in plans.values() for p in pl.pools})
        facts = ReportFacts(
            desired=desired,
            revision=self._revision,
            branch=self.options.branch,
            routing=routing,
            plans=plans,
            observed=seen.observed,
            now=utc_stamp(self.clock.time()),
            failed=seen.failed,
            stalled=seen.stalled,
            outcomes=applied.writes,
            pools=applied.pools,
            workloads=applied.workloads,
            scaling=planned.scaling,
            applied_at=applied.at,
            stopped=self.stopping.is_set() and not self.options.dry_run,
            palette=self.options.palette_url,
            creates=applied.creates,
        )
        opts = self.options
        reported = report.report_pass(
            facts,
            records,
            self.branch,
            branches=report.Branches(opts.branch, opts.status_branch, opts.switch_branch),
            history=self.parts.history,
            holds_lease=self.lease.holds,
            confirm=self._confirm,
            dry_run=opts.dry_run,
            notes=[
                *records.repairs,
                *deletion_notes(plans),
                *([note] if (note := drift_note(drift)) else []),
            ],
        )
        self.metrics.observe_pools(
            reported.status.files, [str(o.entry.decision) for o in planned.scaling.values()]
        )
        self._warnings.platforms(facts.platforms)
        self.parts.observer.remember(reported.status.keep)
        result = PassResult(
            PassOutcome.SUCCESS,
            revision=self._revision,
            plan=facts.platforms,
            phases=reported.status.phases,
            commit=reported.written.commit,
            error=reported.error,
        )
        if reported.written.mismatch is not None:
            self._mismatch = result.not_ready = reported.written.mismatch
        return result


def listed_names(seen: Observation) -> dict[tuple[str, str | None], list[str]]:
    """The names of the managed clusters each observed target lists."""
    return {(t.url, t.project_uid): [c.name for c in o.clusters] for t, o in seen.observed.items()}
