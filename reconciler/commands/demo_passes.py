"""The demo's kept loop (``reconciler demo --keep``): a block of lines for each pass that did something,
one heartbeat line summing up the idle ones, and the commit subjects and status lines they show."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from reconciler.model.conditions import Phase
from reconciler.model.desired import PlatformKey
from reconciler.plan import DONE, Action, PlatformPlan
from reconciler.runtime.outcome import PassResult

_LABELS = DONE


def _entry_line(p: PlatformPlan) -> str:
    def named(uids: tuple[str, ...]) -> list[str]:
        return [m.name if (m := p.machines.get(uid)) is not None else uid for uid in uids]

    label = _LABELS[p.action]
    hosts = named((*p.control_plane, *p.workers))
    if p.action is Action.SCALE:
        added = named((*p.add_control_plane, *p.add_workers))
        removed = named((*p.remove_control_plane, *p.remove_workers))
        change = " ".join([*(f"+{h}" for h in added), *(f"-{h}" for h in removed)])
        detail = f"{change}; now {', '.join(hosts)}"
    elif p.action in (Action.REJECTED, Action.INVALID):
        detail = p.message
    elif p.action is Action.SUSPENDED:
        detail = f"{p.message}" + (f" (hosts {', '.join(hosts)})" if hosts else "")
    elif p.action is Action.DELETE and p.existing is not None:
        detail = f"cluster {p.existing.name}, hosts {', '.join(hosts) or '-'}"
    else:
        detail = f"hosts {', '.join(hosts) or '-'}"
    return f"  {label:<10} {p.namespace}/{p.name}: {detail}"


class PassView:
    """Turns the loop's passes into text: a block for a pass that did something, else a count.

    A pass "did something" when it acted on Palette (created, scaled, replaced or deleted a cluster),
    committed status, moved a platform's phase, ran at a new revision, or failed differently from the
    pass before. Every other pass is idle: it is counted, and :meth:`heartbeat` sums the count up in one
    line at most every ``heartbeat`` seconds. ``subject`` gives a commit's subject line; ``changes`` the
    lines of a status commit's body about pools and workloads (each with its reason), shown under it.
    """

    def __init__(
        self,
        subject: Callable[[str], str],
        heartbeat: float,
        now: float,
        changes: Callable[[str], list[str]] | None = None,
    ) -> None:
        self._subject = subject
        self._changes = changes
        self._every = heartbeat
        self._last_beat = now
        self._idle = 0
        self._revision: str | None = None
        self._phases: dict[PlatformKey, Phase] = {}
        self._error: str | None = None
        self.passes = 0

    def seen(self, result: PassResult) -> None:
        """Record a pass without showing it (the passes up to the first convergence have the table)."""
        self.passes += 1
        self._revision = result.revision or self._revision
        self._phases = dict(result.phases) or self._phases
        self._error = result.error

    def block(self, result: PassResult, now: float) -> list[str]:
        """The lines that show ``result``, or none when the pass was idle (then it is counted)."""
        self.passes += 1
        acted = [p for p in result.plan if p.action in _LABELS]
        moved: list[tuple[PlatformKey, Phase | None, Phase | None]] = []
        reported = bool(result.phases or result.plan)  # an error or standby pass says nothing of phases
        if reported:
            moved += [
                (key, self._phases.get(key), phase)
                for key, phase in sorted(result.phases.items())
                if self._phases.get(key) != phase
            ]
            moved += [(key, ph, None) for key, ph in sorted(self._phases.items()) if key not in result.phases]
        new_revision = result.revision is not None and result.revision != self._revision
        new_error = result.error is not None and result.error != self._error
        busy = result.commit or any(p.mutating for p in acted) or moved or new_revision or new_error
        self._revision = result.revision or self._revision
        self._phases = dict(result.phases) if reported else self._phases
        self._error = result.error
        if not busy:
            self._idle += 1
            return []
        self._idle, self._last_beat = 0, now
        revision = result.revision or "unknown"
        lines = [
            f"{_clock()} pass {self.passes}: {result.outcome} at revision {revision[:12]} "
            f'"{self._subject(revision)}" ({result.duration:.1f} s)'
        ]
        lines += [_entry_line(p) for p in acted]
        lines += [
            f"  {'phase':<10} {ns}/{name}: {old or '-'} -> {new or 'gone'}" for (ns, name), old, new in moved
        ]
        if result.commit:
            lines.append(f'  status commit {result.commit[:12]} "{self._subject(result.commit)}"')
            if self._changes is not None:
                lines += [f"    {line}" for line in self._changes(result.commit)]
        if result.error:
            lines.append(f"  error: {result.error}")
        return lines

    def heartbeat(self, now: float) -> str | None:
        """One line summing up the idle passes, when some happened and ``heartbeat`` seconds have passed."""
        if self._idle == 0 or now - self._last_beat < self._every:
            return None
        counts: dict[str, int] = {}
        for phase in self._phases.values():
            counts[str(phase)] = counts.get(str(phase), 0) + 1
        phases = ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items())) or "no platforms"
        state = f"still failing: {self._error}" if self._error else "nothing to do"
        count = f"{self._idle} pass" + ("" if self._idle == 1 else "es")
        line = (
            f"{_clock()} idle: {count} in {now - self._last_beat:.0f} s, {state} "
            f"(revision {(self._revision or 'unknown')[:12]}; {phases})"
        )
        self._idle, self._last_beat = 0, now
        return line


def _clock() -> str:
    return datetime.now().strftime("%H:%M:%S")


def commit_subject(remote: Path) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def subject(sha: str) -> str:
        if sha not in cache:
            proc = subprocess.run(
                ["git", "--git-dir", str(remote), "log", "-1", "--format=%s", sha, "--"],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                return "?"
            cache[sha] = proc.stdout.strip()
        return cache[sha]

    return subject


_POOL_LINES = ("ComputePool ", "AIWorkload ")


def commit_changes(remote: Path) -> Callable[[str], list[str]]:
    """The body lines of a status commit about pools and workloads: what moved and why."""

    def changes(sha: str) -> list[str]:
        proc = subprocess.run(
            ["git", "--git-dir", str(remote), "log", "-1", "--format=%b", sha, "--"],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return []
        return [line for line in proc.stdout.splitlines() if line.startswith(_POOL_LINES)]

    return changes


def follow(
    say: Callable[[str], None], passes: queue.Queue[PassResult], stop: threading.Event, view: PassView
) -> None:
    """Print each pass's block, and a heartbeat for idle ones, until a stop request."""
    while not stop.is_set():
        try:
            result = passes.get(timeout=0.25)
        except queue.Empty:
            result = None
        now = time.monotonic()
        if result is not None:
            lines = view.block(result, now)
            if lines:
                say("\n".join(lines))
        beat = view.heartbeat(now)
        if beat is not None:
            say(beat)
