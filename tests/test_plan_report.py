"""Plans for people (reconciler/plan_report.py): markdown within GitHub's comment limit with a summary
first and host names beside uids; text that never folds a uid."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.plan_report import MARKDOWN_LIMIT, changes_only, render_markdown, render_text

ACTIONS = ["create", "scale", "unchanged", "rejected", "delete", "invalid", "suspended", "replace"]


def _plan(n: int, hosts_each: int = 6) -> tuple[dict[str, Any], dict[str, str]]:
    names: dict[str, str] = {}
    platforms = []
    for i in range(n):
        workers = [f"edge-{i:04d}{j:02d}0123456789abcdef0123" for j in range(hosts_each)]
        names.update({uid: f"gpu-node-{i:04d}-{j}" for j, uid in enumerate(workers)})
        action = ACTIONS[i % len(ACTIONS)]
        platforms.append(
            {
                "namespace": f"team-{i % 20:02d}",
                "name": f"platform-{i:04d}",
                "action": action,
                "reason": "InsufficientCompute" if action == "rejected" else None,
                "message": "needs 8 NVIDIA-H100 GPUs, 4 available" if action == "rejected" else "",
                "controlPlane": [],
                "workers": workers,
                "gpus": {"NVIDIA-H100": 8},
            }
        )
    return {
        "revision": "a" * 40,
        "platforms": platforms,
        "pools": [],
        "workloads": [],
        "diagnostics": [],
    }, names


def _rows_shown(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith("| ") and "`team-" in line)


def test_a_thousand_platforms_fit_in_one_comment_and_the_rest_is_counted() -> None:
    plan, names = _plan(1000)
    text = render_markdown(plan, names)
    assert len(text) <= MARKDOWN_LIMIT
    shown = _rows_shown(text)
    match = re.search(r"_(\d+) more entries do not fit", text)
    assert match is not None
    assert shown + int(match.group(1)) == 1000
    for line in text.splitlines():
        if line.startswith("|"):
            assert line.endswith("|"), f"a table row was cut: {line[-40:]}"


def test_summary_table_comes_before_any_detail_and_counts_everything() -> None:
    plan, names = _plan(1000)
    text = render_markdown(plan, names)
    assert text.index("| Platforms |") < text.index("<details")
    summary = next(line for line in text.splitlines() if line.startswith("| Platforms |"))
    assert sum(int(cell) for cell in summary.strip("|").split("|")[1:]) == 1000


def test_problems_are_listed_first_and_open() -> None:
    plan, names = _plan(40)
    text = render_markdown(plan, names)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`team-" in line]
    actions = [row.split("|")[1].strip() for row in rows]
    assert actions[: actions.count("rejected")] == ["rejected"] * actions.count("rejected")
    assert "<details open>" in text


def test_markdown_names_hosts_beside_their_uids() -> None:
    plan, names = _plan(3)
    text = render_markdown(plan, names)
    uid = plan["platforms"][0]["workers"][0]
    assert f"{names[uid]} (`{uid}`)" in text


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 400), hosts_each=st.integers(0, 12), limit=st.integers(2_000, 60_000))
def test_markdown_never_exceeds_its_limit_and_loses_no_count(n: int, hosts_each: int, limit: int) -> None:
    plan, names = _plan(n, hosts_each)
    text = render_markdown(plan, names, limit=limit)
    assert len(text) <= limit
    match = re.search(r"_(\d+) more entries do not fit", text)
    assert _rows_shown(text) + (int(match.group(1)) if match else 0) == n


def test_text_prints_one_unfolded_line_per_entry() -> None:
    plan, names = _plan(50, hosts_each=10)
    text = render_text(plan, names)
    for p in plan["platforms"]:
        line = next(line for line in text.splitlines() if f" {p['namespace']}/{p['name']} " in line)
        for uid in p["workers"]:
            assert uid in line
    assert len([line for line in text.splitlines() if "team-" in line]) == 50


WORKLOAD_ACTIONS = ["admit", "admitted", "pending", "remove", "rejected", "invalid", "suspended"]


@settings(max_examples=50, deadline=None)
@given(
    platforms=st.lists(st.sampled_from(ACTIONS), max_size=20),
    pools=st.lists(st.sampled_from(ACTIONS), max_size=5),
    workloads=st.lists(st.sampled_from(WORKLOAD_ACTIONS), max_size=10),
)
def test_changes_only_leaves_out_exactly_the_unchanged_entries_and_keeps_every_list(
    platforms: list[str], pools: list[str], workloads: list[str]
) -> None:
    def entries(actions: list[str]) -> list[dict[str, Any]]:
        return [{"namespace": "ns", "name": f"e{i}", "action": a} for i, a in enumerate(actions)]

    plan: dict[str, Any] = {
        "revision": None,
        "platforms": entries(platforms),
        "pools": entries(pools),
        "workloads": entries(workloads),
        "diagnostics": [],
    }
    kept = changes_only(plan)
    assert set(kept) == set(plan) and kept["diagnostics"] == plan["diagnostics"]
    for key in ("platforms", "pools", "workloads"):
        assert kept[key] == [e for e in plan[key] if e["action"] not in ("unchanged", "admitted")]
    assert changes_only(kept) == kept
    assert len(plan["platforms"]) == len(platforms), "the input is not changed"


def test_changes_only_adds_no_list_the_plan_does_not_have() -> None:
    plan = {"revision": None, "platforms": [{"action": "unchanged"}], "diagnostics": []}
    assert changes_only(plan) == {"revision": None, "platforms": [], "diagnostics": []}


def test_an_empty_changes_only_plan_says_there_are_no_changes() -> None:
    plan = {"revision": "b" * 40, "platforms": [], "pools": [], "workloads": [], "diagnostics": []}
    note = "Unchanged entries are left out; held ones stay."
    for render in (render_markdown, render_text):
        text = render(plan, {}, note=note, changes=True)
        assert "No changes" in text and note in text
    assert "Nothing to plan" in render_markdown(plan, {})


def test_free_capacity_is_one_line_after_the_summary() -> None:
    plan, names = _plan(3)
    free = [("NVIDIA-H100", 2, 16), ("cpu-worker", 1, 0)]
    text = render_markdown(plan, names, free=free)
    line = next(line for line in text.splitlines() if line.startswith("Free after this plan"))
    assert line == "Free after this plan: NVIDIA-H100: 2 hosts, 16 GPUs; cpu-worker: 1 host."
    assert text.index(line) < text.index("<details")
    assert "Free after this plan: NVIDIA-H100: 2 hosts, 16 GPUs; cpu-worker: 1 host" in render_text(
        plan, names, free=free
    )


def test_workloads_show_each_replicas_host_and_a_pending_ones_place_in_the_queue() -> None:
    plan: dict[str, Any] = {
        "revision": "b" * 40,
        "platforms": [],
        "pools": [],
        "workloads": [
            {"namespace": "p", "name": "serve", "pool": "shared", "action": "admit", "reason": "Admitted",
             "message": "admitted", "replicas": 2, "gpus": {"NVIDIA-A100": 4}, "mig": [], "position": None,
             "bound": [{"replica": 0, "host": "uid-1", "gpus": [0, 1]},
                       {"replica": 1, "host": "uid-2", "gpus": [4, 5]}]},
            {"namespace": "p", "name": "train", "pool": "shared", "action": "pending",
             "reason": "NoFittingLayout", "message": "needs 8", "replicas": 1, "gpus": {}, "mig": [],
             "bound": [], "position": 2},
        ],
        "diagnostics": [],
    }  # fmt: skip
    names = {"uid-1": "gpu-a100-01", "uid-2": "gpu-a100-02"}
    text = render_text(plan, names)
    assert "replica 0: gpu-a100-01/gpu0,1; replica 1: gpu-a100-02/gpu4,5" in text
    assert "NoFittingLayout (#2 in queue): needs 8" in text
    markdown = render_markdown(plan, names)
    assert "replica 1: gpu-a100-02/gpu4,5" in markdown and "(#2 in queue)" in markdown


HOSTILE = (
    "![x](https://evil.example/p.png) <img src=x onerror=alert(1)> [click](http://evil.example) "
    "**bold** _it_ ~~gone~~ www.evil.example mail@evil.example &lt;b&gt; `tick` | pipe \\ back\nnext"
)


def test_markdown_renders_nothing_that_comes_from_palette_or_yaml_as_markup() -> None:
    from markdown_it import MarkdownIt

    uid = "edge-" + HOSTILE[:20]
    plan = {
        "revision": "b" * 40,
        "platforms": [
            {"namespace": "ns", "name": "p`|x", "action": "rejected", "reason": "InsufficientCompute",
             "message": HOSTILE, "controlPlane": [uid], "workers": [], "gpus": {HOSTILE: 1}},
        ],
        "pools": [],
        "workloads": [
            {"namespace": "ns", "name": "w", "pool": "p", "action": "admit", "reason": None, "message": "",
             "gpus": {}, "mig": [{"host": uid, "gpu": 0, "profile": "1g.10gb", "start": 0}]},
        ],
        "diagnostics": [{"file": "a|`b`.yaml", "line": 1, "column": 2, "severity": "error",
                         "message": HOSTILE}],
    }  # fmt: skip
    text = render_markdown(plan, {uid: HOSTILE}, note=HOSTILE)
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)
    for markup in ("<img", "<a ", "<strong", "<em", "<s>", "<del", "onerror=alert(1)>"):
        assert markup not in html, markup
    assert "&amp;lt;b&amp;gt;" in html, "an entity in a message is shown as written"
    # GitHub links bare URLs, www. and e-mail addresses by itself: their shapes never reach it whole.
    outside_code = re.sub(r"(`+).*?\1", "", text)
    for shape in ("://", "www.", "@evil"):
        assert shape not in outside_code, shape
    rows = [line for line in text.splitlines() if line.startswith("| rejected") or line.startswith("| admit")]
    widths, width = [], 0
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        width = 0 if token.type == "tr_open" else width + (token.type == "td_open")
        if token.type == "tr_close" and width:
            widths.append(width)
    assert len(rows) == 2 and sorted(widths) == [3, 3, 5, 5], "hostile text stays inside its cells"
    assert "| ``ns/p`\\|x`` |" in text, "a code span with a backtick inside has a longer fence"


def test_each_guard_names_its_own_fix_and_an_unheld_entry_has_none() -> None:
    """held_fix keys on the guards' own reasons and on the sentence markers their writers export
    (deletions.UNREADABLE_REVISION, mig_outcome.RELAYOUT_PREFIX), so a reworded message cannot drop a hint."""
    from reconciler.deletions import DeletionGuard
    from reconciler.placement.mig_outcome import relayout_summary
    from reconciler.plan_report import held_fix

    unreadable = DeletionGuard().blocked(["MLPlatform"], 0, complete=False)
    too_many = DeletionGuard().blocked(["MLPlatform", "MLPlatform"], 0, complete=True)
    blocked = {"action": "delete", "reason": "PruneBlocked", "message": too_many}
    plan: dict[str, Any] = {"platforms": [blocked, dict(blocked)]}
    relayout = "scale to 2 hosts; " + relayout_summary(["gpu-a100-03: GPUs 4-7 re-laid out"])
    cases = [
        ("platforms", {"action": "unchanged", "reason": "QuotaExceeded"}, "spec.gpuQuota"),
        ("platforms", {"action": "delete", "reason": "PruneBlocked", "message": unreadable}, "readable"),
        ("platforms", plan["platforms"][0], "Reconciler-Allow-Deletions: 2"),
        ("platforms", {"action": "replace", "reason": "ReplaceBlocked"}, "palette.ai/allow-replace"),
        ("pools", {"action": "scale", "message": relayout}, "re-layout"),
        ("pools", {"action": "unchanged", "message": "steady"}, None),
        ("platforms", {"action": "create", "reason": None, "message": "MIG layout: not a pool"}, None),
    ]
    for section, entry, expected in cases:
        fix = held_fix(section, entry, plan)
        if expected is None:
            assert fix is None, (section, entry, fix)
        else:
            assert fix is not None and expected in fix, (section, entry, fix)


def test_quotas_and_a_workloads_environment_are_shown_in_markdown_and_text() -> None:
    plan: dict[str, Any] = {
        "revision": "abc",
        "platforms": [],
        "pools": [],
        "workloads": [
            {
                "namespace": "project-a",
                "name": "notebook",
                "pool": "shared",
                "environment": "team-gpus",
                "action": "admit",
                "gpus": {"NVIDIA-A100": 1},
            }
        ],
        "quotas": [
            {"namespace": "project-a", "family": "NVIDIA-A100", "used": 16, "quota": 20},
            {"namespace": "project-b", "family": "NVIDIA-H100", "used": 9, "quota": 8},
        ],
    }
    markdown = render_markdown(plan, {})
    assert "#### GPU quotas" in markdown
    assert "| `project-a` | NVIDIA-A100 | 16 of 20 GPUs |" in markdown
    assert "9 of 8 GPUs (over quota: nothing grows)" in markdown
    assert "`project-a/notebook → shared (environment team-gpus)`" in markdown
    text = render_text(plan, {})
    assert "Quota project-a NVIDIA-A100: 16 of 20 GPUs\n" in text
    assert "Quota project-b NVIDIA-H100: 9 of 8 GPUs (over quota: nothing grows)\n" in text
    assert "GPU quotas" not in render_markdown({**plan, "quotas": []}, {})
