"""The cache of checked documents' pickles (``reconciler.model.pickling``): models and records come back
equal and behave as the originals (a model copied with changes, a record given problems)."""

from __future__ import annotations

import pickle

import pytest

from reconciler.manifests.loader import check_bytes
from reconciler.model.base import LocalRef, ObjectMeta
from reconciler.model.diagnostics import Diagnostic, Severity
from reconciler.model.pickling import by_fields
from reconciler.model.pools import MigRequest, WorkloadRequest

WORKLOAD = b"""\
apiVersion: spectrocloud.com/v1alpha1
kind: AIWorkload
metadata: {name: w, namespace: team}
spec:
  computePoolRef: {name: pool}
  workloadProfileRef: {name: training}
  gpus: [{family: NVIDIA-H100, count: 2}]
---
kind: Nonsense
"""


def again(value: object) -> object:
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def test_models_come_back_equal_with_their_fields_set_and_copy_with_changes() -> None:
    meta = ObjectMeta(name="a", namespace="b", labels={"x": "y"})
    back = again(meta)
    assert isinstance(back, ObjectMeta)
    assert back == meta and back.model_fields_set == meta.model_fields_set
    assert back.model_copy(update={"name": "c"}).name == "c" and back.name == "a"
    assert again(LocalRef(name="p")) == LocalRef(name="p")


def test_checked_files_come_back_with_the_same_records() -> None:
    checked = check_bytes("team/w.yaml", WORKLOAD)
    back = again(checked)
    assert type(back) is type(checked)
    assert (back.path, back.diagnostics, back.complete, back.text) == (
        checked.path,
        checked.diagnostics,
        checked.complete,
        checked.text,
    )
    for mine, theirs in zip(back.records, checked.records, strict=True):
        assert [getattr(mine, s) for s in type(mine).__slots__] == [
            getattr(theirs, s) for s in type(theirs).__slots__
        ]
    assert back.records[0].resource == checked.records[0].resource
    back.records[1].problems.append(back.records[1].problems[0])  # lists of their own
    assert len(back.records[1].problems) == len(checked.records[1].problems) + 1


def test_small_records_come_back_equal() -> None:
    request = WorkloadRequest(
        ("ns", "w"), priority=2, whole={"NVIDIA-A100": 1}, mig=(MigRequest("x", "1g", 2),)
    )
    assert again(request) == request
    diagnostic = Diagnostic("f.yaml", 1, 2, "bad", Severity.WARNING, field="spec")
    assert again(diagnostic) == diagnostic


def test_by_fields_refuses_a_class_it_cannot_rebuild() -> None:
    from dataclasses import dataclass, field

    @dataclass
    class Derived:
        a: int
        b: int = field(init=False, default=0)

    with pytest.raises(TypeError):
        by_fields(Derived)


def test_a_pack_writes_equal_models_once_and_keeps_resources_apart() -> None:
    from reconciler.model.pickling import dumps_sharing
    from reconciler.model.resources import KINDS

    other = WORKLOAD.replace(b"name: w,", b"name: v,")
    files = [check_bytes("team/w.yaml", WORKLOAD), check_bytes("team/v.yaml", other)]
    back = pickle.loads(dumps_sharing(files, tuple(model for _kind, model in KINDS.values())))
    first, second = (f.records[0].resource for f in back)
    assert first is not None and second is not None
    assert first == files[0].records[0].resource and second == files[1].records[0].resource
    assert first is not second and first.metadata.name == "w" and second.metadata.name == "v"
    assert first.spec is second.spec  # the same spec, loaded once
    assert pickle.loads(dumps_sharing(files)) is not None
