"""GitSource and read_revision against real repositories (bare remotes on disk and git daemon)."""

from __future__ import annotations

import shutil
import stat
import time
from pathlib import Path

import pytest

from reconciler.source import GitSource, SkippedEntry, SourceError, read_revision
from reconciler.source.git import MAX_BLOB_BYTES
from tests._git_support import RemoteRepo, git, git_daemon, git_http_server, silent_server

PLATFORM = "apiVersion: palette.ai/v1alpha1\nkind: MLPlatform\nmetadata: {name: p, namespace: a}\n"


@pytest.fixture
def remote(tmp_path: Path) -> RemoteRepo:
    repo = RemoteRepo(tmp_path)
    repo.commit({"project-a/platform.yaml": PLATFORM, "README.md": "not config\n"}, "initial")
    return repo


def source_for(url: str | Path, tmp_path: Path, **kwargs: object) -> GitSource[tuple[str, bytes]]:
    return GitSource(str(url), cache_dir=tmp_path / "cache", **kwargs)  # type: ignore[arg-type]


def test_sync_asks_ls_remote_and_fetches_only_when_the_remote_moved(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    source = source_for(remote.bare, tmp_path)
    first = source.sync()
    assert first == remote.head()
    assert source.fetch_count == 1
    assert source.sync() == first
    assert source.sync() == first
    assert source.fetch_count == 1, "an unchanged remote must not be fetched again"
    assert source.ls_remote_count == 3

    second = remote.commit({"project-a/other.yaml": PLATFORM.replace("name: p", "name: q")})
    assert source.sync() == second
    assert source.fetch_count == 2
    assert source.last_fetch_seconds > 0
    assert source.cached_head() == second


def test_cache_survives_a_new_instance_without_refetching(remote: RemoteRepo, tmp_path: Path) -> None:
    source_for(remote.bare, tmp_path).sync()
    again = source_for(remote.bare, tmp_path)
    assert again.sync() == remote.head()
    assert again.fetch_count == 0


def test_read_tree_returns_yaml_blobs_of_the_commit_without_a_checkout(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    sha = remote.commit({"b/deep/x.yml": "a: 1\n", "b/notes.txt": "x\n", "c.YAML": "c: 3\n"})
    source = source_for(remote.bare, tmp_path)
    assert source.sync() == sha
    files = source.read_tree(sha)
    assert [path for path, _ in files] == ["b/deep/x.yml", "c.YAML", "project-a/platform.yaml"]
    assert dict(files)["b/deep/x.yml"] == b"a: 1\n"
    # The cache is a bare repository: no file of the config repository exists on disk there.
    assert not list((tmp_path / "cache").rglob("platform.yaml"))
    assert source.skipped == []
    assert source.complete


def test_read_tree_reads_an_older_revision_as_it_was(remote: RemoteRepo, tmp_path: Path) -> None:
    old = remote.head()
    remote.commit({"project-a/platform.yaml": None, "new.yaml": "n: 1\n"})
    source = source_for(remote.bare, tmp_path)
    source.sync()
    assert [p for p, _ in source.read_tree(old)] == ["project-a/platform.yaml"]
    assert [p for p, _ in source.read_tree(remote.head())] == ["new.yaml"]


def test_symlink_to_etc_passwd_is_never_followed(remote: RemoteRepo, tmp_path: Path) -> None:
    sha = remote.commit({}, symlinks={"evil.yaml": "/etc/passwd", "linked-dir": "/etc"})
    source = source_for(remote.bare, tmp_path)
    source.sync()
    files = source.read_tree(sha)
    assert [p for p, _ in files] == ["project-a/platform.yaml"]
    assert all(b"root:" not in data for _, data in files)
    assert {s.path for s in source.skipped} == {"evil.yaml", "linked-dir"}
    assert all("symbolic link" in d.message for d in source.diagnostics)
    severities = {d.file: d.severity for d in source.diagnostics}
    assert severities == {"evil.yaml": "error", "linked-dir": "warning"}
    assert not source.complete, "a skipped manifest may hide a resource"
    _sha, via_revision = read_revision(str(remote.work))
    assert [p for p, _ in via_revision] == ["project-a/platform.yaml"]


def _install_marker_hooks(hooks_dir: Path, marker: Path) -> None:
    hooks_dir.mkdir(parents=True, exist_ok=True)
    for name in (
        "post-checkout",
        "post-merge",
        "post-update",
        "pre-push",
        "reference-transaction",
        "post-rewrite",
        "pre-auto-gc",
        "push-to-checkout",
    ):
        hook = hooks_dir / name
        hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_hooks_and_filters_of_the_repository_are_never_run(remote: RemoteRepo, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    # A smudge filter runs on checkout, fsmonitor on index reads: neither may run on a read from objects.
    remote.commit({".gitattributes": "*.yaml filter=evil\n"})
    _install_marker_hooks(remote.bare / "hooks", marker)
    git("config", "filter.evil.smudge", f"sh -c 'echo smudge >> {marker}; cat'", cwd=remote.work)
    git("config", "core.fsmonitor", f"sh -c 'echo fsmonitor >> {marker}'", cwd=remote.work)
    _install_marker_hooks(remote.work / ".git" / "hooks", marker)

    source = source_for(remote.bare, tmp_path)
    sha = source.sync()
    assert source.read_tree(sha)
    from_work = source_for(remote.work, tmp_path / "w")
    assert from_work.read_tree(from_work.sync())
    assert read_revision(str(remote.work))[1]
    assert read_revision(f"file://{remote.bare}")[1]
    assert not marker.exists(), marker.read_text() if marker.exists() else ""


def test_parse_cache_parses_each_blob_once_across_passes(remote: RemoteRepo, tmp_path: Path) -> None:
    remote.commit({f"platforms/p{i}.yaml": PLATFORM.replace("name: p", f"name: p{i}") for i in range(5)})
    parsed: list[str] = []

    def parse(path: str, data: bytes) -> tuple[str, int]:
        parsed.append(path)
        return (path, len(data))

    source = GitSource(str(remote.bare), cache_dir=tmp_path / "cache", parse=parse)
    first = source.read_parsed(source.sync())
    assert len(first) == 6 and len(parsed) == 6
    assert source.read_parsed(source.sync()) == first
    assert len(parsed) == 6, "an unchanged tree must parse nothing"
    assert source.parse_hits == 6

    changed = remote.commit({"platforms/p3.yaml": PLATFORM.replace("name: p", "name: p3b")})
    again = source.read_parsed(source.sync())
    assert parsed[6:] == ["platforms/p3.yaml"], "only the changed file is parsed"
    assert ("platforms/p3.yaml", len(PLATFORM) + 2) in again
    assert source.parse_misses == 7
    assert source.sync() == changed


def test_read_parsed_without_parse_returns_path_and_bytes(remote: RemoteRepo, tmp_path: Path) -> None:
    source = source_for(remote.bare, tmp_path)
    assert source.read_parsed(source.sync()) == [("project-a/platform.yaml", PLATFORM.encode())]


def test_oversized_and_submodule_entries_are_skipped_with_a_note(remote: RemoteRepo, tmp_path: Path) -> None:
    big = b"x: " + b"a" * MAX_BLOB_BYTES + b"\n"
    remote.commit({"big.yaml": big}, push=False)
    git("update-index", "--add", "--cacheinfo", f"160000,{remote.head()},vendored", cwd=remote.work)
    git("commit", "--quiet", "-m", "submodule", cwd=remote.work)
    git("push", "--quiet", "origin", "HEAD:refs/heads/main", cwd=remote.work)
    source = source_for(remote.bare, tmp_path)
    files = source.read_tree(source.sync())
    assert [p for p, _ in files] == ["project-a/platform.yaml"]
    reasons = {s.path: s.reason for s in source.skipped}
    assert "the limit is" in reasons["big.yaml"]
    assert "submodule" in reasons["vendored"]


def test_deleted_remote_raises_source_error_not_an_empty_tree(remote: RemoteRepo, tmp_path: Path) -> None:
    source = source_for(remote.bare, tmp_path)
    source.sync()
    shutil.rmtree(remote.bare)
    with pytest.raises(SourceError, match="cannot reach"):
        source.sync()


@pytest.mark.parametrize(
    "url",
    [
        "git://127.0.0.1:1/nothing.git",
        "file:///nonexistent/repo.git",
        "ssh://git@127.0.0.1:1/repo.git",
        "/nonexistent/repo.git",
        "ext::sh -c touch% /tmp/pwned",
        "ftp://example.invalid/repo.git",
        "-oProxyCommand=touch /tmp/pwned",
    ],
)
def test_bad_urls_raise_source_error(url: str, tmp_path: Path) -> None:
    with pytest.raises(SourceError):
        GitSource(url, cache_dir=tmp_path / "cache").sync()


def test_missing_branch_raises_source_error(remote: RemoteRepo, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="branch 'release' not found"):
        GitSource(str(remote.bare), "release", cache_dir=tmp_path / "cache").sync()


def test_unknown_revision_raises_source_error(remote: RemoteRepo, tmp_path: Path) -> None:
    source = source_for(remote.bare, tmp_path)
    source.sync()
    with pytest.raises(SourceError, match="not found"):
        source.read_tree("0" * 40)


def test_error_messages_never_contain_credentials(tmp_path: Path) -> None:
    source = GitSource("https://deploy:s3cr3t-token@127.0.0.1:1/org/repo.git", cache_dir=tmp_path / "c")
    assert "s3cr3t" not in source.url
    with pytest.raises(SourceError) as info:
        source.sync()
    assert "s3cr3t" not in str(info.value)
    assert "deploy" not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_git_daemon_url_syncs_and_reads(remote: RemoteRepo, tmp_path: Path) -> None:
    with git_daemon(remote.bare.parent) as base:
        source = source_for(f"{base}/remote.git", tmp_path)
        sha = source.sync()
        assert sha == remote.head()
        assert source.read_tree(sha) == [("project-a/platform.yaml", PLATFORM.encode())]
        newer = remote.commit({"x.yaml": "x: 1\n"})
        assert source.sync() == newer
        assert source.fetch_count == 2


def test_read_revision_of_work_tree_bare_repo_and_url(remote: RemoteRepo, tmp_path: Path) -> None:
    first = remote.head()
    git("tag", "v1", cwd=remote.work)
    git("push", "--quiet", "origin", "v1", cwd=remote.work)
    second = remote.commit({"more.yaml": "m: 1\n"})

    sha, files = read_revision(str(remote.work))
    assert sha == second and [p for p, _ in files] == ["more.yaml", "project-a/platform.yaml"]
    assert read_revision(str(remote.bare), "v1")[0] == first
    assert read_revision(str(remote.bare), first[:10])[0] == first
    url_sha, url_files = read_revision(f"file://{remote.bare}", "v1")
    assert url_sha == first and [p for p, _ in url_files] == ["project-a/platform.yaml"]
    assert read_revision(f"file://{remote.bare}")[0] == second


def test_read_revision_reports_skipped_entries(remote: RemoteRepo) -> None:
    remote.commit({}, symlinks={"evil.yaml": "/etc/passwd"})
    notes: list[SkippedEntry] = []
    read_revision(str(remote.bare), skipped=notes)
    assert [n.path for n in notes] == ["evil.yaml"]


def test_read_revision_failures_raise_source_error(remote: RemoteRepo, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not found"):
        read_revision(str(remote.bare), "no-such-branch")
    with pytest.raises(SourceError, match="not a git repository"):
        read_revision(str(tmp_path))
    with pytest.raises(SourceError, match="does not exist"):
        read_revision(str(tmp_path / "missing"))
    with pytest.raises(SourceError, match="cannot clone"):
        read_revision("file:///nonexistent/repo.git")


def test_reading_by_branch_name_follows_the_fetched_head(remote: RemoteRepo, tmp_path: Path) -> None:
    source = source_for(remote.bare, tmp_path)
    source.sync()
    assert [p for p, _ in source.read_tree("main")] == ["project-a/platform.yaml"]
    remote.commit({"later.yaml": "l: 1\n"})
    source.sync()
    assert [p for p, _ in source.read_tree("main")] == ["later.yaml", "project-a/platform.yaml"]


def test_a_damaged_cache_is_refetched(remote: RemoteRepo, tmp_path: Path) -> None:
    source = source_for(remote.bare, tmp_path)
    sha = source.sync()
    source.close()
    objects = tmp_path / "cache" / "objects"
    shutil.rmtree(objects)
    objects.mkdir()
    again = source_for(remote.bare, tmp_path)
    assert again.sync() == sha
    assert again.fetch_count == 1
    assert [p for p, _ in again.read_tree(sha)] == ["project-a/platform.yaml"]


def test_http_url_with_credentials_syncs_without_leaking_them(remote: RemoteRepo, tmp_path: Path) -> None:
    with git_http_server(remote.bare.parent, "deploy:s3cr3t-token") as base:
        url = base.replace("http://", "http://deploy:s3cr3t-token@") + "/remote.git"
        source = source_for(url, tmp_path)
        assert "s3cr3t" not in source.url
        sha = source.sync()
        assert sha == remote.head()
        assert source.read_tree(sha) == [("project-a/platform.yaml", PLATFORM.encode())]
        assert read_revision(url)[0] == sha


def test_http_wrong_credentials_fail_at_once_without_a_prompt(remote: RemoteRepo, tmp_path: Path) -> None:
    with git_http_server(remote.bare.parent, "deploy:right-token") as base:
        url = base.replace("http://", "http://deploy:wrong-token@") + "/remote.git"
        with pytest.raises(SourceError) as info:
            source_for(url, tmp_path).sync()
        assert "wrong-token" not in str(info.value)
        assert "Authentication failed" in str(info.value) or "401" in str(info.value)
        with pytest.raises(SourceError):
            source_for(f"{base}/remote.git", tmp_path / "anonymous").sync()


def test_a_hung_remote_times_out_with_source_error(tmp_path: Path) -> None:
    with silent_server() as address:
        source = GitSource(f"http://{address}/repo.git", cache_dir=tmp_path / "cache", timeout=1.0)
        started = time.monotonic()
        with pytest.raises(SourceError):
            source.sync()
        # A hang bound only: git's own wait would be endless, the default network timeout 120 s.
        assert time.monotonic() - started < 60


def test_a_large_later_fetch_arriving_as_a_pack_is_readable(remote: RemoteRepo, tmp_path: Path) -> None:
    source = source_for(remote.bare, tmp_path)
    assert len(source.read_tree(source.sync())) == 1  # starts the persistent cat-file process
    remote.commit({f"many/p{i}.yaml": f"i: {i}\n" for i in range(300)})
    sha = source.sync()
    assert list((tmp_path / "cache" / "objects" / "pack").glob("*.pack")), "the fetch arrived as a pack"
    files = dict(source.read_tree(sha))
    assert len(files) == 301 and files["many/p299.yaml"] == b"i: 299\n"


def test_commit_summary_reads_subject_and_author_from_the_cache_only(
    remote: RemoteRepo, tmp_path: Path
) -> None:
    sha = remote.commit({"a.yaml": "x: 1\n"}, "Merge pull request #3 from team/a\n\nlong body\n")
    with source_for(remote.bare, tmp_path) as source:
        assert source.commit_summary(sha) is None, "not fetched yet: no network to answer it"
        source.sync()
        assert source.commit_summary(sha) == (
            "Merge pull request #3 from team/a",
            "Test Author <author@example.com>",
        )
        assert source.commit_summary("0" * 40) is None
        assert source.commit_summary("--all") is None
