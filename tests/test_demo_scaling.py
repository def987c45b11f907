"""The demo's scaling scene without Prometheus: one line says how to see it, nothing is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.commands import demo_scaling


def test_without_prometheus_the_scene_is_one_line_saying_how_to_see_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo_scaling.shutil, "which", lambda _name: None)
    said: list[str] = []

    def no_remote(_sample: Path, _workspace: Path) -> Path:
        raise AssertionError("no config repository is made without Prometheus")

    assert demo_scaling.scene(tmp_path, tmp_path, "key", said.append, no_remote) is False
    assert said == [demo_scaling.HINT]
    assert "apt-get install prometheus" in said[0]
    assert list(tmp_path.iterdir()) == []
