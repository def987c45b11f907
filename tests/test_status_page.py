"""The status page (``status --html``): colours by health, problems first with their reasons, per-pool
usage, collapse for large fleets, text readable on a phone. Pure checks of the HTML, then headless
Chromium reading the laid-out DOM of a 10,000-host fleet at desktop and phone widths."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.inventory import HostState, Machine, Role
from reconciler.model.gpu import GpuFamily
from reconciler.status.basis import Basis
from reconciler.status.page import render
from reconciler.status.page_hosts import OPEN_LIMIT
from reconciler.status.page_summary import NAMES_SHOWN, attention_groups
from reconciler.status.view import ResourceRow
from tests._page_support import fleet, probe_page, probe_top


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


def _waiting(name: str, message: str) -> ResourceRow:
    return ResourceRow("AIWorkload", "ns", name, "Pending", "PoolCapacityExceeded", message, None,
                       status={"pool": "p"})  # fmt: skip


def test_identical_reasons_are_one_entry_with_counts_not_repeated() -> None:
    same = "needs 16 NVIDIA-A100 GPUs, 8 free in pool p"
    rows = [_waiting(f"w-{i:02d}", same) for i in range(45)] + [_waiting("other", "needs 64 GPUs")]
    rows.append(_row("bad", "Rejected", [], "GPULimitExceeded", "asks 99 GPUs, limit 8"))
    page = render(rows, [], revision="r")
    attention = page[page.index('id="attention"') : page.index("<h2>Pools")]
    assert attention.count(html.escape(same)) == 1, "each distinct message once"
    assert 'data-reason="PoolCapacityExceeded" data-count="46"' in attention
    assert "<b>46 AIWorkload</b> · Pending · PoolCapacityExceeded" in attention
    assert f'{html.escape(same)} <small class="count">(45)</small>' in attention
    assert f"<summary>{45 - NAMES_SHOWN} more</summary>" in attention, "the names past the first few fold"
    assert all(f'data-resource="ns/w-{i:02d}"' in attention for i in range(45)), "every resource is named"
    assert attention.index("ns/bad") < attention.index("ns/w-00"), "problems first"
    assert [g.count for g in attention_groups(rows)] == [1, 46]


def test_unavailable_hosts_are_counted_by_why_at_the_top() -> None:
    machines = [_machine(f"edge-{i}") for i in range(3)]
    for i in range(5):
        machines.append(replace(_machine(f"edge-u{i}", state=HostState.UNAVAILABLE),
                                unavailable_reason="health is unhealthy"))  # fmt: skip
    machines.append(replace(_machine("edge-p", state=HostState.UNAVAILABLE),
                            unavailable_reason="state is unpaired (not ready)"))  # fmt: skip
    page = render([], machines, revision="r")
    top = page[: page.index("<h2>Needs attention")]
    assert "<b>6</b> hosts unavailable" in top
    assert 'data-why="health is unhealthy" data-count="5"' in top
    assert 'data-why="state is unpaired (not ready)" data-count="1"' in top
    assert "No host is unavailable." in render([], machines[:3], revision="r")


def test_the_header_says_when_and_from_what_the_page_was_made() -> None:
    basis = Basis("1a2b3c4d" * 5, "9f8e7d6c" * 5, "2026-12-02T08:10:00Z", "none")
    page = render([], [], revision=basis.revision, basis=basis, made="2026-12-02T09:00:00Z")
    header = page[page.index('id="basis"') :].split("</p>")[0]
    assert "made 2026-12-02T09:00:00Z from status 9f8e7d6 of 2026-12-02T08:10:00Z (config 1a2b3c4)" in header
    unfetched = replace(basis, fetched=False)
    assert "not fetched" in render([], [], revision=None, basis=unfetched, made="t")


@pytest.mark.parametrize("width", [1400, 390])
def test_the_basis_and_unavailable_counts_are_on_the_first_screen_at_desktop_and_phone_width(
    tmp_path: Path, width: int
) -> None:
    rows, machines, mig = fleet(10_000)
    basis = Basis("a" * 40, "b" * 40, "2026-12-02T08:10:00Z", "none")
    page = render(rows, machines, revision="a" * 40, mig=mig, basis=basis, made="2026-12-02T09:00:00Z")
    found = probe_top(page, tmp_path, width, ["#basis", "#unavailable-total", "#unavailable", "#attention"])
    assert found["width"] <= width, "no horizontal scrolling"
    unhealthy = sum(1 for m in machines if m.state is HostState.UNAVAILABLE)
    assert f"{unhealthy} hosts unavailable" in found["#unavailable-total"]["text"]
    for selector in ("#basis", "#unavailable-total", "#unavailable"):
        box = found[selector]
        assert box["bottom"] <= 900, f"{selector} is below the first screen at {width} px"
        assert box["right"] <= width and box["font"] >= 11
    assert "from status bbbbbbb of 2026-12-02T08:10:00Z" in found["#basis"]["text"]
    assert found["#attention"]["top"] < 900 * 2, "what needs attention follows closely"
