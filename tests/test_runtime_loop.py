"""The loop (runtime/loop.py) with passes and a clock of the test's: no sleeping, every wait recorded."""

from __future__ import annotations

from reconciler.metrics import PassOutcome
from reconciler.runtime.loop import run_forever
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult
from tests._e2e_support import PinnedClock


class Wake:
    """A wake-up that never waits: it records how long the loop would have slept."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def wait(self, delay: float) -> bool:
        self.waits.append(delay)
        return False

    def clear(self) -> None:
        return None


class Stopping:
    def __init__(self) -> None:
        self.flag = False

    def is_set(self) -> bool:
        return self.flag


class Passes:
    def __init__(self, outcomes: list[PassOutcome]) -> None:
        self.outcomes = outcomes
        self.stopping = Stopping()
        self.wake = Wake()
        self.clock = PinnedClock()
        self.checks: list[bool] = []

    def reconcile_once(self, *, check_source: bool = True) -> PassResult:
        self.checks.append(check_source)
        outcome = self.outcomes.pop(0)
        self.stopping.flag = not self.outcomes
        return PassResult(outcome)

    def dashboard_requests(self) -> int:
        return 0


def test_failed_passes_back_off_under_a_doubling_ceiling_and_a_good_pass_waits_for_the_resync() -> None:
    errors = [PassOutcome.ERROR] * 4
    passes = Passes([*errors, PassOutcome.SUCCESS])
    options = ControllerOptions(repo="unused", interval=60.0, resync_interval=30.0)
    run_forever(passes, options)  # type: ignore[arg-type]
    *backoff, resync = passes.wake.waits
    assert [0 <= d <= ceiling for d, ceiling in zip(backoff, (2.0, 4.0, 8.0, 16.0), strict=True)] == [
        True
    ] * 4
    assert resync == 30.0  # the Palette resync comes before the next git check (60 s +- 10%)
    assert passes.checks == [True, False, False, False, False]  # git is checked every interval, not on retry
