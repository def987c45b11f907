"""OS errors are classified, never an unclassified crash of every pass: a full disk is transient (the
pass is retried with back-off), its message names the path and the free space left, and a metric counts
it. The controller against the emulator and a real git remote; the disk fills when the status is written."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from reconciler.emulator import EmulatorServer
from reconciler.metrics import PassOutcome
from reconciler.runtime.outcome import os_error
from tests._e2e_support import controller
from tests._git_support import RemoteRepo


def test_a_full_disk_is_transient_with_its_path_and_free_space() -> None:
    exc = OSError(errno.ENOSPC, "No space left on device", "/var/cache/reconciler/status/objects/ab")
    outcome, message, code = os_error(exc, free=lambda path: 4096)
    assert (outcome, code) == (PassOutcome.ERROR, "ENOSPC")
    assert message == (
        "ENOSPC: No space left on device (/var/cache/reconciler/status/objects/ab); 4,096 bytes free there: "
        "transient, the pass is retried with back-off"
    )


def test_an_os_error_without_a_path_names_the_cache_directory() -> None:
    outcome, message, code = os_error(OSError(errno.EROFS, "Read-only file system"), "/cache")
    assert code == "EROFS" and "(/cache)" in message and outcome is PassOutcome.ERROR


@pytest.mark.e2e
def test_a_pass_that_meets_a_full_disk_fails_classified_and_the_next_one_recovers(
    remote: RemoteRepo, emulator: EmulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = controller(remote, emulator, tmp_path)
    store = ctl.branch.branch
    write = store.write

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "cache" / "status"))

    monkeypatch.setattr(store, "write", full)
    try:
        result = ctl.reconcile_once()
        assert result.outcome is PassOutcome.ERROR
        assert result.error is not None and result.error.startswith("ENOSPC: No space left on device (")
        assert "bytes free there: transient" in result.error
        assert b'reconciler_os_errors_total{errno="ENOSPC"} 1.0' in ctl.metrics.render()
        monkeypatch.setattr(store, "write", write)
        after = ctl.reconcile_once()  # the disk has room again: the status is written
        assert "ENOSPC" not in (after.error or "") and after.commit is not None
    finally:
        ctl.close()
