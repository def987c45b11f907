"""``plan --format json``: indented at a terminal, one compact line through a pipe, the same value."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import tty

from reconciler.commands.plan import json_text
from tests._contract_support import SAMPLE_INVENTORY, SAMPLE_REPO, _clean_env, reconciler_bin, run_cli

ARGS = ("plan", "--repo", str(SAMPLE_REPO), "--inventory", str(SAMPLE_INVENTORY), "--format", "json")


def test_the_terminal_gets_the_indented_text_and_a_pipe_the_compact_one() -> None:
    document = {"revision": None, "platforms": [{"name": "a", "gpus": [1, 2]}], "pools": [], "x": {}}
    assert json_text(document, terminal=True) == json.dumps(document, indent=2) + "\n"
    compact = json_text(document, terminal=False)
    assert compact == '{"revision":null,"platforms":[{"name":"a","gpus":[1,2]}],"pools":[],"x":{}}\n'
    assert json.loads(compact) == document


def _on_a_terminal(*args: str) -> str:
    """The command's standard output when it is a terminal (a pseudo-terminal in raw mode: no newline
    translation), read until the command closes it."""
    leader, follower = pty.openpty()
    tty.setraw(follower)
    with subprocess.Popen(
        [reconciler_bin(), *args], stdout=follower, stderr=subprocess.DEVNULL, env=_clean_env(None)
    ) as child:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert child.wait() == 0
    return b"".join(chunks).decode()


def test_plan_json_is_compact_through_a_pipe_and_indented_at_a_terminal() -> None:
    piped = run_cli(*ARGS)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.count("\n") == 1 and piped.stdout.endswith("}\n")
    shown = _on_a_terminal(*ARGS)
    assert shown == json.dumps(json.loads(piped.stdout), indent=2) + "\n"
