"""Property tests of the emulator's state: whatever clients do, no host is ever in two clusters and a
host's ``in-use`` state always matches cluster membership."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.emulator import EmulatorState
from reconciler.emulator.errors import ApiError
from reconciler.snapshots import Snapshot
from tests._palette_support import FakeClock, host

HOST_UIDS = [f"edge-{i}" for i in range(8)]

pools = st.lists(st.sampled_from(HOST_UIDS), min_size=1, max_size=4)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("create"), pools, st.lists(st.sampled_from(HOST_UIDS), max_size=3)),
        st.tuples(st.just("update"), st.integers(0, 5), pools),
        st.tuples(st.just("delete"), st.integers(0, 5), st.just([])),
        st.tuples(st.just("tick"), st.floats(0, 3), st.just([])),
        st.tuples(st.just("sicken"), st.sampled_from(HOST_UIDS), st.just([])),
    ),
    max_size=25,
)


def _pool(name: str, hosts: list[str], control_plane: bool) -> dict[str, Any]:
    return {
        "cloudConfig": {"edgeHosts": [{"hostUid": h} for h in hosts]},
        "poolConfig": {"name": name, "isControlPlane": control_plane, "labels": [], "size": len(hosts)},
    }


def _check_invariants(state: EmulatorState) -> None:
    owners: dict[str, str] = {}
    for cluster in state.clusters.values():
        for uid in cluster.host_uids():
            assert uid not in owners, f"{uid} in {owners[uid]} and {cluster.uid}"
            owners[uid] = cluster.uid
    for uid, doc in state.hosts.items():
        refs = doc["status"]["inUseClustersRef"]
        if uid in owners:
            assert doc["status"]["state"] == "in-use"
            assert [r["uid"] for r in refs] == [owners[uid]]
        else:
            assert refs == [] and doc["status"]["state"] == "ready"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_no_host_is_ever_in_two_clusters(ops: list[tuple[str, Any, Any]]) -> None:
    clock = FakeClock()
    state = EmulatorState(
        Snapshot(edge_hosts=[host(uid) for uid in HOST_UIDS]),
        provision_seconds=2,
        delete_seconds=1,
        clock=clock,
    )
    created: list[str] = []
    for index, (op, first, second) in enumerate(ops):
        try:
            if op == "create":
                pools_ = [_pool("cp", first, True)] + ([_pool("w", second, False)] if second else [])
                body = {"metadata": {"name": f"c{index}"}, "spec": {"machinepoolconfig": pools_}}
                created.append(state.create_cluster(None, body))
            elif op == "update" and created:
                uid = created[first % len(created)]
                cluster = state.clusters.get(uid)
                if cluster is not None:
                    state.update_machine_pool(cluster.cloud_config_uid, "cp", None, _pool("cp", second, True))
            elif op == "delete" and created:
                state.delete_cluster(created[first % len(created)], None)
            elif op == "tick":
                clock.advance(first)
                state.sweep()
            elif op == "sicken":
                state.patch_host(first, {"healthState": "unhealthy"})
        except ApiError as error:
            assert error.status in (400, 404, 409)
        _check_invariants(state)
