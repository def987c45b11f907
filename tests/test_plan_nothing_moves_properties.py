"""Property: nothing running moves without a change of its own. Over random sequences of commits that add,
remove and resize OTHER platforms and workloads, move documents between files and touch comments, no
platform, pool or workload whose own document did not change ever changes hosts, GPUs or MIG instances.
Each commit is planned with the pure plan, the previous plan's results fed back as the observed clusters
and the status branch's records (tests/_chain_support.py)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.inventory import Machine, discover
from reconciler.model.pools import POOL_KIND
from reconciler.placement.admission_types import WorkloadAction
from reconciler.plan import Action, Plan
from tests._chain_support import NS, Binding, World, a100_mig_hosts, hosts_of, load, mig_pool_files
from tests._inventory_support import edge_host

H100 = "NVIDIA-H100"
A100 = "NVIDIA-A100"
H100_SIZES = (8, 4, 4, 2, 8, 1)


def machines() -> tuple[Machine, ...]:
    entry = {"vendor": "NVIDIA", "model": "GH100 [H100 SXM5 80GB]", "memory": "80 GB"}
    hosts = [
        edge_host(f"uid-h{i}", name=f"h{i}", gpus=[{**entry, "gpuCount": n}])
        for i, n in enumerate(H100_SIZES)
    ]
    hosts += [edge_host(f"uid-cpx-{i}", name=f"cpx-{i}") for i in range(5)]
    return (*a100_mig_hosts(2), *discover(hosts).machines)


def platform_doc(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "palette.ai/v1alpha1",
        "kind": "MLPlatform",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"mode": "dedicated", "gpus": [{"family": H100, "count": gpus}]},
    }


def workload_doc(name: str, whole: int, mig: str | None) -> dict[str, Any]:
    gpus = [{"family": A100, "count": whole}] if whole else []
    if mig is not None:
        gpus.append({"family": A100, "mig": mig, "count": 1})
    return {
        "apiVersion": "spectrocloud.com/v1alpha1",
        "kind": "AIWorkload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"computePoolRef": {"name": "shared-a100"}, "gpus": gpus},
    }


class Repo:
    """The repository as documents by identity, and how they are laid out in files."""

    def __init__(self) -> None:
        base = mig_pool_files()
        base["project-a/pool.yaml"]["spec"].pop("scalingPolicyRef")
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}
        for doc in base.values():
            self.docs[(doc["kind"], doc["metadata"]["name"])] = doc
        self.files: dict[tuple[str, str], str] = {
            k: p for p, d in base.items() for k in [(d["kind"], d["metadata"]["name"])]
        }
        self.comments: dict[str, str] = {}

    def render(self) -> dict[str, str]:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for key, path in sorted(self.files.items(), key=lambda kv: (kv[1], kv[0])):
            grouped.setdefault(path, []).append(self.docs[key])
        return {
            path: self.comments.get(path, "") + yaml.safe_dump_all(docs, sort_keys=False)
            for path, docs in grouped.items()
        }

    def put(self, doc: dict[str, Any], path: str) -> tuple[str, str]:
        key = (doc["kind"], doc["metadata"]["name"])
        self.docs[key], self.files[key] = doc, path
        return key


OPS = st.sampled_from(
    ["add-platform", "remove", "resize", "add-workload", "move-file", "merge-files", "comment"]
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.data())
def test_property_nothing_moves_without_a_change_of_its_own(data: st.DataObject) -> None:
    repo = Repo()
    world = World(machines())
    plan, world = world.step(load(repo.render()), max_deletions=100)
    counter = 0
    for step in range(data.draw(st.integers(2, 7), label="commits")):
        touched: set[tuple[str, str]] = set()
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            op = data.draw(OPS)
            counter += 1
            ours = sorted(k for k in repo.docs if k[0] in ("MLPlatform", "AIWorkload"))
            if op == "add-platform":
                doc = platform_doc(f"p{counter}", data.draw(st.sampled_from([1, 2, 4, 6, 8, 12])))
                touched.add(repo.put(doc, f"project-a/platforms/p{counter}.yaml"))
            elif op == "add-workload":
                whole = data.draw(st.sampled_from([0, 1, 2, 4]))
                mig = data.draw(st.sampled_from([None, "1g.10gb", "3g.40gb"])) if whole < 4 else None
                doc = workload_doc(f"w{counter}", whole, mig if whole or mig else "1g.10gb")
                touched.add(repo.put(doc, f"project-a/workloads/w{counter}.yaml"))
            elif op == "remove" and ours:
                key = data.draw(st.sampled_from(ours))
                del repo.docs[key], repo.files[key]
                touched.add(key)
            elif op == "resize" and ours:
                key = data.draw(st.sampled_from(ours))
                doc = copy.deepcopy(repo.docs[key])
                doc["spec"]["gpus"][0]["count"] = data.draw(st.sampled_from([1, 2, 4, 8]))
                repo.docs[key] = doc
                touched.add(key)
            elif op == "move-file":
                key = data.draw(st.sampled_from(sorted(repo.docs)))
                repo.files[key] = f"project-a/moved/{counter}-{key[1]}.yaml"
            elif op == "merge-files":
                keys = data.draw(
                    st.lists(st.sampled_from(sorted(repo.docs)), min_size=2, max_size=4, unique=True)
                )
                for key in keys:
                    repo.files[key] = f"project-a/all-{counter}.yaml"
            elif op == "comment":
                path = data.draw(st.sampled_from(sorted(repo.render())))
                repo.comments[path] = repo.comments.get(path, "") + f"# touched in commit {counter}\n"
        # What is settled: placed or admitted as asked (a change still waiting for room is its own change).
        before_hosts = {k: v for k, v in hosts_of(plan).items() if k in _settled(plan)}
        before_bound = {k: v for k, v in _bound(plan).items() if k in _admitted(plan)}
        plan, world = world.step(load(repo.render(), revision=f"r{step}"), max_deletions=100)
        after_hosts, after_bound = hosts_of(plan), _bound(plan)
        for ident, hosts in before_hosts.items():
            kind, _, name = ident
            key = ("ComputePool" if kind == POOL_KIND else kind, name)
            if key in touched or key not in repo.docs:
                continue
            assert after_hosts.get(ident) == hosts, (step, ident, hosts, after_hosts.get(ident))
        for wkey, held in before_bound.items():
            kinds = [k for k in repo.docs if k[1] == wkey[1] and k[0] in ("AIWorkload", "MLPlatform")]
            if not kinds or any(k in touched for k in kinds):
                continue
            assert after_bound.get(wkey) == held, (step, wkey, held, after_bound.get(wkey))


def _settled(plan: Plan) -> set[tuple[str, str, str]]:
    placed = (Action.CREATE, Action.SCALE, Action.UNCHANGED)
    out = {("MLPlatform", *p.key) for p in plan.platforms if p.action in placed}
    return out | {(POOL_KIND, *p.key) for p in plan.pools if p.action in placed}


def _admitted(plan: Plan) -> set[tuple[str, str]]:
    return {w.key for w in plan.workloads if w.action in (WorkloadAction.ADMIT, WorkloadAction.ADMITTED)}


def _bound(plan: Plan) -> dict[tuple[str, str], Binding]:
    """What every workload holds after ``plan`` (pool, GPUs, MIG instances)."""
    return {
        w.key: Binding(
            w.pool,
            tuple(sorted((u.host_uid, u.index) for u in w.gpus)),
            tuple(sorted((m.host_uid, m.gpu, m.profile, m.start) for m in w.mig)),
            (),
        )
        for w in plan.workloads
        if w.action is not WorkloadAction.REMOVE and (w.gpus or w.mig)
    }
