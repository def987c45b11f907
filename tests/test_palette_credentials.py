"""The API key comes from $PALETTE_API_KEY or the file $PALETTE_API_KEY_FILE names, never a flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.palette.credentials import MissingAPIKey, api_key_from_env, read_key_file


def test_key_from_the_environment_variable() -> None:
    assert api_key_from_env({"PALETTE_API_KEY": " s3cret-key \n"}) == "s3cret-key"


def test_key_from_a_file_when_the_variable_is_unset(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("file-held-key\n")
    assert api_key_from_env({"PALETTE_API_KEY_FILE": str(path)}) == "file-held-key"


def test_the_variable_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "key"
    path.write_text("from-file")
    env = {"PALETTE_API_KEY": "from-env", "PALETTE_API_KEY_FILE": str(path)}
    assert api_key_from_env(env) == "from-env"


def test_missing_key_says_where_it_looked() -> None:
    with pytest.raises(MissingAPIKey, match="PALETTE_API_KEY_FILE"):
        api_key_from_env({})


def test_unreadable_or_empty_key_file_is_an_error_without_content(tmp_path: Path) -> None:
    with pytest.raises(MissingAPIKey, match="cannot be read"):
        read_key_file(str(tmp_path / "absent"))
    empty = tmp_path / "empty"
    empty.write_text("  \n")
    with pytest.raises(MissingAPIKey, match="is empty"):
        read_key_file(str(empty))
