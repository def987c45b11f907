"""A stateful property test of the whole reconcile loop.

Hypothesis drives the real :class:`Pipeline` against the real Palette emulator on loopback and a real
bare git repository through random sequences of operations (add, delete, scale, break and fix platform
files, suspend, resource groups, host health flips, controller restarts, passes) and checks the safety
rules of docs/reconciling.md and the allocation rules of section 4 after every pass. A seeded random walk
over the same operations reaches deeper states within the same time budget.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reconciler.emulator import EmulatorServer
from reconciler.metrics import PassOutcome
from reconciler.model.conditions import Reason
from reconciler.model.gpu import canonical_family
from reconciler.model.observed import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NAME_LABEL, NAMESPACE_LABEL
from reconciler.plan import Action, PlatformPlan
from reconciler.runtime import wiring
from reconciler.runtime.options import ControllerOptions
from reconciler.runtime.outcome import PassResult
from reconciler.runtime.pipeline import Pipeline
from reconciler.snapshots import load_snapshot
from tests._e2e_support import SAMPLE, sample_files
from tests._git_support import GIT_ENV, RemoteRepo, git_run

API_KEY = "stateful-secret-key-5f3a9c1e7b"
STATUS_BRANCH = "reconciler/status"
NAMESPACES = ("project-a", "project-b")
NAMES = ("alpha", "beta", "gamma", "delta", "epsilon")
FAMILIES = ("NVIDIA-H100", "NVIDIA-A100", "NVIDIA-L40S", "nvidia-t4")
RESOURCE_GROUPS: tuple[dict[str, str], ...] = (
    {},
    {"network-pool": "3"},
    {"storage-tier": "high-performance"},
)
HOST_NAMES = tuple(str(h["metadata"]["name"]) for h in load_snapshot(SAMPLE / "inventory.json").edge_hosts)
PROVISION_SECONDS = 0.2
DELETE_SECONDS = 0.2
SYNTAX_ERROR = "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: [\n"

Key = tuple[str, str]


@dataclass
class PlatformModel:
    """What the test committed for one platform: its good spec, and whether the file is broken now."""

    namespace: str
    name: str
    spec: dict[str, Any]
    broken: str | None = None  # None, "schema" or "syntax"

    @property
    def path(self) -> str:
        return f"{self.namespace}/platforms/{self.name}.yaml"

    def document(self) -> str:
        if self.broken == "syntax":
            return SYNTAX_ERROR
        spec = dict(self.spec)
        if self.broken == "schema":
            spec["gpus"] = [{"family": "NVIDIA-H100", "count": "many"}]
        doc = {
            "apiVersion": "palette.ai/v1alpha1",
            "kind": "MLPlatform",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
        return yaml.safe_dump(doc, sort_keys=False)


def _platform(namespace: str, name: str, family: str, count: int, groups: dict[str, str]) -> PlatformModel:
    """A valid MLPlatform; each (namespace, name) has its own VIP so two platforms never share one."""
    spec: dict[str, Any] = {
        "gpus": [{"family": family, "count": count}] if count else [],
        "edge": {"vip": f"10.10.{200 + NAMESPACES.index(namespace)}.{10 + NAMES.index(name)}"},
    }
    if groups:
        spec["resourceGroups"] = dict(groups)
    return PlatformModel(namespace, name, spec)


PLATFORMS = st.builds(
    _platform,
    namespace=st.sampled_from(NAMESPACES),
    name=st.sampled_from(NAMES),
    family=st.sampled_from(FAMILIES),
    count=st.integers(0, 8),
    groups=st.sampled_from(RESOURCE_GROUPS),
)


@dataclass
class ClusterView:
    uid: str
    name: str
    labels: dict[str, str]
    hosts: list[str]
    deleting: bool
    state: str


@dataclass
class World:
    """Facts about the emulator read under its lock."""

    clusters: list[ClusterView] = field(default_factory=list)

    def live(self) -> dict[str, ClusterView]:
        return {c.uid: c for c in self.clusters if not c.deleting}

    def live_names(self) -> set[str]:
        return {c.name for c in self.clusters if not c.deleting}


def read_status_branch(bare: Path) -> dict[str, str]:
    """Every file of the status branch (path -> text), or nothing before the first status commit."""
    listing = git_run("ls-tree", "-r", "--name-only", STATUS_BRANCH, cwd=bare)
    if listing.returncode != 0:
        return {}
    paths = listing.stdout.split()
    if not paths:
        return {}
    batch = "".join(f"{STATUS_BRANCH}:{p}\n" for p in paths)
    out = subprocess.run(
        ["git", "cat-file", "--batch"],
        cwd=bare,
        env=GIT_ENV,
        input=batch.encode(),
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    files: dict[str, str] = {}
    pos = 0
    for path in paths:
        end = out.index(b"\n", pos)
        size = int(out[pos:end].split()[2])
        files[path] = out[end + 1 : end + 1 + size].decode()
        pos = end + 1 + size + 1
    return files


class ReconcileLoop(RuleBasedStateMachine):
    """The real controller, the real emulator and a real bare repository under random operations."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="loop-stateful-"))
        (self.tmp / "git").mkdir()
        self.remote = RemoteRepo(self.tmp / "git")
        base = {k: v for k, v in sample_files().items() if "/platforms/" not in k}
        self.remote.commit(base, "sample configuration without platforms")
        snapshot = load_snapshot(SAMPLE / "inventory.json")
        self.emulator = EmulatorServer.from_snapshot(
            snapshot, API_KEY, provision_seconds=PROVISION_SECONDS, delete_seconds=DELETE_SECONDS
        ).start()
        self.host_uid = {str(h["metadata"]["name"]): str(h["metadata"]["uid"]) for h in snapshot.edge_hosts}
        self.unhealthy: set[str] = set()
        self.model: dict[Key, PlatformModel] = {}
        self.max_deletions = 1
        self.restarts = 0
        self.controller = self._new_controller()
        self.last: PassResult | None = None
        # Per platform, its observedRevision and committed document as of the last checked pass.
        self.reported: dict[Key, tuple[str, str]] = {}

    # -- wiring -------------------------------------------------------------------------------------

    def _new_controller(self) -> Pipeline:
        self.restarts += 1
        options = ControllerOptions(
            repo=str(self.remote.bare),
            palette_url=self.emulator.url,
            cache_dir=self.tmp / f"cache-{self.restarts}",
            max_deletions=self.max_deletions,
        )
        return wiring.build(options, environ={"PALETTE_API_KEY": API_KEY})

    def teardown(self) -> None:
        self.controller.close()
        self.emulator.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def world(self) -> World:
        state = self.emulator.state
        with state.lock:
            state.sweep()
            return World(
                [
                    ClusterView(
                        c.uid,
                        c.name,
                        dict(c.labels),
                        c.host_uids(),
                        c.deleting_since is not None,
                        state.cluster_state(c),
                    )
                    for c in state.clusters.values()
                ]
            )

    def commit(self, model: PlatformModel | None, message: str, *, delete: Key | None = None) -> None:
        if delete is not None:
            gone = self.model.pop(delete)
            self.remote.commit({gone.path: None}, message)
        elif model is not None:
            self.model[(model.namespace, model.name)] = model
            self.remote.commit({model.path: model.document()}, message)

    # -- rules: the configuration repository --------------------------------------------------------

    @initialize(
        max_deletions=st.sampled_from([1, 2]),
        initial=st.lists(PLATFORMS, min_size=1, max_size=3, unique_by=lambda m: (m.namespace, m.name)),
    )
    def configure(self, max_deletions: int, initial: list[PlatformModel]) -> None:
        """A few platforms merged at once and a first pass, so every example starts with clusters."""
        if max_deletions != self.max_deletions:
            self.max_deletions = max_deletions
            self.controller.close()
            self.controller = self._new_controller()
        for model in initial:
            self.model[(model.namespace, model.name)] = model
        self.remote.commit({m.path: m.document() for m in initial}, "initial platforms")
        self.one_pass()

    @rule(model=PLATFORMS, and_pass=st.booleans())
    def add_platform(self, model: PlatformModel, and_pass: bool) -> None:
        self.op_add(model)
        self.maybe_pass(and_pass)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), and_pass=st.booleans())
    def delete_platform(self, data: st.DataObject, and_pass: bool) -> None:
        self.op_delete(data.draw(st.sampled_from(sorted(self.model))))
        self.maybe_pass(and_pass)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), count=st.integers(0, 8), family=st.sampled_from(FAMILIES), and_pass=st.booleans())
    def change_gpu_count(self, data: st.DataObject, count: int, family: str, and_pass: bool) -> None:
        self.op_scale(data.draw(st.sampled_from(sorted(self.model))), count, family)
        self.maybe_pass(and_pass)

    @precondition(lambda self: any(m.broken is None for m in self.model.values()))
    @rule(data=st.data(), how=st.sampled_from(["schema", "syntax"]), and_pass=st.booleans())
    def break_platform(self, data: st.DataObject, how: str, and_pass: bool) -> None:
        self.op_break(data.draw(st.sampled_from(self.intact())), how)
        self.maybe_pass(and_pass)

    @precondition(lambda self: any(m.broken is not None for m in self.model.values()))
    @rule(data=st.data(), and_pass=st.booleans())
    def fix_platform(self, data: st.DataObject, and_pass: bool) -> None:
        self.op_fix(data.draw(st.sampled_from(self.broken())))
        self.maybe_pass(and_pass)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), and_pass=st.booleans())
    def toggle_suspend(self, data: st.DataObject, and_pass: bool) -> None:
        self.op_suspend(data.draw(st.sampled_from(sorted(self.model))))
        self.maybe_pass(and_pass)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), groups=st.sampled_from(RESOURCE_GROUPS), and_pass=st.booleans())
    def change_resource_groups(self, data: st.DataObject, groups: dict[str, str], and_pass: bool) -> None:
        self.op_groups(data.draw(st.sampled_from(sorted(self.model))), groups)
        self.maybe_pass(and_pass)

    @rule(host=st.sampled_from(HOST_NAMES), and_pass=st.booleans())
    def toggle_host_health(self, host: str, and_pass: bool) -> None:
        self.op_host(host)
        self.maybe_pass(and_pass)

    @rule()
    def restart_controller(self) -> None:
        self.op_restart()

    @rule(passes=st.integers(1, 3))
    def run_passes(self, passes: int) -> None:
        for _ in range(passes):
            self.one_pass()
            time.sleep(PROVISION_SECONDS / 2)

    @rule()
    def settle(self) -> None:
        self.op_settle()

    # -- operations (shared by the rules and the seeded random walk) --------------------------------

    def intact(self) -> list[Key]:
        return sorted(k for k, m in self.model.items() if m.broken is None)

    def broken(self) -> list[Key]:
        return sorted(k for k, m in self.model.items() if m.broken is not None)

    def op_add(self, model: PlatformModel) -> None:
        if (model.namespace, model.name) not in self.model:
            self.commit(model, f"add {model.namespace}/{model.name}")

    def op_delete(self, key: Key) -> None:
        self.commit(None, f"delete {key}", delete=key)

    def op_scale(self, key: Key, count: int, family: str) -> None:
        """A new GPU count; the family stays the platform's own when it has one."""
        model = self.model[key]
        family = model.spec["gpus"][0]["family"] if model.spec["gpus"] else family
        model.spec["gpus"] = [{"family": family, "count": count}] if count else []
        self.commit(model, f"scale {key} to {count}")

    def op_groups(self, key: Key, groups: dict[str, str]) -> None:
        model = self.model[key]
        model.spec.pop("resourceGroups", None)
        if groups:
            model.spec["resourceGroups"] = dict(groups)
        self.commit(model, f"resource groups of {key}: {groups}")

    def op_break(self, key: Key, how: str) -> None:
        model = self.model[key]
        model.broken = how
        self.commit(model, f"break {key} ({how})")

    def op_fix(self, key: Key) -> None:
        model = self.model[key]
        model.broken = None
        self.commit(model, f"fix {key}")

    def op_suspend(self, key: Key) -> None:
        model = self.model[key]
        if model.spec.get("suspend"):
            model.spec.pop("suspend")
        else:
            model.spec["suspend"] = True
        self.commit(model, f"suspend {key}: {bool(model.spec.get('suspend'))}")

    def op_host(self, host: str) -> None:
        """Flip an edge host's health through the emulator's admin interface."""
        uid = self.host_uid[host]
        healthy = uid in self.unhealthy
        self.emulator.state.patch_host(uid, {"healthState": "healthy" if healthy else "unhealthy"})
        if healthy:
            self.unhealthy.discard(uid)
        else:
            self.unhealthy.add(uid)

    def op_restart(self) -> None:
        """A new process: a new Pipeline object with a fresh cache directory."""
        self.controller.close()
        self.controller = self._new_controller()

    def op_settle(self) -> None:
        """Passes until nothing changes any more (the loop reaches a fixed point); then every placed
        platform has a live cluster."""
        for _ in range(8):
            result = self.one_pass()
            if not any(p.mutating for p in result.plan) and result.outcome is not PassOutcome.ERROR:
                break
            time.sleep(max(PROVISION_SECONDS, DELETE_SECONDS) + 0.05)
        result = self.one_pass()
        assert not any(p.mutating for p in result.plan), f"no fixed point: {result.plan}"
        live = self.world().live_names()
        for p in result.plan:
            placed = p.action is Action.UNCHANGED and p.reason not in (Reason.PRUNE_BLOCKED, Reason.DELETING)
            model = self.model.get(p.key)
            valid = model is not None and model.broken is None and not model.spec.get("suspend")
            if placed and valid:
                assert f"{p.namespace}-{p.name}" in live, f"{p.key} planned unchanged without a cluster"

    # -- one pass and the checks after it -----------------------------------------------------------

    def maybe_pass(self, and_pass: bool) -> None:
        """Operations are followed by a pass half of the time, so changes also pile up between passes."""
        if and_pass:
            self.one_pass()
            time.sleep(PROVISION_SECONDS / 2)

    def one_pass(self) -> PassResult:
        before = self.world()
        head = self.remote.head()
        result = self.controller.reconcile_once()
        after = self.world()
        self.last = result
        _note(f"pass outcome: {result.outcome}")
        for p in result.plan:
            _note(f"plan: {p.action} {p.reason or ''}".strip())
        self.check_pass(result, head, before, after)
        return result

    def check_pass(self, result: PassResult, head: str, before: World, after: World) -> None:
        assert result.outcome is not PassOutcome.ERROR, f"pass failed: {result.error}"
        assert result.revision == head

        # The prune guard: clusters that stopped being live in this pass, counted per platform.
        live_after = after.live()
        stopped = {c.name for uid, c in before.live().items() if uid not in live_after}
        assert len(stopped) <= self.max_deletions, f"one pass deleted {sorted(stopped)}"
        # Only a planned delete (or replace) ends a cluster: rejected, suspended and invalid keep theirs.
        ending = {
            f"{p.namespace}-{p.name}" for p in result.plan if p.action in (Action.DELETE, Action.REPLACE)
        }
        assert stopped <= ending, f"clusters {sorted(stopped - ending)} ended without a planned delete"

        # Invalid is not absent: a broken file keeps its cluster.
        for key, model in self.model.items():
            name = f"{key[0]}-{key[1]}"
            if model.broken is not None and name in before.live_names():
                assert name in after.live_names(), f"{key} is broken ({model.broken}) and lost its cluster"

        plan = {p.key: p for p in result.plan}
        for key, model in self.model.items():
            if model.broken == "schema" and result.outcome is not PassOutcome.SKIPPED:
                assert plan[key].action is Action.INVALID, f"{key} broken but planned {plan[key].action}"
                assert result.phases[key] == "Invalid", f"{key} broken but reported {result.phases[key]}"
        running = {c.name for c in after.clusters if c.state == "Running"}
        for (ns, name), phase in result.phases.items():
            if phase == "Running":
                assert f"{ns}-{name}" in running, f"{ns}/{name} reported Running without a running cluster"
        for p in result.plan:
            if p.action in (Action.CREATE, Action.SCALE):
                assert f"{p.namespace}-{p.name}" in after.live_names(), f"{p.action} {p.key} left no cluster"
            self.check_allocation(p, after)

        # The status branch says what the pass reported, at the config head.
        files = read_status_branch(self.remote.bare)
        for (ns, name), phase in result.phases.items():
            path = f"{ns}/mlplatforms/{name}.yaml"
            assert path in files, f"no status file for {ns}/{name} (phase {phase})"
            status = yaml.safe_load(files[path])["status"]
            assert status["phase"] == str(phase), f"{path}: {status['phase']} but the pass said {phase}"
            self.check_observed_revision((ns, name), status["observedRevision"], head)
        listed = {p for p in files if "/mlplatforms/" in p}
        expected = {f"{ns}/mlplatforms/{name}.yaml" for (ns, name) in result.phases}
        assert listed == expected, f"status files {sorted(listed ^ expected)} do not match the pass"

        # Secrets never reach status files or messages.
        assert all(API_KEY not in text for text in files.values())
        assert API_KEY not in (result.error or "")
        assert all(API_KEY not in p.message for p in result.plan)

    def check_observed_revision(self, key: Key, observed: str, head: str) -> None:
        """docs/status-branch.md: ``observedRevision`` moves to the head exactly when the platform's own
        inputs changed since the last pass (here only its document changes; profiles stay)."""
        model = self.model.get(key)
        # Compared as data: an edit that only reorders keys changes no input.
        document = (
            json.dumps(yaml.safe_load(model.document()), sort_keys=True) if model and not model.broken else ""
        )
        if model is not None and model.broken:
            document = model.document()
        last = self.reported.get(key)
        assert observed in {head, last[0] if last else head}, f"{key} observes {observed}, head {head}"
        if model is not None and model.broken is None:
            if last is not None and last[1] == document:
                assert observed == last[0], f"{key} unchanged, but its observedRevision moved to {observed}"
            else:
                assert observed == head, f"{key} changed, but it observes {observed}, not the head {head}"
        self.reported[key] = (observed, document)

    def check_allocation(self, p: PlatformPlan, after: World) -> None:
        """docs/allocation.md for a placed platform: the request is met, on hosts of one architecture
        that carry the platform's resource groups, and the cluster holds exactly the planned hosts."""
        placed = p.action in (Action.CREATE, Action.SCALE) or (
            p.action is Action.UNCHANGED and p.reason in (Reason.PROVISIONED, Reason.PROVISIONING)
        )
        model = self.model.get(p.key)
        if not placed or model is None or model.broken is not None:
            return
        for request in model.spec["gpus"]:
            family = canonical_family(request["family"])
            assert p.gpus.get(family, 0) >= request["count"], f"{p.key} got {p.gpus} for {request}"
        hosts = [*p.control_plane, *p.workers]
        state = self.emulator.state
        with state.lock:
            labels = [dict(state.hosts[uid]["metadata"].get("labels") or {}) for uid in hosts]
            arches = {state.hosts[uid]["spec"]["device"].get("archType") for uid in hosts}
        assert len(arches) == 1, f"{p.key} spans architectures {arches}"
        for group, value in model.spec.get("resourceGroups", {}).items():
            assert all(h.get(f"palette.ai.rg/{group}") == value for h in labels), f"{p.key} outside {group}"
        name = f"{p.namespace}-{p.name}"
        cluster = next(c for c in after.clusters if c.name == name and not c.deleting)
        assert sorted(cluster.hosts) == sorted(hosts), f"{name} holds {cluster.hosts}, planned {hosts}"

    @invariant()
    def emulator_is_consistent(self) -> None:
        world = self.world()
        owners: dict[str, str] = {}
        for cluster in world.clusters:
            for host in cluster.hosts:
                assert host not in owners, f"host {host} in {owners[host]} and {cluster.name}"
                owners[host] = cluster.name
        names = [c.name for c in world.clusters if not c.deleting]
        assert len(names) == len(set(names)), f"two live clusters for one platform: {sorted(names)}"
        for cluster in world.clusters:
            assert cluster.labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
            ns, name = cluster.labels.get(NAMESPACE_LABEL), cluster.labels.get(NAME_LABEL)
            assert cluster.name == f"{ns}-{name}", f"{cluster.name} labelled {ns}/{name}"


ReconcileLoop.TestCase.settings = settings(max_examples=6, stateful_step_count=20, deadline=None)
test_reconcile_loop = ReconcileLoop.TestCase


def _random_platform(rng: random.Random) -> PlatformModel:
    return _platform(
        rng.choice(NAMESPACES),
        rng.choice(NAMES),
        rng.choice(FAMILIES),
        rng.randint(0, 8),
        rng.choice(RESOURCE_GROUPS),
    )


def _note(value: str) -> None:
    """A coverage event for ``--hypothesis-show-statistics``; the random walk runs outside Hypothesis."""
    with contextlib.suppress(InvalidArgument):
        event(value)


def _walk_step(loop: ReconcileLoop, rng: random.Random) -> None:
    """One operation, weighted towards edits of the configuration (passes come after it)."""
    weights = {
        "add": 3,
        "delete": 2 if loop.model else 0,
        "scale": 3 if loop.model else 0,
        "suspend": 2 if loop.model else 0,
        "groups": 1 if loop.model else 0,
        "break": 3 if loop.intact() else 0,
        "fix": 2 if loop.broken() else 0,
        "host": 2,
        "restart": 1,
        "settle": 1,
    }
    op = rng.choices(list(weights), weights=list(weights.values()))[0]
    if op == "add":
        loop.op_add(_random_platform(rng))
    elif op == "delete":
        loop.op_delete(rng.choice(sorted(loop.model)))
    elif op == "scale":
        loop.op_scale(rng.choice(sorted(loop.model)), rng.randint(0, 8), rng.choice(FAMILIES))
    elif op == "groups":
        loop.op_groups(rng.choice(sorted(loop.model)), rng.choice(RESOURCE_GROUPS))
    elif op == "suspend":
        loop.op_suspend(rng.choice(sorted(loop.model)))
    elif op == "break":
        loop.op_break(rng.choice(loop.intact()), rng.choice(["schema", "syntax"]))
    elif op == "fix":
        loop.op_fix(rng.choice(loop.broken()))
    elif op == "host":
        loop.op_host(rng.choice(HOST_NAMES))
    elif op == "restart":
        loop.op_restart()
    else:
        loop.op_settle()


@pytest.mark.parametrize("seed", [1, 2])
def test_a_seeded_random_walk_keeps_the_safety_rules(seed: int) -> None:
    """The same machine, walked by a seeded RNG that favours edits followed by passes.

    Hypothesis' own search spends many steps on short runs; this walk reaches deep states (broken files
    across restarts, scaling after health flips, several deletions between passes) in a few seconds.
    """
    rng = random.Random(seed)
    loop = ReconcileLoop()
    try:
        loop.configure(max_deletions=rng.choice([1, 2]), initial=[_random_platform(rng) for _ in range(3)])
        for _ in range(22):
            _walk_step(loop, rng)
            for _ in range(rng.choice([0, 1, 1, 2])):
                loop.one_pass()
                time.sleep(PROVISION_SECONDS / 2)
            loop.emulator_is_consistent()
        loop.op_settle()
    finally:
        loop.teardown()
