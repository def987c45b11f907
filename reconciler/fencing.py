"""The fence: a process whose lease may have run out sends nothing more (docs/leases.md, "Fencing").

A lease is only as good as the moment a write is sent. A holder paused for longer than its lease (a
stopped process, a long garbage collection, a host that froze) wakes up believing it still holds it,
while a standby may already have taken over and acted. So every write (each Palette request that
changes something, each attempt of it, each push of the status branch) first asks the fence, at the
moment it is sent, and the fence answers from one number kept by the lease: its *write deadline*.

The deadline is on the monotonic clock (it never jumps with the wall clock, and it keeps running while
the process is stopped): the moment the last successful renewal *started* (read before the request
that recorded it, never later) plus the lease's duration minus a safety margin. A renewal extends it; a
renewal that fails or is lost to another holder does not, and the deadline passes before any standby
can see the lease expired. Past it, :meth:`WriteDeadline.check` raises :class:`Fenced`: the write is
not sent, the pass ends with what it had done, and the loop goes back to standing by until the lease
is taken again.

Pure: no I/O; the monotonic clock is injected (tests pin it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

Fence = Callable[[], None]
"""Called right before a write is sent; raises :class:`Fenced` when it must not be."""


class Fenced(Exception):
    """This process may no longer write: its lease's write deadline has passed (or it never held it)."""


def never() -> None:
    """The fence of ``--lease none`` (the operator promises one instance) and of a dry run (it writes
    nothing anyway): it never fires."""


class WriteDeadline:
    """The monotonic deadline until which the holder of a lease may write.

    ``window`` is the lease's duration minus its safety margin. :meth:`renewed` is told when a renewal
    (or the first acquisition) that started at ``started`` (monotonic seconds) succeeded; :meth:`lost`
    when the lease is lost, released or cannot be trusted. One attribute, swapped whole: thread-safe
    for readers without a lock.
    """

    def __init__(self, window: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        if window <= 0:
            raise ValueError("the lease must last longer than its safety margin")
        self.window = window
        self._monotonic = monotonic
        self._renewed: float | None = None

    def renewed(self, started: float) -> None:
        """A renewal that started at ``started`` succeeded: writes are allowed until ``started + window``."""
        self._renewed = started

    def lost(self) -> None:
        """No renewal counts any more: every write is refused until the next successful one."""
        self._renewed = None

    @property
    def renewed_at(self) -> float | None:
        """When the last renewal that counts started (monotonic seconds), None when none does."""
        return self._renewed

    def deadline(self) -> float | None:
        """The monotonic moment writes stop, None when the lease is not held."""
        renewed = self._renewed
        return None if renewed is None else renewed + self.window

    def holds(self) -> bool:
        """True while a write may be sent (strictly before the deadline)."""
        deadline = self.deadline()
        return deadline is not None and self._monotonic() < deadline

    def check(self, identity: str = "this process") -> None:
        """The fence: raise :class:`Fenced` unless a write may be sent now."""
        deadline = self.deadline()
        if deadline is None:
            raise Fenced(f"{identity} does not hold the writer lease: nothing is sent")
        late = self._monotonic() - deadline
        if late >= 0:
            raise Fenced(
                f"the writer lease of {identity} could not be renewed in time "
                f"({late:.1f} s past its write deadline): nothing more is sent"
            )
