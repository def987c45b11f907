"""Discovery of edge hosts into machines: the rules of docs/allocation.md and the seed's device-tag table."""

from __future__ import annotations

import random
from typing import Any

import pytest

from reconciler.host_tags import family_from_model
from reconciler.inventory import (
    ExcludedHost,
    HostState,
    Inventory,
    Machine,
    Role,
    discover,
)
from reconciler.model.gpu import GPU_MODEL_FAMILIES, canonical_family
from tests._inventory_support import edge_host, gpu


def only_machine(inventory: Inventory) -> Machine:
    assert inventory.excluded == (), inventory.excluded
    assert len(inventory.machines) == 1, inventory.machines
    return inventory.machines[0]


def only_excluded(inventory: Inventory) -> ExcludedHost:
    assert inventory.machines == (), inventory.machines
    assert len(inventory.excluded) == 1, inventory.excluded
    return inventory.excluded[0]


# --- palette.ai: true ---------------------------------------------------------------------------


def test_hosts_without_the_palette_ai_tag_are_neither_machines_nor_excluded() -> None:
    inventory = discover([edge_host("edge-a", palette_ai=False, labels={"gpus": "not a number"})])
    assert inventory == Inventory()


@pytest.mark.parametrize("value", ["false", "False", "", "spectro__tag", "yes", "1"])
def test_palette_ai_tag_other_than_true_is_not_considered(value: str) -> None:
    assert discover([edge_host("edge-a", palette_ai=False, labels={"palette.ai": value})]) == Inventory()


@pytest.mark.parametrize("value", ["true", "True", "TRUE", " true ", True])
def test_palette_ai_tag_true_is_case_insensitive_and_accepts_yaml_booleans(value: Any) -> None:
    machine = only_machine(discover([edge_host("edge-a", palette_ai=False, labels={"palette.ai": value})]))
    assert machine.uid == "edge-a"


# --- cpus ---------------------------------------------------------------------------------------


def test_cpus_come_from_the_agent() -> None:
    assert only_machine(discover([edge_host("edge-a", cores=32)])).cpus == 32


def test_cpus_tag_is_used_when_the_agent_reports_no_cores() -> None:
    assert only_machine(discover([edge_host("edge-a", cores=None, labels={"cpus": "6"})])).cpus == 6


def test_agent_cores_win_over_the_cpus_tag() -> None:
    assert only_machine(discover([edge_host("edge-a", cores=32, labels={"cpus": "6"})])).cpus == 32


def test_cpus_are_zero_when_nobody_says() -> None:
    assert only_machine(discover([edge_host("edge-a", cores=None)])).cpus == 0


# --- gpus and gpu-family ------------------------------------------------------------------------


def test_gpus_and_gpu_family_tags_are_used_when_the_agent_reports_no_gpus() -> None:
    machine = only_machine(discover([edge_host("edge-a", labels={"gpus": "8", "gpu-family": "nvidia-a100"})]))
    assert (machine.gpu_family, machine.gpu_count, machine.role) == ("NVIDIA-A100", 8, Role.WORKER)


def test_agent_gpus_win_over_the_gpus_and_gpu_family_tags() -> None:
    host = edge_host(
        "edge-a",
        gpus=[gpu("GH100 [H100 SXM5 80GB]", 8)],
        labels={"gpus": "4", "gpu-family": "nvidia-a100", "gpu-memory": "40GiB"},
    )
    machine = only_machine(discover([host]))
    assert (machine.gpu_family, machine.gpu_count, machine.gpu_memory_bytes) == ("NVIDIA-H100", 8, 80 * 10**9)


def test_gpu_family_tag_names_agent_gpus_that_have_no_model() -> None:
    host = edge_host("edge-a", gpus=[gpu("", 4, vendor="")], labels={"gpu-family": "NVIDIA L40S"})
    machine = only_machine(discover([host]))
    assert (machine.gpu_family, machine.gpu_count) == ("NVIDIA-L40S", 4)


@pytest.mark.parametrize("spelling", ["nvidia-a100", "NVIDIA A100", "nvidia_a100", "Nvidia-A100", "a100"])
def test_gpu_family_tag_spellings_compare_in_canonical_form(spelling: str) -> None:
    host = edge_host("edge-a", labels={"gpus": "2", "gpu-family": spelling})
    assert only_machine(discover([host])).gpu_family == "NVIDIA-A100"


def test_gpus_tag_zero_means_no_gpus() -> None:
    machine = only_machine(discover([edge_host("edge-a", labels={"gpus": "0"})]))
    assert (machine.gpu_family, machine.gpu_count, machine.role) == (None, 0, Role.CONTROL_PLANE)


def test_gpus_tag_without_a_family_excludes_the_host() -> None:
    host = only_excluded(discover([edge_host("edge-a", labels={"gpus": "8"})]))
    assert "gpus" in host.reason and "gpu-family" in host.reason


def test_gpu_family_tag_without_any_gpu_count_excludes_the_host() -> None:
    host = only_excluded(discover([edge_host("edge-a", labels={"gpu-family": "nvidia-h100"})]))
    assert "gpu-family" in host.reason and "NVIDIA-H100" in host.reason


def test_agent_gpus_without_model_and_without_family_tag_exclude_the_host() -> None:
    host = only_excluded(discover([edge_host("edge-a", gpus=[gpu("", 2, vendor="")])]))
    assert "without a model" in host.reason


def test_gpu_entries_of_one_family_add_up() -> None:
    host = edge_host("edge-a", gpus=[gpu("NVIDIA H100 80GB HBM3", 4), gpu("GH100 [H100 SXM5 80GB]", 4)])
    machine = only_machine(discover([host]))
    assert (machine.gpu_family, machine.gpu_count, machine.notes) == ("NVIDIA-H100", 8, ())


def test_gpu_entries_without_a_count_are_one_device_each() -> None:
    host = edge_host("edge-a", gpus=[gpu("TU104GL [Tesla T4]", None), gpu("TU104GL [Tesla T4]", None)])
    assert only_machine(discover([host])).gpu_count == 2


def test_mixed_families_place_the_family_with_most_gpus_and_say_so() -> None:
    host = edge_host("edge-a", gpus=[gpu("TU104GL [Tesla T4]", 1), gpu("GH100 [H100 PCIe]", 8)])
    machine = only_machine(discover([host]))
    assert (machine.gpu_family, machine.gpu_count) == ("NVIDIA-H100", 8)
    assert machine.notes == ("mixed GPU families (NVIDIA-H100 x8, NVIDIA-T4 x1): placed as NVIDIA-H100",)


def test_mixed_families_with_equal_counts_pick_the_alphabetically_first() -> None:
    host = edge_host("edge-a", gpus=[gpu("GH100 [H100 PCIe]", 4), gpu("GA100 [A100 PCIe]", 4)])
    assert only_machine(discover([host])).gpu_family == "NVIDIA-A100"


# --- gpu-memory ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("80M", 80 * 10**6),
        ("80MB", 80 * 10**6),
        ("80MiB", 80 * 2**20),
        ("80G", 80 * 10**9),
        ("80GB", 80 * 10**9),
        ("80GiB", 80 * 2**30),
        ("80m", 80 * 10**6),
        ("80mb", 80 * 10**6),
        ("80mib", 80 * 2**20),
        ("80g", 80 * 10**9),
        ("80Gb", 80 * 10**9),
        ("80GIB", 80 * 2**30),
        ("24 gib", 24 * 2**30),
    ],
)
def test_gpu_memory_tag_takes_the_six_units_case_insensitively(value: str, expected: int) -> None:
    host = edge_host("edge-a", labels={"gpus": "1", "gpu-family": "nvidia-l4", "gpu-memory": value})
    assert only_machine(discover([host])).gpu_memory_bytes == expected


def test_gpu_memory_tag_fills_in_when_the_agent_reports_gpus_without_memory() -> None:
    host = edge_host("edge-a", gpus=[gpu("AD104GL [L4]", 2, memory=None)], labels={"gpu-memory": "24GiB"})
    assert only_machine(discover([host])).gpu_memory_bytes == 24 * 2**30


def test_agent_gpu_memory_wins_over_the_tag() -> None:
    host = edge_host(
        "edge-a", gpus=[gpu("AD104GL [L4]", 2, memory="23034 MiB")], labels={"gpu-memory": "24GiB"}
    )
    assert only_machine(discover([host])).gpu_memory_bytes == 23034 * 2**20


def test_unparseable_agent_memory_counts_as_not_reported() -> None:
    host = edge_host("edge-a", gpus=[gpu("AD104GL [L4]", 2, memory="lots")], labels={"gpu-memory": "24G"})
    assert only_machine(discover([host])).gpu_memory_bytes == 24 * 10**9


# --- roles --------------------------------------------------------------------------------------


def test_a_host_with_gpus_is_a_worker_and_one_without_is_a_control_plane_candidate() -> None:
    inventory = discover([edge_host("edge-gpu", gpus=[gpu("GH100 [H100 PCIe]", 8)]), edge_host("edge-cpu")])
    roles = {m.uid: (m.role, m.worker_tagged) for m in inventory.machines}
    assert roles == {"edge-gpu": (Role.WORKER, False), "edge-cpu": (Role.CONTROL_PLANE, False)}


@pytest.mark.parametrize("value", ["true", "True", "TRUE"])
def test_control_plane_tag_makes_a_gpu_host_a_control_plane_candidate(value: str) -> None:
    host = edge_host("edge-a", gpus=[gpu("GH100 [H100 PCIe]", 8)], labels={"palette.ai/control-plane": value})
    machine = only_machine(discover([host]))
    assert (machine.role, machine.gpu_count) == (Role.CONTROL_PLANE, 8)


@pytest.mark.parametrize("value", ["true", "True", "tRuE"])
def test_worker_tag_makes_a_cpu_host_a_worker(value: str) -> None:
    machine = only_machine(discover([edge_host("edge-a", labels={"palette.ai/worker": value})]))
    assert (machine.role, machine.worker_tagged, machine.gpu_count) == (Role.WORKER, True, 0)


def test_both_role_tags_make_a_worker() -> None:
    host = edge_host("edge-a", labels={"palette.ai/worker": "true", "palette.ai/control-plane": "true"})
    machine = only_machine(discover([host]))
    assert (machine.role, machine.worker_tagged) == (Role.WORKER, True)


def test_role_tags_set_to_false_leave_the_default_role() -> None:
    host = edge_host(
        "edge-a",
        gpus=[gpu("GH100 [H100 PCIe]", 8)],
        labels={"palette.ai/worker": "false", "palette.ai/control-plane": "False"},
    )
    machine = only_machine(discover([host]))
    assert (machine.role, machine.worker_tagged) == (Role.WORKER, False)


# --- resource groups ----------------------------------------------------------------------------


def test_resource_group_tags_become_resource_groups_including_groups_with_slashes() -> None:
    labels = {
        "palette.ai.rg/network-pool": "1",
        "palette.ai.rg/storage-tier": "high-performance",
        "palette.ai.rg/region/us-west": "zone-a",
        "palette.ai.rg-not-a-group": "x",
    }
    machine = only_machine(discover([edge_host("edge-a", labels=labels)]))
    assert machine.resource_groups == {
        "network-pool": "1",
        "storage-tier": "high-performance",
        "region/us-west": "zone-a",
    }
    assert machine.in_groups({"region/us-west": "zone-a", "network-pool": "1"})
    assert not machine.in_groups({"network-pool": "2"})


def test_resource_group_values_from_yaml_numbers_are_text() -> None:
    machine = only_machine(discover([edge_host("edge-a", labels={"palette.ai.rg/network-pool": 3})]))
    assert machine.resource_groups == {"network-pool": "3"}


# --- bad tags -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "value"),
    [
        ("gpus", "eight"),
        ("gpus", "-1"),
        ("gpus", "8.0"),
        ("cpus", "0"),
        ("cpus", "six"),
        ("gpu-memory", "80"),
        ("gpu-memory", "80 GBs"),
        ("gpu-memory", "80TB"),
        ("gpu-memory", "0G"),
        ("gpu-family", "!!!"),
        ("palette.ai/worker", "yes"),
        ("palette.ai/control-plane", "spectro__tag"),
    ],
)
def test_a_tag_that_does_not_parse_excludes_the_host_with_a_reason_naming_tag_and_value(
    tag: str, value: str
) -> None:
    host = only_excluded(discover([edge_host("edge-a", name="gpu-7", labels={tag: value})]))
    assert (host.uid, host.name) == ("edge-a", "gpu-7")
    assert f"tag {tag}: {value!r}" in host.reason


def test_a_bad_tag_excludes_the_host_even_when_the_agent_value_would_win() -> None:
    host = edge_host("edge-a", cores=32, gpus=[gpu("GH100 [H100 PCIe]", 8)], labels={"cpus": "many"})
    assert "tag cpus: 'many'" in only_excluded(discover([host])).reason


def test_every_bad_tag_of_a_host_is_reported() -> None:
    host = only_excluded(discover([edge_host("edge-a", labels={"cpus": "x", "gpu-memory": "y"})]))
    assert "tag cpus: 'x'" in host.reason and "tag gpu-memory: 'y'" in host.reason


@pytest.mark.parametrize(("key", "value"), [("palette.ai.rg/", "1"), ("palette.ai.rg/pool", "spectro__tag")])
def test_resource_group_tags_without_a_group_or_a_value_exclude_the_host(key: str, value: str) -> None:
    assert key in only_excluded(discover([edge_host("edge-a", labels={key: value})])).reason


def test_long_bad_values_are_shortened_in_the_reason() -> None:
    host = only_excluded(discover([edge_host("edge-a", labels={"gpus": "9" * 500})]))
    assert len(host.reason) < 200


def test_an_excluded_host_in_use_keeps_its_cluster() -> None:
    host = edge_host("edge-a", labels={"gpus": "x"}, state="in-use", clusters=[{"name": "c", "uid": "c1"}])
    assert only_excluded(discover([host])).cluster_uid == "c1"


def test_excluded_hosts_do_not_hide_the_good_ones() -> None:
    inventory = discover([edge_host("edge-bad", labels={"cpus": "x"}), edge_host("edge-good")])
    assert [m.uid for m in inventory.machines] == ["edge-good"]
    assert [h.uid for h in inventory.excluded] == ["edge-bad"]


# --- state and health ---------------------------------------------------------------------------


def test_a_healthy_ready_host_is_available() -> None:
    machine = only_machine(discover([edge_host("edge-a")]))
    assert (machine.state, machine.available, machine.cluster_uid) == (HostState.AVAILABLE, True, None)


def test_an_in_use_host_belongs_to_the_cluster_in_in_use_clusters_ref() -> None:
    host = edge_host("edge-a", state="in-use", clusters=[{"name": "project-a-clearml", "uid": "67f0c0ffee"}])
    machine = only_machine(discover([host]))
    assert (machine.state, machine.available, machine.cluster_uid) == (HostState.IN_USE, False, "67f0c0ffee")


def test_the_deprecated_in_use_clusters_field_is_read_too() -> None:
    host = edge_host("edge-a", state="in-use")
    host["status"]["inUseClusters"] = [{"name": "old", "uid": "c-old"}]
    assert only_machine(discover([host])).cluster_uid == "c-old"


@pytest.mark.parametrize(("state", "health"), [("ready", "unhealthy"), ("unpaired", "healthy"), ("", "")])
def test_unhealthy_or_unpaired_hosts_are_machines_that_are_never_available(state: str, health: str) -> None:
    machine = only_machine(discover([edge_host("edge-a", state=state, health=health)]))
    assert (machine.state, machine.available) == (HostState.UNAVAILABLE, False)


def test_an_unhealthy_host_in_a_cluster_is_unavailable_but_keeps_its_cluster() -> None:
    host = edge_host("edge-a", state="in-use", health="unhealthy", clusters=[{"name": "c", "uid": "c1"}])
    machine = only_machine(discover([host]))
    assert (machine.state, machine.cluster_uid) == (HostState.UNAVAILABLE, "c1")


# --- architecture -------------------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "expected"), [("amd64", "amd64"), ("arm64", "arm64"), (None, "amd64")])
def test_architecture_comes_from_the_agent_with_palettes_default(arch: str | None, expected: str) -> None:
    assert only_machine(discover([edge_host("edge-a", arch=arch)])).arch == expected


def test_an_unknown_architecture_excludes_the_host() -> None:
    assert "architecture" in only_excluded(discover([edge_host("edge-a", arch="sparc")])).reason


# --- GPU family names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "model", "family"),
    [
        ("NVIDIA", "GH100 [H100 PCIe]", "NVIDIA-H100"),
        ("NVIDIA", "NVIDIA H100 80GB HBM3", "NVIDIA-H100"),
        ("NVIDIA", "GH100 [H200 SXM 141GB]", "NVIDIA-H200"),
        ("NVIDIA", "NVIDIA A100-SXM4-80GB", "NVIDIA-A100"),
        ("NVIDIA", "GA100 [A100 PCIe 40GB]", "NVIDIA-A100"),
        ("NVIDIA", "AD102GL [L40S]", "NVIDIA-L40S"),
        ("NVIDIA", "AD102GL [L40]", "NVIDIA-L40"),
        ("NVIDIA", "AD104GL [L4]", "NVIDIA-L4"),
        ("NVIDIA", "TU104GL [Tesla T4]", "NVIDIA-T4"),
        ("NVIDIA", "GA102GL [A10]", "NVIDIA-A10"),
        ("NVIDIA", "GA102GL [A40]", "NVIDIA-A40"),
        ("NVIDIA", "GV100GL [Tesla V100 SXM2 32GB]", "NVIDIA-V100"),
        ("NVIDIA", "GB100 [B200]", "NVIDIA-B200"),
        ("NVIDIA", "NVIDIA GB200", "NVIDIA-GB200"),
        ("AMD", "Aqua Vanjaram [Instinct MI300X]", "AMD-MI300X"),
        ("Advanced Micro Devices, Inc. [AMD/ATI]", "Aldebaran/MI200 [Instinct MI250X]", "AMD-MI250X"),
        ("AMD", "Instinct MI250", "AMD-MI250"),
    ],
)
def test_agent_models_map_to_families_through_the_table(vendor: str, model: str, family: str) -> None:
    assert family_from_model(vendor, model) == family


@pytest.mark.parametrize(
    ("vendor", "model", "family"),
    [
        ("NVIDIA", "GA102 [GeForce RTX 3090]", "NVIDIA-GEFORCE-RTX-3090"),
        ("NVIDIA Corporation", "NVIDIA RTX A6000", "NVIDIA-RTX-A6000"),
        ("10de", "Quadro RTX 8000", "NVIDIA-QUADRO-RTX-8000"),
        ("Intel Corporation", "Data Center GPU Max 1550", "INTEL-DATA-CENTER-GPU-MAX-1550"),
        ("Acme", "Widget 9 (rev a1)", "ACME-WIDGET-9-REV-A1"),
    ],
)
def test_unknown_models_fall_back_to_vendor_and_cleaned_model(vendor: str, model: str, family: str) -> None:
    assert family_from_model(vendor, model) == family


def test_no_model_means_no_family() -> None:
    assert family_from_model("NVIDIA", "") is None


def test_every_family_of_the_table_is_canonical() -> None:
    for token, family in GPU_MODEL_FAMILIES.items():
        assert canonical_family(family) == family
        assert family.endswith(token)


# --- robustness and determinism -----------------------------------------------------------------


def test_machines_are_sorted_by_name_then_uid_whatever_the_input_order() -> None:
    hosts = [edge_host(f"edge-{i}", name=f"host-{i % 3}") for i in range(9)]
    expected = discover(hosts)
    assert [(m.name, m.uid) for m in expected.machines] == sorted((m.name, m.uid) for m in expected.machines)
    for seed in range(5):
        shuffled = hosts[:]
        random.Random(seed).shuffle(shuffled)
        assert discover(shuffled) == expected


def test_a_uid_seen_twice_counts_once() -> None:
    inventory = discover([edge_host("edge-a", name="first"), edge_host("edge-a", name="second")])
    assert [m.name for m in inventory.machines] == ["first"]


def test_a_host_without_uid_is_excluded() -> None:
    host = edge_host("", name="nameless")
    assert "metadata.uid" in only_excluded(discover([host])).reason


@pytest.mark.parametrize(
    "item",
    [
        None,
        "edge-a",
        {},
        {"metadata": None},
        {"metadata": {"labels": {"palette.ai": "true"}}},
        {"metadata": {"uid": "edge-a", "labels": {"palette.ai": "true"}}, "spec": "x", "status": 3},
        {
            "metadata": {"uid": "edge-a", "labels": {"palette.ai": "true"}},
            "spec": {
                "device": {"cpu": {"cores": "many"}, "gpus": [None, {"gpuCount": "8"}, {"gpuCount": True}]}
            },
            "status": {"health": None, "inUseClustersRef": [None, {"uid": 5}]},
        },
    ],
)
def test_odd_items_never_crash_discovery(item: Any) -> None:
    inventory = discover([item])
    assert all(isinstance(m, Machine) for m in inventory.machines)


def test_discovery_builds_the_machine_that_machine_itself_builds() -> None:
    """Discovery sets a Machine's fields through its slots (faster than its frozen ``__init__``): every
    field is set, and the result is equal, field by field, to ``Machine(...)``."""
    from dataclasses import fields

    from reconciler.edgehost import GpuDevice, Nic
    from reconciler.inventory import HostState, Role, _machine

    values: dict[str, Any] = {
        "uid": "u-1",
        "name": "host-1",
        "arch": "arm64",
        "cpus": 64,
        "gpu_family": canonical_family("NVIDIA-H100"),
        "gpu_count": 8,
        "gpu_memory_bytes": 80 * 10**9,
        "role": Role.WORKER,
        "worker_tagged": True,
        "resource_groups": {"network-pool": "3"},
        "state": HostState.IN_USE,
        "cluster_uid": "c-1",
        "notes": ("a note",),
        "unavailable_reason": "why",
        "project_uid": "p-1",
        "addresses": ("10.0.0.1",),
        "gpu_devices": (GpuDevice("NVIDIA", "H100", 8),),
        "nic": Nic("eth0", "10.0.0.1"),
    }
    assert [f.name for f in fields(Machine)] == list(values)
    built = _machine(*values.values())
    assert built == Machine(**values)
    assert {f.name: getattr(built, f.name) for f in fields(Machine)} == values


def test_a_memo_classifies_only_the_hosts_whose_facts_changed() -> None:
    """The loop keeps each unchanged host's facts object between passes: with a memo, discovery reuses
    what it made of those and classifies only new or changed hosts; the inventory is the same."""
    from reconciler.edgehost import read_host
    from reconciler.inventory import DiscoveryMemo

    facts = [read_host(edge_host(f"h-{n}", gpus=[gpu("H100", count=n % 3)])) for n in range(6)]
    hosts = [f for f in facts if f is not None]
    memo: DiscoveryMemo = {}
    first = discover(hosts, memo)
    assert first == discover(hosts)
    changed = read_host(edge_host("h-1", labels={"palette.ai/worker": "true"}))
    assert changed is not None
    second = discover([hosts[0], changed, *hosts[2:]], memo)
    assert second == discover([hosts[0], changed, *hosts[2:]])
    before, after = first.by_uid(), second.by_uid()
    assert all(after[uid] is before[uid] for uid in ("h-0", "h-2", "h-3", "h-4", "h-5"))
    assert after["h-1"].worker_tagged and not before["h-1"].worker_tagged
    assert sorted(memo) == [f"h-{n}" for n in range(6)] and memo["h-1"][0] is changed
