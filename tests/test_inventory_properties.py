"""Property tests of discovery: arbitrary tags never crash it, and bad values exclude with a reason."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.host_tags import (
    CONTROL_PLANE_TAG,
    CPUS_TAG,
    GPU_FAMILY_TAG,
    GPU_MEMORY_TAG,
    GPUS_TAG,
    WORKER_TAG,
)
from reconciler.inventory import ExcludedHost, Machine, by_name, discover, names_ascending
from tests._inventory_support import edge_host, gpu

TAGS = [CPUS_TAG, GPUS_TAG, GPU_MEMORY_TAG, GPU_FAMILY_TAG, WORKER_TAG, CONTROL_PLANE_TAG]

# Values near the grammar of each tag as well as arbitrary text, so both branches are exercised.
tag_values = st.one_of(
    st.text(max_size=40),
    st.from_regex(r"\s*[0-9]{1,12}(\.[0-9]{1,3})?\s*[A-Za-z]{0,4}\s*", fullmatch=True),
    st.sampled_from(["true", "False", "TRUE", "spectro__tag", "nvidia-h100", "80GiB", "0", "8"]),
)
labels = st.dictionaries(
    st.one_of(
        st.sampled_from(TAGS), st.text(max_size=20).map(lambda s: "palette.ai.rg/" + s), st.text(max_size=20)
    ),
    tag_values,
    max_size=8,
)
agent_gpus = st.lists(
    st.builds(
        gpu,
        model=st.one_of(
            st.text(max_size=30), st.sampled_from(["GH100 [H100 PCIe]", "TU104GL [Tesla T4]", ""])
        ),
        count=st.one_of(st.none(), st.integers(min_value=-2, max_value=16)),
        vendor=st.text(max_size=12),
        memory=st.one_of(st.none(), tag_values),
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(host_labels=labels, gpus=agent_gpus, cores=st.one_of(st.none(), st.integers(-4, 256)))
def test_discover_never_raises_and_accounts_for_every_palette_host(
    host_labels: dict[str, str], gpus: list[dict[str, Any]], cores: int | None
) -> None:
    host = edge_host("edge-a", labels=host_labels, gpus=gpus, cores=cores)
    host["metadata"]["labels"]["palette.ai"] = "true"
    inventory = discover([host])
    assert len(inventory.machines) + len(inventory.excluded) == 1
    for excluded in inventory.excluded:
        assert excluded.reason
    for machine in inventory.machines:
        assert isinstance(machine, Machine)
        assert machine.gpu_count >= 0 and machine.cpus >= 0
        assert (machine.gpu_family is None) == (machine.gpu_count == 0)


@settings(max_examples=200, deadline=None)
@given(tag=st.sampled_from(TAGS), value=tag_values)
def test_a_tag_value_either_parses_or_excludes_the_host_naming_the_tag(tag: str, value: str) -> None:
    # A GPU host whose agent reports everything, so only the tag's own parse can exclude it.
    host = edge_host("edge-a", gpus=[gpu("GH100 [H100 PCIe]", 8)], labels={tag: value})
    inventory = discover([host])
    if inventory.excluded:
        assert f"tag {tag}: " in inventory.excluded[0].reason
    else:
        assert [m.uid for m in inventory.machines] == ["edge-a"]


# Names drawn from a few so that equal names (told apart by uid) are common.
host_keys = st.lists(
    st.tuples(st.sampled_from(["a", "b", "b0", "c", ""]), st.sampled_from(["u1", "u2", "u3"]))
)


@settings(max_examples=200, deadline=None)
@given(keys=host_keys)
def test_by_name_is_the_sort_by_name_then_uid_and_names_ascending_says_when_no_sort_is_needed(
    keys: list[tuple[str, str]],
) -> None:
    hosts = [ExcludedHost(uid=uid, name=name, reason="r") for name, uid in keys]
    ordered = by_name(hosts)
    assert ordered == sorted(hosts, key=lambda h: (h.name, h.uid))
    if names_ascending(hosts):  # then already in that order, no (name, uid) twice
        assert hosts == ordered and len({(h.name, h.uid) for h in hosts}) == len(hosts)
    assert names_ascending(hosts) == all(a.name < b.name for a, b in itertools.pairwise(hosts))
