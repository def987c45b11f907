"""Git credentials never reach a command line (``ps``) or a clone's config: a URL's ``user:token@`` is
handed to git by a credential helper reading the environment of that one git process."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from reconciler.source import _gitutil
from reconciler.source.revision import read_revision
from reconciler.source.status_store import StatusStore
from tests._git_support import RemoteRepo, git, git_http_server

TOKEN = "s3cr3t/t0ken"  # a slash: percent-encoded in the URL, decoded for git


@pytest.fixture
def recorded_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every ``git`` the reconciler starts runs through a wrapper that logs its argv first."""
    real = shutil.which("git")
    assert real is not None
    log = tmp_path / "argv.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_split_credentials_moves_userinfo_of_http_urls_to_the_environment() -> None:
    args, env = _gitutil.split_credentials(("push", "--", "https://bot:a%2Fb@example.com/r.git", "x:y"))
    assert args == ("push", "--", "https://example.com/r.git", "x:y")
    assert env["RECONCILER_GIT_USERNAME"] == "bot" and env["RECONCILER_GIT_PASSWORD"] == "a/b"
    assert "a/b" not in " ".join(v for k, v in env.items() if k.startswith("GIT_CONFIG"))
    assert _gitutil.split_credentials(("fetch", "ssh://git@example.com/r.git")) == (
        ("fetch", "ssh://git@example.com/r.git"),
        {},
    )


def test_status_push_and_a_url_clone_keep_the_token_off_command_lines_and_config(
    tmp_path: Path, recorded_argv: Path
) -> None:
    remote = RemoteRepo(tmp_path)
    remote.commit({"project-a/platform.yaml": "kind: MLPlatform\n"}, "config")
    with git_http_server(remote.bare.parent, f"deploy:{TOKEN}") as base:
        url = base.replace("http://", "http://deploy:s3cr3t%2Ft0ken@") + "/remote.git"
        store = StatusStore(url, workdir=tmp_path / "store")
        commit = store.write({"project-a/computes/c.yaml": b"c: 1\n"}, "over http", {})
        assert commit == git("rev-parse", "reconciler/status", cwd=remote.bare).strip()
        sha, files = read_revision(url)
        assert files and len(sha) == 40
    logged = recorded_argv.read_text()
    assert "push" in logged and "clone" in logged and "ls-remote" in logged
    assert TOKEN not in logged and "s3cr3t" not in logged
    assert "s3cr3t" not in (tmp_path / "store" / "config").read_text()
