"""The status page under test: a large fleet (10,000 hosts in racks, held by platforms and pools of every
health, with MIG layouts and pending workloads; deterministic), and headless Chromium to lay it out."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reconciler.inventory import HostState, Machine, Role
from reconciler.model.gpu import GpuFamily
from reconciler.status.view import ResourceRow

FAMILIES = (GpuFamily("NVIDIA-H100"), GpuFamily("NVIDIA-A100"), GpuFamily("NVIDIA-L40S"), None)
PHASES = ("Running", "Running", "Running", "Provisioning", "Degraded", "Running", "Suspended", "Running")
REASONS = {
    "Running": "Provisioned",
    "Provisioning": "Provisioning",
    "Degraded": "PaletteUnavailable",
    "Suspended": "Suspended",
}


def _ready(phase: str, reason: str, message: str) -> dict[str, Any]:
    return {"phase": phase, "conditions": [{"type": "Ready", "reason": reason, "message": message}]}


def fleet(hosts: int = 10_000) -> tuple[list[ResourceRow], list[Machine], dict[str, list[dict[str, Any]]]]:
    machines = []
    for i in range(hosts):
        family = FAMILIES[i % len(FAMILIES)]
        state = HostState.UNAVAILABLE if i % 97 == 0 else HostState.AVAILABLE
        machines.append(
            Machine(
                uid=f"edge-{i:05d}",
                name=f"{'gpu' if family else 'cpu'}-{i:05d}",
                arch="amd64",
                cpus=64,
                gpu_family=family,
                gpu_count=8 if family else 0,
                gpu_memory_bytes=80 << 30 if family else None,
                role=Role.CONTROL_PLANE if i % 50 == 0 else Role.WORKER,
                worker_tagged=False,
                resource_groups={"rack": f"r{(i // 500):02d}"},
                state=state,
                unavailable_reason="health: unhealthy" if state is HostState.UNAVAILABLE else "",
            )
        )
    usable = [m for m in machines if m.state is HostState.AVAILABLE]
    rows: list[ResourceRow] = []
    for p in range(60):  # 60 platforms of 100 hosts: 6,000 held, the rest free
        phase = PHASES[p % len(PHASES)]
        held = [m.uid for m in usable[p * 100 : (p + 1) * 100]]
        status = _ready(phase, REASONS[phase], f"cluster team-{p % 6}-platform-{p} is {phase}")
        rows.append(
            ResourceRow(
                "MLPlatform",
                f"team-{p % 6}",
                f"platform-{p}",
                phase,
                REASONS[phase],
                status["conditions"][0]["message"],
                f"team-{p % 6}-platform-{p}",
                {"NVIDIA-H100": 200},
                held,
                "2026-01-01T00:00:00Z",
                status=status,
            )
        )
    pool_hosts = [m.uid for m in usable[6000:6040] if m.gpu_family]
    pool_status = {
        **_ready("Running", "Provisioned", "cluster team-0-mig-pool is Running"),
        "mode": "shared",
        "capacity": {"NVIDIA-A100": {"total": 80, "admitted": 72, "free": 8}},
        "admitted": ["team-0/serve"],
        "migSlices": {"used": 12, "free": 4, "stranded": 0},
        "scaling": {"decision": "hold", "reason": "ScalingLimited"},
    }
    rows.append(
        ResourceRow(
            "ComputePool",
            "team-0",
            "mig-pool",
            "Running",
            "Provisioned",
            "ok",
            "team-0-mig-pool",
            {},
            pool_hosts,
            status=pool_status,
        )
    )
    rows.append(
        ResourceRow(
            "AIWorkload",
            "team-0",
            "serve",
            "Running",
            "Admitted",
            "admitted",
            "team-0-mig-pool",
            {},
            pool_hosts[:2],
            status={"pool": "mig-pool"},
        )
    )
    for w in range(3):
        message = f"needs {16 + w} NVIDIA-A100 GPUs, 8 free in pool mig-pool (80 total, 72 admitted)"
        rows.append(
            ResourceRow(
                "AIWorkload",
                "team-0",
                f"train-{w}",
                "Pending",
                "PoolCapacityExceeded",
                message,
                None,
                status={"pool": "mig-pool"},
            )
        )
    mig = {
        uid: [
            {
                "gpu": 0,
                "instances": [
                    {"profile": "3g.40gb", "start": 0, "workload": "team-0/serve"},
                    {"profile": "2g.20gb", "start": 4, "workload": "team-0/serve"},
                    {"profile": "1g.10gb", "start": 6, "workload": None},
                ],
            }
        ]
        for uid in pool_hosts[:2]
    }
    return sorted(rows, key=lambda r: (r.namespace, r.name, r.kind)), machines, mig


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (CI must install it: see .ci/run)")
        pytest.skip("chromium is not installed")
    return found


def headless(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# Headless Chromium lays a page out at least 500 px wide, so the page is probed inside an iframe of the
# wanted width (srcdoc: same origin, readable). The probe opens every <details>, then records on the
# outer <body> the smallest font size of any text inside a host tile, how many such texts there are,
# and how wide and tall the page is laid out (before opening).
PROBE = """<script>
function probe(frame) {
  const doc = frame.contentDocument, root = doc.documentElement;
  const closed = doc.querySelectorAll('details:not([open])').length;
  const width = root.scrollWidth, height = root.scrollHeight;
  doc.querySelectorAll('details').forEach(d => { d.open = true; });
  let min = Infinity, texts = 0;
  doc.querySelectorAll('.host, .host *').forEach(el => {
    if ([...el.childNodes].some(c => c.nodeType === 3 && c.textContent.trim())) {
      texts++; min = Math.min(min, parseFloat(frame.contentWindow.getComputedStyle(el).fontSize));
    }
  });
  document.body.dataset.probe = JSON.stringify({min, texts, width, height, closed});
}
</script>"""


def _probed(page: str, file: Path, script: str, onload: str, width: int, height: int) -> Any:
    """What ``script``'s probe, run by ``onload`` (an attribute) on ``page`` in an iframe of ``width`` x
    ``height``, recorded on the outer <body> (written to ``file`` and laid out by headless Chromium)."""
    binary = chromium()
    frame = (
        f'<iframe style="border:0" width="{width}" height="{height}" {onload} '
        f'srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )
    file.write_text(f"<!doctype html><html><body style='margin:0'>{script}{frame}</body></html>", "utf-8")
    dom = headless(binary, file.parent, "--window-size=1400,900", "--dump-dom", file.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, "the probe did not run"
    return json.loads(html.unescape(found.group(1)))


def probe_page(page: str, tmp_path: Path, width: int, height: int = 900) -> dict[str, float]:
    result: dict[str, float] = _probed(
        page, tmp_path / f"probe-{width}.html", PROBE, 'onload="probe(this)"', width, height
    )
    return result


# Where the page's top elements are laid out (inside an iframe of the wanted width, as above): each
# selector's top and bottom edge, its width and the smallest font size of its text, and the page width.
TOP_PROBE = """<script>
function probeTop(frame, selectors) {
  const doc = frame.contentDocument, win = frame.contentWindow;
  const out = {width: doc.documentElement.scrollWidth};
  for (const sel of selectors) {
    const el = doc.querySelector(sel);
    if (!el) { out[sel] = null; continue; }
    const box = el.getBoundingClientRect();
    out[sel] = {top: box.top, bottom: box.bottom, right: box.right,
                font: parseFloat(win.getComputedStyle(el).fontSize), text: el.textContent};
  }
  document.body.dataset.probe = JSON.stringify(out);
}
</script>"""


def probe_top(
    page: str, tmp_path: Path, width: int, selectors: list[str], height: int = 900
) -> dict[str, Any]:
    onload = f"onload='probeTop(this, {html.escape(json.dumps(selectors), quote=True)})'"
    result: dict[str, Any] = _probed(page, tmp_path / f"top-{width}.html", TOP_PROBE, onload, width, height)
    return result
