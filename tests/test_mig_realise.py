"""Realising MIG layouts: machine pools by identical host layout and the mig-parted config they apply."""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model.mig import entry_by_key
from reconciler.placement.mig import (
    ALL_DISABLED,
    MigInstance,
    MigPlan,
    PoolGpu,
    layout_json,
    plan_mig_admission,
    realise,
)

A100 = entry_by_key("NVIDIA-A100-80GB")

# --- mig-parted's format rules (api/spec/v1/spec.go, pkg/types/mig_profile.go), restated ---------------

_PROFILE = re.compile(
    r"^(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:\+([A-Za-z][A-Za-z0-9]*(?:,[A-Za-z][A-Za-z0-9]*)*))?$"
)
_SLICES = {1, 2, 3, 4, 6, 7, 8}


def mig_parted_errors(spec: Any) -> list[str]:
    """What mig-parted's v1 spec parser would refuse in a config, as a list of messages."""
    if not isinstance(spec, dict):
        return ["spec is not a mapping"]
    errors: list[str] = []
    if "version" not in spec:
        return ["unable to parse with missing 'version' field"]
    if spec["version"] != "v1":
        errors.append(f"unknown version: {spec['version']}")
    errors += [f"unexpected field: {key}" for key in spec if key not in ("version", "mig-configs")]
    configs = spec.get("mig-configs")
    if "mig-configs" in spec and (not isinstance(configs, dict) or not configs):
        return [*errors, "at least one entry in 'mig-configs' is required"]
    for name, entries in (configs or {}).items():
        if not isinstance(entries, list) or not entries:
            errors.append(f"at least one entry in '{name}' is required")
            continue
        for entry in entries:
            errors += [f"{name}: {e}" for e in _entry_errors(entry)]
    return errors


def _entry_errors(entry: Any) -> list[str]:
    if not isinstance(entry, dict):
        return ["entry is not a mapping"]
    errors = [f"missing required field: {key}" for key in ("devices", "mig-enabled") if key not in entry]
    errors += [
        f"unexpected field: {key}"
        for key in entry
        if key not in ("device-filter", "devices", "mig-enabled", "mig-devices")
    ]
    devices = entry.get("devices")
    if isinstance(devices, str):
        if devices != "all":
            errors.append(f"invalid string input for 'devices': {devices}")
    elif not (
        isinstance(devices, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in devices)
    ):
        errors.append("devices is neither 'all' nor a list of integers")
    enabled = entry.get("mig-enabled")
    if not isinstance(enabled, bool):
        errors.append("mig-enabled is not a boolean")
    mig_devices = entry.get("mig-devices")
    if enabled and mig_devices is None:
        errors.append("missing required field 'mig-devices' when 'mig-enabled' is true")
    if not enabled and mig_devices:
        errors.append("MIG devices included when 'mig-enabled' is false")
    for profile, count in (mig_devices or {}).items():
        match = _PROFILE.match(profile)
        if not match:
            errors.append(f"invalid format for '{profile}'")
            continue
        c, g, _, attributes = match.groups()
        if int(c or g) not in _SLICES or int(g) not in _SLICES or attributes not in (None, "me"):
            errors.append(f"invalid profile '{profile}'")
        if not isinstance(count, int) or count < 0:
            errors.append(f"invalid count for '{profile}': {count}")
    return errors


def test_the_validator_refuses_what_mig_parted_refuses() -> None:
    assert mig_parted_errors(
        {"version": "v2", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False}]}}
    )
    assert mig_parted_errors({"version": "v1", "mig-configs": {}})
    assert mig_parted_errors({"version": "v1", "mig-configs": {"a": []}})
    assert mig_parted_errors({"version": "v1", "extra": 1, "mig-configs": {"a": [{"devices": "all"}]}})
    assert mig_parted_errors({"version": "v1", "mig-configs": {"a": [{"devices": [0], "mig-enabled": True}]}})
    assert mig_parted_errors(
        {
            "version": "v1",
            "mig-configs": {"a": [{"devices": [0], "mig-enabled": True, "mig-devices": {"3x.4": 1}}]},
        }
    )
    assert not mig_parted_errors(
        {
            "version": "v1",
            "mig-configs": {
                "custom": [
                    {"devices": [0, 1], "mig-enabled": False},
                    {"devices": [2], "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1, "1c.2g.20gb": 1}},
                ]
            },
        }
    )


# --- realisation ----------------------------------------------------------------------------------------


def mig(host: str, index: int, *instances: tuple[str, int, str | None]) -> PoolGpu:
    return PoolGpu(host, index, A100, instances=tuple(sorted(MigInstance(s, p, w) for p, s, w in instances)))


def whole(host: str, index: int) -> PoolGpu:
    return PoolGpu(host, index, A100)


SAME = (("3g.40gb", 0, "a/x"), ("3g.40gb", 4, None))


def test_hosts_with_the_same_layout_share_one_config_and_machine_pool() -> None:
    gpus = [
        mig("h-1", 0, *SAME),
        whole("h-1", 1),
        mig("h-2", 0, ("3g.40gb", 0, None), ("3g.40gb", 4, "b/y")),  # same profiles, other bindings
        whole("h-2", 1),
        mig("h-3", 0, ("7g.80gb", 0, "c/z")),
        whole("h-3", 1),
        whole("h-4", 0),
        whole("h-4", 1),
    ]
    result = realise(gpus)
    assert result.host_configs["h-1"] == result.host_configs["h-2"] != result.host_configs["h-3"]
    assert "h-4" not in result.host_configs  # all whole: stays in worker-pool
    assert result.machine_pools[result.host_configs["h-1"]] == ("h-1", "h-2")
    assert result.mig_config is not None
    assert result.mig_config["mig-configs"][result.host_configs["h-1"]] == [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        {"devices": [1], "mig-enabled": False},
    ]
    assert mig_parted_errors(result.mig_config) == []


def test_the_operators_default_label_is_defined() -> None:
    result = realise([mig("h-1", 0, *SAME)])
    assert result.mig_config is not None
    assert result.mig_config["mig-configs"][ALL_DISABLED] == [{"devices": "all", "mig-enabled": False}]


def test_no_gpu_in_mig_mode_means_no_config() -> None:
    result = realise([whole("h-1", 0), whole("h-2", 0)])
    assert result.mig_config is None and result.machine_pools == {} and result.host_configs == {}


def test_config_names_are_stable_label_values_whatever_the_order() -> None:
    gpus = [mig("h-1", 0, *SAME), whole("h-1", 1), mig("h-2", 1, ("7g.80gb", 0, None)), whole("h-2", 0)]
    shuffled = gpus[:]
    random.Random(7).shuffle(shuffled)
    assert realise(gpus) == realise(shuffled)
    for name in realise(gpus).machine_pools:
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?", name)


def test_an_empty_mig_gpu_is_enabled_with_no_devices() -> None:
    result = realise([PoolGpu("h-1", 0, A100, instances=())])
    assert result.mig_config is not None
    (entries,) = [v for k, v in result.mig_config["mig-configs"].items() if k != ALL_DISABLED]
    assert entries == [{"devices": [0], "mig-enabled": True, "mig-devices": {}}]
    assert mig_parted_errors(result.mig_config) == []


def test_layout_json_lists_only_gpus_in_mig_mode() -> None:
    out = layout_json([mig("h-1", 0, ("7g.80gb", 0, "a/x")), whole("h-1", 1)])
    assert out == {"h-1": [{"gpu": 0, "instances": [{"profile": "7g.80gb", "start": 0, "workload": "a/x"}]}]}


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4),
    st.lists(
        st.dictionaries(st.sampled_from(sorted(A100.profiles)), st.integers(1, 3), min_size=1, max_size=2),
        min_size=1,
        max_size=8,
    ),
)
def test_rendered_configs_pass_mig_parted_rules_and_match_the_layouts(
    hosts: int, demands: list[dict[str, int]]
) -> None:
    state = tuple(PoolGpu(f"h-{h}", i, A100) for h in range(hosts) for i in range(2))
    for n, demand in enumerate(demands):
        result = plan_mig_admission(state, demand, f"ns/w{n}")
        if isinstance(result, MigPlan):
            state = result.gpus
    realised = realise(state)
    if realised.mig_config is None:
        assert not any(g.mig for g in state)
        return
    assert mig_parted_errors(realised.mig_config) == []
    assert yaml.safe_load(yaml.safe_dump(realised.mig_config)) == realised.mig_config
    for gpu in state:
        name = realised.host_configs.get(gpu.host)
        if name is None:
            assert gpu.instances is None
            continue
        (entry,) = [e for e in realised.mig_config["mig-configs"][name] if gpu.index in e["devices"]]
        assert entry["mig-enabled"] == gpu.mig
        assert Counter(entry.get("mig-devices", {})) == Counter(i.profile for i in gpu.instances or ())
