"""The MIG catalogue: entries keyed by model and memory, profile tables as NVIDIA publishes them."""

from __future__ import annotations

import pytest

from reconciler.host_tags import family_from_model
from reconciler.model.mig import CATALOGUE, catalogue_entry, entry_by_key, gpu_equivalents
from reconciler.model.quantity import parse_memory_bytes

# Agent-reported GPUs (model as nvidia-smi or the agent spells it, memory in section 4 units) and the
# entry they must select.
AGENT_GPUS = [
    ("NVIDIA A100-SXM4-40GB", ["40960 MiB", "40 GB", "40Gi", "40GiB", "40536 MiB"], "NVIDIA-A100-40GB"),
    ("NVIDIA A100-PCIE-40GB", ["40 gb"], "NVIDIA-A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", ["81920 MiB", "80 GB", "80Gi", "80GiB", "85899 MB"], "NVIDIA-A100-80GB"),
    ("GA100 [A100 80GB PCIe]", ["81920MiB", "80G"], "NVIDIA-A100-80GB"),
    ("NVIDIA H100 80GB HBM3", ["81559 MiB", "80 GB", "80Gi"], "NVIDIA-H100-80GB"),
    ("GH100 [H100 PCIe]", ["81559 MiB", "80gb"], "NVIDIA-H100-80GB"),
    ("NVIDIA H100 NVL", ["95830 MiB", "94 GB", "94Gi", "94GiB"], "NVIDIA-H100-94GB"),
    ("NVIDIA H200", ["143771 MiB", "141 GB", "141Gi"], "NVIDIA-H200-141GB"),
    ("NVIDIA H200 NVL", ["143771MiB", "141GB"], "NVIDIA-H200-141GB"),
    ("NVIDIA B200", ["183359 MiB", "180 GB", "180Gi", "192 GB"], "NVIDIA-B200-180GB"),
    ("NVIDIA A30", ["24576 MiB", "24 GB", "24Gi", "24GiB"], "NVIDIA-A30-24GB"),
    ("GA100 [A30 PCIe]", ["24576MiB"], "NVIDIA-A30-24GB"),
    ("NVIDIA A800-SXM4-80GB", ["81920 MiB"], "NVIDIA-A800-80GB"),
    ("NVIDIA H800", ["80 GB"], "NVIDIA-H800-80GB"),
    ("NVIDIA H800 NVL", ["95830 MiB", "94 GB"], "NVIDIA-H800-94GB"),
    ("NVIDIA H100 96GB HBM3", ["97871 MiB", "96 GB", "96Gi"], "NVIDIA-H100-96GB"),
    ("NVIDIA GH200 480GB", ["97871 MiB", "96 GB"], "NVIDIA-GH200-96GB"),
    ("NVIDIA GH200 144G HBM3e", ["146944 MiB", "144 GB"], "NVIDIA-GH200-144GB"),
    ("NVIDIA H20", ["97871 MiB", "96GB"], "NVIDIA-H20-96GB"),
]


@pytest.mark.parametrize(
    ("model", "memory", "key"),
    [(model, memory, key) for model, memories, key in AGENT_GPUS for memory in memories],
)
def test_agent_reported_gpu_selects_the_entry_of_its_model_and_memory(
    model: str, memory: str, key: str
) -> None:
    family = family_from_model("NVIDIA", model)
    assert family is not None
    entry = catalogue_entry(family, memory, mig_capable=True)
    assert entry is not None and entry.key == key


@pytest.mark.parametrize("family", ["NVIDIA-A100", "nvidia a100", "NVIDIA_A100", "nvidia-a100"])
def test_family_spellings_are_equivalent(family: str) -> None:
    entry = catalogue_entry(family, "80Gi", mig_capable=True)
    assert entry is not None and entry.key == "NVIDIA-A100-80GB"


def test_memory_as_bytes_is_accepted() -> None:
    entry = catalogue_entry("NVIDIA-H100", 95830 * 2**20, mig_capable=True)
    assert entry is not None and entry.key == "NVIDIA-H100-94GB"


def test_a_gpu_the_agent_does_not_call_mig_capable_has_no_entry() -> None:
    assert catalogue_entry("NVIDIA-A100", "80 GB", mig_capable=False) is None


@pytest.mark.parametrize(
    ("family", "memory"),
    [
        ("NVIDIA-A100", "60 GB"),  # between the two A100 sizes
        ("NVIDIA-H100", "64 GB"),
        ("NVIDIA-H100", "120 GB"),  # above every H100 size
        ("NVIDIA-H200", "96 GB"),  # an H100 size, not an H200 one
        ("NVIDIA-L40S", "48 GB"),  # not MIG-capable at all
        ("NVIDIA-A100", "lots"),  # does not parse
        ("NVIDIA-A100", None),  # not reported
        ("", "80 GB"),
    ],
)
def test_unknown_model_or_memory_has_no_entry(family: str, memory: str | None) -> None:
    assert catalogue_entry(family, memory, mig_capable=True) is None


def test_kubernetes_binary_units_parse() -> None:
    assert parse_memory_bytes("80Gi") == 80 * 2**30
    assert parse_memory_bytes("81920Mi") == 80 * 2**30
    assert parse_memory_bytes("81920 MiB") == parse_memory_bytes("80GiB")


# Profile names per entry exactly as NVIDIA publishes them (mig-parted config-default.yaml, MIG User
# Guide; NOTES.md section 2.2), with the number of instances of each that fit on one GPU.
PUBLISHED = {
    "NVIDIA-A100-40GB": {
        "1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1,
    },
    "NVIDIA-A100-80GB": {
        "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    },
    "NVIDIA-H100-80GB": {
        "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
    },
    "NVIDIA-H100-94GB": {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1,
    },
    "NVIDIA-H100-96GB": {
        "1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1,
    },
    "NVIDIA-GH200-144GB": {
        "1g.18gb": 7, "1g.18gb+me": 1, "1g.36gb": 4, "2g.36gb": 3, "3g.72gb": 2, "4g.72gb": 1,
        "7g.144gb": 1,
    },
    "NVIDIA-H200-141GB": {
        "1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
        "7g.141gb": 1,
    },
    "NVIDIA-B200-180GB": {
        "1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1,
        "7g.180gb": 1,
    },
    "NVIDIA-A30-24GB": {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1},
    "NVIDIA-GB200-186GB": {
        "1g.23gb": 7, "1g.47gb": 4, "2g.47gb": 3, "3g.93gb": 2, "4g.93gb": 1, "7g.186gb": 1,
    },
    "NVIDIA-B300-269GB": {
        "1g.34gb": 7, "1g.67gb": 4, "2g.67gb": 3, "3g.135gb": 2, "4g.135gb": 1, "7g.269gb": 1,
    },
    "NVIDIA-GB300-278GB": {"1g.35gb": 7, "2g.70gb": 3, "3g.139gb": 2, "4g.139gb": 1, "7g.278gb": 1},
    "NVIDIA-RTX-PRO-6000-BLACKWELL-96GB": {"1g.24gb": 4, "2g.48gb": 2, "4g.96gb": 1},
}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "memory", "key"),
    [
        ("GB100 [GB200]", "189471 MiB", "NVIDIA-GB200-186GB"),
        ("NVIDIA GB200", "192 GB", "NVIDIA-GB200-186GB"),
        ("NVIDIA B300 SXM6 AC", "275040 MiB", "NVIDIA-B300-269GB"),
        ("NVIDIA GB300", "288 GB", "NVIDIA-GB300-278GB"),
        (
            "GB202GL [RTX PRO 6000 Blackwell Server Edition]",
            "97887 MiB",
            "NVIDIA-RTX-PRO-6000-BLACKWELL-96GB",
        ),
    ],
)
def test_blackwell_gpus_find_their_entries_from_the_agents_model(model: str, memory: str, key: str) -> None:
    entry = catalogue_entry(family_from_model("NVIDIA", model), memory, mig_capable=True)
    assert entry is not None and entry.key == key


def test_variants_the_planner_does_not_model_are_no_profiles() -> None:
    rtx = entry_by_key("NVIDIA-RTX-PRO-6000-BLACKWELL-96GB")
    assert rtx.compute_slices == 4 and rtx.memory_slices == 4
    for name in ("1g.24gb+gfx", "1g.24gb-me", "1g.24gb+me.all"):
        assert rtx.profile(name) is None
    assert not any(
        p.media
        for k in ("NVIDIA-GB200-186GB", "NVIDIA-B300-269GB")
        for p in entry_by_key(k).profiles.values()
    )


@pytest.mark.parametrize("key", sorted(PUBLISHED))
def test_profile_names_and_maximum_counts_are_nvidias(key: str) -> None:
    entry = entry_by_key(key)
    assert set(entry.profiles) == set(PUBLISHED[key])
    for name, most in PUBLISHED[key].items():
        profile = entry.profiles[name]
        # The most instances of one profile that fit without overlapping, by the placement table alone.
        taken: list[int] = []
        for start in profile.starts:
            if all(start >= t + profile.size or start + profile.size <= t for t in taken):
                taken.append(start)
        limit = entry.max_media if profile.media else len(taken)
        assert min(limit, entry.compute_slices // profile.compute) == most, name


def test_every_entry_has_a_unique_key_and_distinct_memory_per_family() -> None:
    keys = [entry.key for entry in CATALOGUE]
    assert len(keys) == len(set(keys))
    seen = [(entry.family, size) for entry in CATALOGUE for size in entry.memory_gb]
    assert len(seen) == len(set(seen))


def test_profile_names_are_not_keys_across_models() -> None:
    """1g.10gb is the doubled-memory 1g (2 slices) on an A100 40GB and the smallest 1g on an 80GB part."""
    assert entry_by_key("NVIDIA-A100-40GB").profiles["1g.10gb"].size == 2
    assert entry_by_key("NVIDIA-A100-80GB").profiles["1g.10gb"].size == 1


def test_mig_requests_count_against_gpu_limits_as_rounded_up_compute() -> None:
    a100 = entry_by_key("NVIDIA-A100-80GB")
    assert gpu_equivalents(a100, {"1g.10gb": 7}) == 1
    assert gpu_equivalents(a100, {"3g.40gb": 1}) == 1
    assert gpu_equivalents(a100, {"3g.40gb": 2, "2g.20gb": 1}) == 2
    assert gpu_equivalents(entry_by_key("NVIDIA-A30-24GB"), {"2g.12gb": 2, "1g.6gb": 1}) == 2


@pytest.mark.parametrize("gib", [x / 10 + 0.05 for x in range(700, 1500)])  # off the exact edges
def test_every_h100_size_accepted_is_named_after_its_own_table(gib: float) -> None:
    """An H100 is named by the nominal size nearest to what it reports (94 GB NVL: 3g.47gb; 96 GB: 3g.48gb),
    and a size near none of them is refused rather than named after another part."""
    entry = catalogue_entry("NVIDIA-H100", f"{gib}Gi", mig_capable=True)
    nominal = {"NVIDIA-H100-80GB": 80, "NVIDIA-H100-94GB": 94, "NVIDIA-H100-96GB": 96}
    near = [n for n in nominal.values() if abs(gib - n) / n <= 0.04 or abs(gib * 1.073741824 - n) / n <= 0.04]
    if not near:
        assert entry is None
        return
    assert entry is not None
    whole = f"7g.{nominal[entry.key]}gb"
    assert whole in entry.profiles
    if entry.key == "NVIDIA-H100-96GB":
        assert "3g.48gb" in entry.profiles and "3g.47gb" not in entry.profiles
