"""The alert rules of `deploy/alerts/reconciler-rules.yaml` (the file docs/operations.md documents), run
by the real `promtool test rules` on series shaped as the reconciler exports them: a healthy writer and
its standby, a start, a takeover, one 429, a real Palette outage, no writer at all.

promtool's clock starts at the Unix epoch, so a timestamp gauge of 0 ("no successful pass yet") reads
as old as the test time; the cases start their processes at minute 60, where 0 is an hour old, as it is
(by far) in a real cluster. Off CI a missing promtool skips; on CI (Debian's `prometheus`) it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

RULES = Path(__file__).resolve().parent.parent / "deploy" / "alerts" / "reconciler-rules.yaml"
ALERTS = (
    "ReconcilerDown",
    "ReconcilerStuck",
    "ReconcilerNoWriter",
    "ReconcilerInvalidConfig",
    "ReconcilerPalettePushingBack",
    "ReconcilerWorkloadPendingLong",
)
MINUTES = 180
JOB = "paletteai-reconciler"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed (CI installs Debian's prometheus: see .ci/run)")
        pytest.skip("promtool is not installed")
    return found


def _rules() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def tracking(start: int, first_pass: int = 1, until: int = MINUTES) -> str:
    """A last-successful-pass gauge (seconds) of a process started at minute ``start``: 0 until its
    first pass ends ``first_pass`` minutes later, then the current time (passes every minute)."""
    before = f"_x{start - 1} " if start else ""
    zeros = " ".join(["0"] * first_pass)
    stamped = (start + first_pass) * 60
    return f"{before}{zeros} {stamped}+60x{until - start - first_pass}".strip()


def steady(value: float, start: int = 0, until: int = MINUTES) -> str:
    return f"{'_x' + str(start - 1) + ' ' if start else ''}{value:g}x{until - start}"


def counter(per_minute: float, start: int = 0, until: int = MINUTES) -> str:
    return f"{'_x' + str(start - 1) + ' ' if start else ''}0+{per_minute:g}x{until - start}"


def series(instance: str, **values: str) -> list[dict[str, str]]:
    names = {
        "lease": "reconciler_lease_held",
        "success": "reconciler_last_successful_pass_timestamp_seconds",
        "invalid": 'reconciler_passes_total{outcome="invalid"}',
        "pending_age": 'reconciler_pool_oldest_pending_workload_age_seconds{namespace="team-a",pool="gpus"}',
        "up": "up",
    }
    out = []
    for key, value in values.items():
        if key.startswith("status_"):
            name = f'reconciler_palette_requests_total{{status="{key.removeprefix("status_")}"}}'
        else:
            name = names[key]
        selector = f'job="{JOB}",instance="{instance}"'
        metric = name.replace("{", "{" + selector + ",") if "{" in name else f"{name}{{{selector}}}"
        out.append({"series": metric, "values": value})
    return out


def firing(alert: str, **labels: str) -> dict[str, Any]:
    rule = _rules()[alert]
    return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": rule["annotations"]}


def quiet(minutes: list[int]) -> list[dict[str, Any]]:
    """Every alert silent at each of ``minutes``."""
    return [{"eval_time": f"{m}m", "alertname": a, "exp_alerts": []} for m in minutes for a in ALERTS]


def _scraped(input_series: list[dict[str, str]]) -> list[dict[str, str]]:
    """Prometheus's ``up`` of 1 for every instance the case exports series of and gives no ``up`` of its
    own: a process that exports is a process scraped."""
    instances = {m for item in input_series for m in re.findall(r'instance="([^"]+)"', item["series"])}
    given = {m for item in input_series if item["series"].startswith("up{")
             for m in re.findall(r'instance="([^"]+)"', item["series"])}  # fmt: skip
    return [
        {"series": f'up{{job="{JOB}",instance="{i}"}}', "values": steady(1)}
        for i in sorted(instances - given)
    ]


def run_case(
    tmp_path: Path,
    name: str,
    input_series: list[dict[str, str]],
    checks: list[dict[str, Any]],
    *,
    scraped: bool = True,
) -> None:
    if scraped:
        input_series = [*input_series, *_scraped(input_series)]
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{"name": name, "interval": "1m", "input_series": input_series, "alert_rule_test": checks}],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        [_promtool(), "test", "rules", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def writer_and_standby(start: int = 60) -> list[dict[str, str]]:
    """Both replicas up from minute ``start``: the writer passes every minute, 200s from Palette."""
    return [
        *series(
            "writer",
            lease=steady(1, start),
            success=tracking(start),
            invalid=counter(0, start),
            status_200=counter(20, start),
        ),
        *series("standby", lease=steady(0, start), success=steady(0, start), invalid=counter(0, start)),
    ]


def test_the_rules_file_is_valid_for_promtool() -> None:
    done = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(_rules()) == set(ALERTS)


def test_a_healthy_writer_and_standby_and_their_start_fire_nothing(tmp_path: Path) -> None:
    """The standby's last successful pass is 0 for ever and it holds no lease: nothing fires for it;
    the writer's first pass takes three minutes after its start (its gauge is 0 meanwhile)."""
    start = 60
    slow_start = [
        *series("writer", lease=steady(1, start), success=tracking(start, first_pass=3)),
        *series("writer", status_200=counter(20, start), invalid=counter(0, start)),
        *series("standby", lease=steady(0, start), success=steady(0, start), invalid=counter(0, start)),
    ]
    run_case(tmp_path, "healthy", slow_start, quiet([60, 61, 63, 66, 70, 90, 120, 179]))


def test_a_takeover_fires_nothing(tmp_path: Path) -> None:
    """At minute 100 the writer stops (releasing the lease); the standby, whose gauge is still 0, takes
    over and passes two minutes later. A replacement standby starts at minute 101."""
    takeover = [
        *series(
            "old", lease=steady(1, 60, 100), success=tracking(60, until=100), status_200=counter(20, 60, 100)
        ),
        *series(
            "b", lease=f"_x59 0x40 1x{MINUTES - 100}", success=f"_x59 0x42 {102 * 60}+60x{MINUTES - 102}"
        ),
        *series("b", status_200=f"_x99 0+20x{MINUTES - 100}"),
        *series("c", lease=steady(0, 101), success=steady(0, 101)),
    ]
    run_case(tmp_path, "takeover", takeover, quiet([99, 100, 101, 102, 104, 106, 110, 130, 179]))


def test_one_429_never_fires(tmp_path: Path) -> None:
    case = [*writer_and_standby(), *series("writer", status_429=f"_x59 0x30 1x{MINUTES - 90}")]
    run_case(tmp_path, "one-429", case, quiet([90, 91, 93, 95, 100, 105, 110, 120, 150, 179]))


def test_a_palette_outage_fires_stuck_and_pushing_back(tmp_path: Path) -> None:
    """Palette answers 503 from minute 100: passes fail (the last success stays at minute 100), every
    request is a 503. Pushing back fires after 5 + 15 minutes (threshold window, then `for`), stuck
    after 10 + 5. When Palette is back at minute 150, both resolve."""
    start, down, back = 60, 100, 150
    outage = [
        *series(
            "writer",
            lease=steady(1, start),
            success=(
                f"_x{start - 1} 0 {(start + 1) * 60}+60x{down - start - 1} "
                f"{down * 60}x{back - down - 1} {back * 60}+60x{MINUTES - back}"
            ),
            invalid=counter(0, start),
            status_200=f"_x{start - 1} 0+20x{down - start} {20 * (down - start)}x{back - down} "
            f"{20 * (down - start)}+20x{MINUTES - back - 1}",
            status_503=(
                f"_x{start - 1} 0x{down - start} 0+20x{back - down} {20 * (back - down)}x{MINUTES - back - 1}"
            ),
        ),
        *series("standby", lease=steady(0, start), success=steady(0, start), invalid=counter(0, start)),
    ]
    checks = [
        *quiet([100, 105, 110]),
        {
            "eval_time": "116m",
            "alertname": "ReconcilerStuck",
            "exp_alerts": [firing("ReconcilerStuck", job=JOB, instance="writer")],
        },
        {"eval_time": "114m", "alertname": "ReconcilerPalettePushingBack", "exp_alerts": []},
        {
            "eval_time": "121m",
            "alertname": "ReconcilerPalettePushingBack",
            "exp_alerts": [firing("ReconcilerPalettePushingBack", job=JOB, instance="writer")],
        },
        {"eval_time": "121m", "alertname": "ReconcilerNoWriter", "exp_alerts": []},
        *quiet([160, 179]),
    ]
    run_case(tmp_path, "outage", outage, checks)


def test_no_writer_fires_and_an_invalid_revision_warns(tmp_path: Path) -> None:
    """From minute 100 neither replica holds the lease (the Kubernetes API is down): after 5 minutes
    ReconcilerNoWriter fires; an invalid pass at minute 70 warns for an hour."""
    case = [
        *series("a", lease=f"_x59 1x40 0x{MINUTES - 100}", success=tracking(60, until=100)),
        *series("a", invalid=f"_x59 0x10 1x{MINUTES - 70}"),
        *series("b", lease=steady(0, 60), success=steady(0, 60)),
    ]
    checks = [
        {"eval_time": "103m", "alertname": "ReconcilerNoWriter", "exp_alerts": []},
        {
            "eval_time": "106m",
            "alertname": "ReconcilerNoWriter",
            "exp_alerts": [firing("ReconcilerNoWriter", job=JOB)],
        },
        {
            "eval_time": "75m",
            "alertname": "ReconcilerInvalidConfig",
            "exp_alerts": [firing("ReconcilerInvalidConfig", job=JOB, instance="a", outcome="invalid")],
        },
        {"eval_time": "135m", "alertname": "ReconcilerInvalidConfig", "exp_alerts": []},
    ]
    run_case(tmp_path, "no-writer", case, checks)


def test_the_docs_show_the_rules_as_the_file_has_them() -> None:
    """docs/operations.md documents every rule of the file, and every expression it quotes is the file's."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    section = docs[docs.index("### Alerts") :]
    section = section[: section.index("\n### ", 5)] if "\n### " in section[5:] else section
    expressions = {" ".join(rule["expr"].split()) for rule in _rules().values()}
    for alert in ALERTS:
        assert f"`{alert}`" in section, alert
    quoted = [" ".join(q.split()) for q in re.findall(r"`([^`]*reconciler_[^`]*)`", section)]
    shown = [q for q in quoted if any(op in q for op in (">", "==", "and"))]
    assert shown, "the docs quote no expression"
    for expression in shown:
        assert any(expression in full for full in expressions), expression
    assert "deploy/alerts/reconciler-rules.yaml" in section


def test_a_workload_pending_for_an_hour_warns_once_only_from_the_writer(tmp_path: Path) -> None:
    """A workload of pool gpus waits from minute 70 (the writer's age gauge grows from then) and is
    admitted at minute 150; a standby that wrote long ago is not scraped for pools (its figures were
    dropped with the lease), and a stale series it had would not count anyway."""
    case = [
        *writer_and_standby(),
        *series("writer", pending_age=f"_x59 0x10 0+60x80 0x{MINUTES - 150}"),
        *series("standby", pending_age=f"_x59 7200+60x{MINUTES - 60}"),
    ]
    labels = {"job": JOB, "instance": "writer", "namespace": "team-a", "pool": "gpus"}
    checks = [
        *quiet([100, 129]),
        {
            "eval_time": "131m",
            "alertname": "ReconcilerWorkloadPendingLong",
            "exp_alerts": [firing("ReconcilerWorkloadPendingLong", **labels)],
        },
        *quiet([151, 179]),
    ]
    run_case(tmp_path, "pending-long", case, checks)


def test_every_replica_down_fires_and_so_does_no_replica_at_all(tmp_path: Path) -> None:
    """From minute 100 both replicas fail their scrapes (``up`` 0; their own series go stale): after 5
    minutes ReconcilerDown fires for the job. With nothing scraped at all it fires too (absent)."""
    down = [
        *series("writer", lease=steady(1, 60, 100), success=tracking(60, until=100), up="_x59 1x40 0x80"),
        *series("standby", lease=steady(0, 60, 100), success=steady(0, 60, 100), up="_x59 1x40 0x80"),
    ]
    checks = [
        *[{"eval_time": f"{m}m", "alertname": "ReconcilerDown", "exp_alerts": []} for m in (70, 99, 103)],
        {
            "eval_time": "106m",
            "alertname": "ReconcilerDown",
            "exp_alerts": [firing("ReconcilerDown", job=JOB)],
        },
    ]
    run_case(tmp_path, "all-down", down, checks)
    one_up = [*down, *series("third", up="_x59 1x120")]
    run_case(
        tmp_path, "one-up", one_up, [{"eval_time": "120m", "alertname": "ReconcilerDown", "exp_alerts": []}]
    )
    nothing = [{"series": 'reconciler_lease_held{job="other",instance="x"}', "values": steady(1)}]
    checks = [
        {"eval_time": "4m", "alertname": "ReconcilerDown", "exp_alerts": []},
        {"eval_time": "6m", "alertname": "ReconcilerDown", "exp_alerts": [firing("ReconcilerDown")]},
    ]
    run_case(tmp_path, "none-scraped", nothing, checks, scraped=False)
