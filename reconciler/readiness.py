"""What ``/readyz`` answers, as a rule of its own: ready or not, one line per check, and whether this
instance stands by (another instance holds the writer lease). See :mod:`reconciler.server.app`."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.runtime.lease import Lease

__all__ = ["Readiness", "judge_readiness", "lease_state"]


@dataclass(frozen=True, slots=True)
class Readiness:
    """What ``/readyz`` answers: ready or not, and one line per check for ``/readyz?verbose``."""

    ready: bool
    lines: tuple[str, ...]

    def text(self, verbose: bool) -> str:
        if verbose:
            verdict = "readyz check passed" if self.ready else "readyz check failed"
            return "\n".join((*self.lines, verdict)) + "\n"
        if self.ready:
            return "ready\n"
        reasons = [line.split(": ", 1)[1] for line in self.lines if line.startswith("[-]")]
        return f"not ready: {'; '.join(reasons)}\n"


def judge_readiness(*, passed: bool, problem: str | None, lease: Lease | None) -> tuple[Readiness, bool]:
    """The one readiness rule, and whether this instance stands by.

    ``passed``: a pass has succeeded (or the instance stood by) since the process started;
    ``problem``: the controller's reason not to act (its status branch follows another config branch).
    Ready iff there is no problem and a pass has succeeded or another instance holds the writer lease.
    Holding the lease is never a condition: the ``lease`` line only informs (lines as Kubernetes'
    ``/readyz?verbose``: ``[+]name ok`` or ``[-]name failed: reason``).
    """
    standing_by, lease_line = lease_state(lease)
    lines = [lease_line]
    if passed or standing_by:
        lines.append(
            "[+]first-pass ok" + (": standing by, nothing to do" if standing_by and not passed else "")
        )
    else:
        lines.append("[-]first-pass failed: no successful pass yet")
    lines.append("[+]branch ok" if problem is None else f"[-]branch failed: {problem}")
    ready = problem is None and (passed or standing_by)
    return Readiness(ready, tuple(lines)), standing_by


def lease_state(lease: Lease | None) -> tuple[bool, str]:
    """(standing by, the ``/readyz?verbose`` line) for the writer lease."""
    if lease is None:
        return False, "[+]lease ok: none (this instance writes)"
    if lease.holds():
        return False, f"[+]lease ok: held by this instance ({lease.identity}); reconciler_lease_held 1"
    holder = lease.holder()
    if holder is None or holder == lease.identity:
        return False, "[+]lease ok: not held yet, taking it; reconciler_lease_held 0"
    return True, (
        f"[+]lease ok: standing by, held by {holder}; this instance writes nothing; reconciler_lease_held 0"
    )
