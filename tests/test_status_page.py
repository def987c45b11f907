"""The status page (``status --html``): colours by health, problems first with their reasons, per-pool
usage, collapse for large fleets, text readable on a phone. Pure checks of the HTML, then headless
Chromium reading the laid-out DOM of a 10,000-host fleet at desktop and phone widths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler.inventory import HostState, Machine, Role
from reconciler.model.gpu import GpuFamily
from reconciler.status.page import OPEN_LIMIT, render
from reconciler.status.view import ResourceRow
from tests._page_support import fleet, probe_page


def _machine(uid: str, family: str | None = "NVIDIA-A100", state: HostState = HostState.AVAILABLE) -> Machine:
    return Machine(
        uid=uid,
        name=uid.replace("edge", "host"),
        arch="amd64",
        cpus=8,
        gpu_family=GpuFamily(family) if family else None,
        gpu_count=8 if family else 0,
        gpu_memory_bytes=None,
        role=Role.WORKER,
        worker_tagged=False,
        state=state,
    )


def _row(name: str, phase: str, hosts: list[str], reason: str = "r", message: str = "m") -> ResourceRow:
    return ResourceRow("MLPlatform", "ns", name, phase, reason, message, f"ns-{name}", {}, hosts)


def _tile_class(page: str, uid: str) -> str:
    found = re.search(rf'<div class="host ([a-z ]+)" data-host="{uid}"', page)
    assert found, uid
    return found.group(1)


def test_tiles_are_coloured_by_the_holders_health_not_by_its_name() -> None:
    rows = [
        _row("a", "Running", ["edge-1"]),
        _row("b", "Provisioning", ["edge-2"]),
        _row("c", "Degraded", ["edge-3"]),
        _row("d", "Rejected", []),
    ]
    machines = [_machine(f"edge-{i}") for i in range(1, 5)] + [
        _machine("edge-5", state=HostState.UNAVAILABLE)
    ]
    page = render(rows, machines, revision="r")
    assert _tile_class(page, "edge-1") == "ok"
    assert _tile_class(page, "edge-2") == "progress"
    assert _tile_class(page, "edge-3") == "problem"
    assert _tile_class(page, "edge-4") == "neutral"  # free
    assert _tile_class(page, "edge-5") == "neutral unavailable"
    assert "hsl(" not in page and '<meta name="viewport"' in page


def test_problems_come_first_with_their_reasons_then_what_waits() -> None:
    rows = [
        _row("fine", "Running", []),
        _row("late", "Pending", [], "PoolNotReady", "pool p is Provisioning"),
        _row("bad", "Rejected", [], "GPULimitExceeded", "asks 99 GPUs, limit 8"),
    ]
    page = render(rows, [], revision="r")
    attention = page[page.index('id="attention"') : page.index("<h2>Pools")]
    assert attention.index("ns/bad") < attention.index("ns/late")
    assert "GPULimitExceeded: asks 99 GPUs, limit 8" in attention
    assert "PoolNotReady: pool p is Provisioning" in attention and "ns/fine" not in attention


def test_a_pool_card_shows_usage_per_family_and_why_its_workloads_wait() -> None:
    rows, machines, mig = fleet(200)
    page = render(rows, machines, revision="r", mig=mig)
    card = page[page.index('data-pool="team-0/mig-pool"') :]
    card = card[: card.index("</div></div>") if "</div></div>" in card else None]
    assert "<b>72</b> of 80 GPUs admitted, 8 free" in card and 'style="width:90.0%"' in card
    assert "waiting: <b>team-0/train-0</b> · PoolCapacityExceeded: needs 16 NVIDIA-A100 GPUs" in card
    assert "MIG slices: 12 used, 4 free, 0 stranded" in card and "scaling: hold (ScalingLimited)" in card


def test_hostile_names_are_escaped() -> None:
    rows = [_row('<img src=x onerror="alert(1)">', "Pending", [], "X", "<script>alert(1)</script>")]
    page = render(rows, [_machine("edge-<b>")], revision="<i>")
    assert "<script>alert" not in page and "<img src=x" not in page and "edge-<b>" not in page


def test_large_groups_start_collapsed_and_small_ones_open() -> None:
    small = render([], [_machine(f"edge-{i}") for i in range(OPEN_LIMIT)], revision="r")
    large = render([], [_machine(f"edge-{i}") for i in range(OPEN_LIMIT + 1)], revision="r")
    assert '<details class="group" open>' in small
    assert '<details class="group">' in large and '<details class="group" open>' not in large


@pytest.mark.parametrize(("width", "screens"), [(1400, 3), (390, 7)])
def test_ten_thousand_hosts_fit_in_a_few_screens_and_tile_text_stays_readable(
    tmp_path: Path, width: int, screens: int
) -> None:
    rows, machines, mig = fleet(10_000)
    page = render(rows, machines, revision="a" * 40, mig=mig)
    probe = probe_page(page, tmp_path, width)
    assert probe["texts"] >= 3 * 10_000, "every tile's name, GPUs and holder are text"
    assert probe["min"] >= 11, f"tile text of {probe['min']} px"
    assert probe["width"] <= width, "no horizontal scrolling of the page"
    assert probe["height"] <= screens * 900, f"{probe['height']} px tall collapsed"
    assert probe["closed"] >= 6
