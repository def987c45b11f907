"""Work put off to the end of a one-shot command runs in a child after the output; elsewhere at once."""

from __future__ import annotations

import os

import pytest

from reconciler import process_exit


def test_outside_a_one_shot_command_the_work_runs_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_exit, "_one_shot", False)
    done: list[int] = []
    process_exit.after_output(lambda: done.append(1))
    assert done == [1]


def test_in_a_one_shot_command_a_child_runs_it_after_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_exit, "_one_shot", True)
    monkeypatch.setattr(process_exit, "_later", [])
    parent = os.getpid()
    read, write = os.pipe()

    def work() -> None:
        os.write(write, f"{os.getpid()} {os.getppid()} {os.isatty(1)}".encode())

    process_exit.after_output(work)
    assert process_exit._later  # not run yet
    process_exit.run_after_output()
    os.close(write)
    with os.fdopen(read, "rb") as answers:
        answer = answers.read().decode()  # end of file once the child has exited
    pid, _ppid, tty = answer.split()
    assert int(pid) != parent and tty == "False"
    assert not process_exit._later
    os.waitpid(int(pid), 0)
