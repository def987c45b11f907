"""The entry point reads an ordinary ``plan`` command line without typer (``reconciler.cli``): the same
options, defaults and values as the typer command, and typer for anything else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from reconciler import cli
from reconciler.cli_app import PlanFormat, app
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO

KINDS = {"flag": bool, "str": str, "path": Path, "count": int, "choice": PlanFormat}


def test_the_fast_plan_options_are_the_typer_command_options() -> None:
    command = typer.main.get_command(app).commands["plan"]  # type: ignore[attr-defined]
    declared = {p.opts[0]: p for p in command.params}
    assert set(declared) == set(cli.PLAN_OPTIONS)
    for name, option in cli.PLAN_OPTIONS.items():
        param = declared[name]
        assert param.opts == [name] and not param.secondary_opts and param.envvar is None
        assert param.name == option.param
        assert param.required == (name == "--repo")
        assert param.is_flag == (option.kind == "flag")
        assert param.multiple == (option.kind == "paths")
        default = param.default
        assert (str(default) if isinstance(default, PlanFormat) else default) == option.default
        annotation = param.type_descriptor.annotation
        if option.kind == "paths":
            assert annotation == list[Path]
        else:
            assert annotation is KINDS[option.kind]
        if option.kind == "choice":
            assert option.choices == tuple(str(f) for f in PlanFormat)
        if option.kind == "count":
            assert param.type_descriptor.parameter_info.min == 0


ARGS = [
    ["--repo", "r", "--inventory", "inv.json"],
    ["--repo=r", "--from-status", "--format", "json", "--what-if", "a.yaml", "--what-if=b/c.yaml"],
    ["--repo", "https://x/y.git", "--rev", "main~1", "--palette", "https://p", "--max-deletions", "0"],
    ["--repo", "r", "--from-status", "--status-branch", "s", "--branch", "b", "--no-fetch", "--no-status"],
    ["--repo", "r", "--expect-status", "abc", "--prometheus", "http://p:9090", "--changes-only"],
    ["--repo", "r", "--path", "team/a", "--format=markdown", "--max-deletions=12", "--inventory=i"],
]


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    from reconciler.commands import plan as cmd

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def run(*args: Any, **kwargs: Any) -> int:
        calls.append((args, {**kwargs, "what_if": list(kwargs["what_if"])}))
        return 0

    monkeypatch.setattr(cmd, "run", run)
    return calls


@pytest.mark.parametrize("args", ARGS)
def test_a_plan_command_line_runs_as_typer_runs_it(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _captured(monkeypatch)
    result = CliRunner().invoke(app, ["plan", *args])
    assert result.exit_code == 0, result.output
    values = cli.parse_plan(args)
    assert values is not None
    assert cli._plan(values) == 0
    typer_call, fast_call = calls
    assert fast_call == typer_call


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--help"],
        ["--inventory", "i"],  # no --repo
        ["--repo", "r", "--repo", "s"],
        ["--repo", "r", "--unknown"],
        ["--repo", "r", "positional"],
        ["--repo", "-r"],
        ["--repo", ""],
        ["--repo"],
        ["--repo", "r", "--max-deletions", "-1"],
        ["--repo", "r", "--max-deletions", "01"],
        ["--repo", "r", "--format", "JSON"],
        ["--repo", "r", "--from-status=yes"],
        ["--repo", "r", "--"],
    ],
)
def test_anything_else_goes_to_typer(args: list[str]) -> None:
    assert cli.parse_plan(args) is None


def test_an_ordinary_plan_does_not_load_typer(tmp_path: Path) -> None:
    env = {"RECONCILER_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    plan = [sys.executable, "-X", "importtime", "-m", "reconciler.cli", "plan", "--repo", str(SAMPLE_REPO)]
    plan_inventory = [*plan, "--inventory", str(SAMPLE_INVENTORY)]
    done = subprocess.run(plan_inventory, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    modules = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "reconciler.commands.plan" in modules
    assert not {m for m in modules if m.split(".")[0] in ("typer", "click")}
    refused = subprocess.run([*plan[:5], "plan", "--repo"], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "--repo" in refused.stderr  # typer's own answer
