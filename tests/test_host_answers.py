"""Reads are checked before they are believed: an edge host answer whose fields a rule reads are present
but mistyped is an unreadable host (never placed, never "not in use", never "fewer GPUs"), and a cluster
whose membership is in doubt is held as it is (reconciler.edgehost, reconciler.membership)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.edgehost import read_host
from reconciler.host_answers import carry_readable, doubtful_answers
from reconciler.host_items import host_item
from reconciler.inventory import ExcludedHost, HostState, Machine, classify, discover
from reconciler.membership import config_hosts, config_roles, held_reason
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NAME_LABEL, NAMESPACE_LABEL
from reconciler.snapshots import doubtful_clusters, managed_clusters


def host(uid: str, gpus: int = 4, cluster: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"state": "in-use" if cluster else "ready", "health": {"state": "healthy"}}
    if cluster:
        status["inUseClustersRef"] = [{"uid": cluster, "name": "c"}]
    return {
        "metadata": {"uid": uid, "name": uid, "labels": {"palette.ai": "true"}},
        "spec": {
            "device": {
                "archType": "amd64",
                "cpu": {"cores": 32},
                "gpus": [{"vendor": "NVIDIA", "model": "A100", "gpuCount": gpus, "memory": "81920 MiB"}]
                if gpus
                else [],
            },
            "projectMeta": {"uid": "p1"},
        },
        "status": status,
    }


def cluster(uid: str, name: str = "pa-one", config: str | None = "cfg-1") -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NAMESPACE_LABEL: "pa", NAME_LABEL: name.removeprefix("pa-")}
    doc: dict[str, Any] = {
        "metadata": {"uid": uid, "name": name, "labels": labels},
        "status": {"state": "Running"},
    }
    if config:
        doc["spec"] = {"cloudConfigRef": {"uid": config}}
    return doc


def config(control_plane: list[str], workers: list[str]) -> dict[str, Any]:
    return {
        "spec": {
            "machinePoolConfig": [
                {"name": "cp-pool", "isControlPlane": True, "hosts": [{"hostUid": h} for h in control_plane]},
                {"name": "worker-pool", "hosts": [{"hostUid": h, "hostName": h} for h in workers]},
            ]
        }
    }


def test_a_null_gpu_count_is_unreadable_not_one_gpu() -> None:
    answer = host("h1", gpus=4)
    answer["spec"]["device"]["gpus"][0]["gpuCount"] = None
    facts = read_host(answer)
    assert facts is not None and facts.unreadable
    found = classify(facts)
    assert isinstance(found, ExcludedHost)
    assert "unreadable" in found.reason and "spec.device.gpus" in found.reason


def test_a_missing_gpu_count_is_one_device_as_the_schema_allows() -> None:
    answer = host("h1", gpus=4)
    del answer["spec"]["device"]["gpus"][0]["gpuCount"]
    found = classify(read_host(answer))  # type: ignore[arg-type]
    assert isinstance(found, Machine) and found.gpu_count == 1


def test_a_string_cluster_ref_or_an_in_use_host_naming_no_cluster_is_unreadable_never_free() -> None:
    as_string = host("h1", cluster="c1")
    as_string["status"]["inUseClustersRef"] = "c1"
    naming_none = host("h2", cluster="c1")
    del naming_none["status"]["inUseClustersRef"]
    inventory = discover([as_string, naming_none, host("h3")])
    assert [m.uid for m in inventory.machines] == ["h3"]
    assert {h.uid for h in inventory.excluded} == {"h1", "h2"}
    assert all("unreadable" in h.reason or "names no cluster" in h.reason for h in inventory.excluded)


def test_an_empty_ref_list_sent_as_null_is_a_free_host() -> None:
    answer = host("h1")
    answer["status"]["inUseClustersRef"] = None
    found = classify(read_host(answer))  # type: ignore[arg-type]
    assert isinstance(found, Machine) and found.state is HostState.AVAILABLE


def test_unreadable_labels_still_report_the_host() -> None:
    answer = host("h1")
    answer["metadata"]["labels"] = ["palette.ai"]
    found = classify(read_host(answer))  # type: ignore[arg-type]
    assert isinstance(found, ExcludedHost) and "metadata.labels" in found.reason


# --- the fuzz: every answer is read right or marked unreadable ------------------------------------------

FIELDS = [
    ("metadata", "labels"),
    ("spec", "device"),
    ("spec", "device", "archType"),
    ("spec", "device", "cpu"),
    ("spec", "device", "cpu", "cores"),
    ("spec", "device", "gpus"),
    ("spec", "device", "gpus", 0),
    ("spec", "device", "gpus", 0, "gpuCount"),
    ("spec", "projectMeta", "uid"),
    ("status",),
    ("status", "state"),
    ("status", "health"),
    ("status", "health", "state"),
    ("status", "inUseClustersRef"),
    ("status", "inUseClustersRef", 0),
    ("status", "inUseClustersRef", 0, "uid"),
]
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> bool:
    for key in path[:-1]:
        try:
            doc = doc[key]
        except (KeyError, IndexError, TypeError):
            return False
    try:
        doc[path[-1]] = value
    except (IndexError, TypeError):
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(
    gpus=st.integers(0, 8),
    in_use=st.booleans(),
    mutations=st.lists(st.tuples(st.sampled_from(FIELDS), ODD), min_size=1, max_size=3),
)
def test_any_answer_is_read_right_or_marked_unreadable(
    gpus: int, in_use: bool, mutations: list[tuple[tuple[Any, ...], Any]]
) -> None:
    good = host("h1", gpus=gpus, cluster="c1" if in_use else None)
    expected = classify(read_host(good))  # type: ignore[arg-type]
    assert isinstance(expected, Machine)
    answer = copy.deepcopy(good)
    for path, value in mutations:
        _set(answer, path, value)
    facts = read_host(answer)
    assert facts is not None
    assert read_host(host_item(facts)) == facts  # a snapshot of it reads back as the same host
    found = classify(facts)
    if isinstance(found, ExcludedHost):
        return  # reported with a reason, never placed
    if found is None:  # readable labels without palette.ai: "true" (null is Go's empty map): not ours
        assert not any(path == "metadata.labels" for path, _ in facts.unreadable)
        assert facts.tags.get("palette.ai") != "true"
        return
    # Read right: whatever the mutation left, the host is never larger, smaller, or freer than it says.
    assert not facts.unreadable
    said = sum(g.get("gpuCount", 1) for g in answer["spec"]["device"]["gpus"]) if found.gpu_count else 0
    assert found.gpu_count == said
    if found.state is HostState.AVAILABLE:
        refs = answer.get("status", {}).get("inUseClustersRef")
        assert not refs and answer["status"]["state"] == "ready"


# --- membership: the cluster's own word, cross-checked ----------------------------------------------


def test_config_hosts_and_roles_read_the_cloud_config_once() -> None:
    doc = config(["cp1"], ["w1", "w2"])
    assert config_hosts(doc) == ({"cp-pool": ["cp1"], "worker-pool": ["w1", "w2"]}, {"w1": "w1", "w2": "w2"})
    assert config_roles(doc) == (("cp1",), ("w1", "w2"))
    assert config_roles({"spec": {"machinePoolConfig": "x"}}) is None


def test_a_cluster_is_held_when_a_member_answer_is_unreadable_and_no_config_was_read() -> None:
    cp, w1, w2 = host("cp1", gpus=0, cluster="c1"), host("w1", cluster="c1"), host("w2", cluster="c1")
    w2["status"]["inUseClustersRef"] = "c1"  # 30% of answers like this moved every cluster before
    hosts = [cp, w1, w2, host("free")]
    assert doubtful_clusters(hosts)
    (found,) = managed_clusters([cluster("c1")], hosts, discover(hosts).by_uid())
    assert found.held is not None and "w2" in found.held
    assert found.workers == ("w1",)  # what the refs say; held, so nothing is planned from it


def test_the_cloud_config_is_the_membership_when_read() -> None:
    cp, w1, w2 = host("cp1", gpus=0, cluster="c1"), host("w1", cluster="c1"), host("w2", cluster="c1")
    w2["status"]["inUseClustersRef"] = "c1"
    hosts = [cp, w1, w2, host("free")]
    configs = {"c1": config(["cp1"], ["w1", "w2"])}
    (found,) = managed_clusters([cluster("c1")], hosts, discover(hosts).by_uid(), configs)
    assert (found.control_plane, found.workers) == (("cp1",), ("w1", "w2"))
    assert found.held is not None  # its member w2 is still unreadable: no scale, no replace


def test_a_cluster_whose_config_and_refs_agree_is_not_held_by_a_stranger() -> None:
    stranger = host("x", cluster="c9")
    stranger["status"]["inUseClustersRef"] = 7
    hosts = [host("cp1", gpus=0, cluster="c1"), host("w1", cluster="c1"), stranger]
    configs = {"c1": config(["cp1"], ["w1"])}
    (found,) = managed_clusters([cluster("c1")], hosts, discover(hosts).by_uid(), configs)
    assert found.held is None and found.workers == ("w1",)


def test_a_disagreement_names_both_sides() -> None:
    why = held_reason("pa-one", ["w1"], ["w1", "w2"], [], [])
    assert why is not None and "w2" in why and "cloud config" in why
    assert held_reason("pa-one", ["w1"], ["w1"], [], ["x"]) is None
    assert held_reason("pa-one", ["w1"], None, [], ["x"]) is not None


# --- absence is confirmed before it is acted on -------------------------------------------------------


def test_a_recorded_cluster_the_listing_does_not_show_is_looked_up() -> None:
    from reconciler.status.recorded import listing_gap, missing_clusters

    files = {
        "pa/mlplatforms/one.yaml": b"status:\n  cluster: {uid: c1, name: pa-one}\n",
        "pa/mlplatforms/two.yaml": b"status:\n  cluster: {uid: c2, name: pa-two}\n",
        "pa/computepools/pool.yaml": b"status:\n  phase: Pending\n",  # no cluster yet
        "pa/mlplatforms/bad.yaml": b"status: [\n",
    }
    keys = [("pa", "one"), ("pa", "two"), ("pa", "bad")]
    assert missing_clusters(files, keys, [("pa", "pool")], ["c1"]) == {"c2": "pa/two"}
    assert missing_clusters(files, keys, [], ["c1", "c2"]) == {}
    gap = listing_gap({"c2": "pa/two"})
    assert gap is not None and "pa/two" in gap and "nothing is created" in gap
    assert listing_gap({}) is None


# --- quarantine: a malformed answer is one host's problem, released at its first good answer -----------


@settings(max_examples=30, deadline=None)
@given(st.one_of(st.integers(), st.none(), st.just("../../etc"), st.just("a/b"), st.just(""), st.just(" ")))
def test_a_uid_that_is_a_number_null_or_a_path_is_unreadable(uid: Any) -> None:
    item = host("h1", cluster="c1")
    item["metadata"]["uid"] = uid
    facts = read_host(item)
    assert facts is not None and facts.uid == "" and facts.unreadable
    assert any("metadata.uid" in p for p in facts.problems)


def test_a_member_with_a_garbled_uid_is_carried_as_its_last_good_copy_by_name() -> None:
    good = [host("h1", cluster="c1"), host("h2", cluster="c1"), host("h3")]
    odd = copy.deepcopy(good)
    odd[0]["metadata"]["uid"] = 12345
    hosts, carried = carry_readable(odd, {""}, good)
    assert carried == ["h1"] and hosts[0] == good[0] and hosts[1:] == odd[1:]


def test_no_gpus_on_a_member_that_had_some_is_doubtful_and_carried() -> None:
    good = [host("h1", gpus=8, cluster="c1"), host("h2", gpus=0, cluster="c1"), host("h3", gpus=8)]
    odd = copy.deepcopy(good)
    odd[0]["spec"]["device"]["gpus"] = []  # a driver reload
    odd[2]["spec"]["device"]["gpus"] = []  # a free host: its answer is what it says (never placed on GPUs)
    doubtful = doubtful_answers(odd, good)
    assert doubtful == {"h1"}  # not h2 (never had GPUs), not h3 (holds no cluster)
    hosts, carried = carry_readable(odd, doubtful, good)
    assert carried == ["h1"] and hosts[0] == good[0]
    facts = read_host(hosts[0])
    assert facts is not None and sum(g.count for g in facts.gpus) == 8
    # The first good answer releases it: nothing doubtful any more.
    assert doubtful_answers(good, good) == set()
