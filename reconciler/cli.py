"""The ``reconciler`` command's entry point (docs/planning.md): the command line is declared with typer
in :mod:`reconciler.cli_app`; this module starts it and ends a one-shot command.

A person waits for ``plan`` at a prompt, and typer costs about a tenth of a second of every start (its
import, and a pydantic validator built for each of ``plan``'s 16 options as they are parsed). So an
ordinary ``plan`` command line, every word of it an option of ``plan`` with a well-formed value, is read
here against :data:`PLAN_OPTIONS` and run without loading typer; anything else (``--help``, an unknown
option, a value typer would refuse or convert, another command) goes to typer as it is, which answers
it, errors included, as always. ``tests/test_cli_entry.py`` checks that :data:`PLAN_OPTIONS` declares
exactly the options, names and defaults of the typer command.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Commands that run once and end: nothing of theirs is left to do at exit once their output is written.
_ONE_SHOT = frozenset({"validate", "plan", "schemas", "inventory"})


@dataclass(frozen=True)
class Option:
    """One option of ``plan``: the parameter it fills, and what its value is."""

    param: str
    kind: str  # "str", "path", "flag", "count" (an integer >= 0), "paths" (repeatable path), "choice"
    default: Any = None
    choices: tuple[str, ...] = ()


PLAN_OPTIONS: dict[str, Option] = {
    "--repo": Option("repo", "str"),  # required
    "--rev": Option("rev", "str"),
    "--inventory": Option("inventory", "path"),
    "--palette": Option("palette", "str"),
    "--from-status": Option("from_status", "flag", False),
    "--status-branch": Option("status_branch", "str"),
    "--no-status": Option("no_status", "flag", False),
    "--no-fetch": Option("no_fetch", "flag", False),
    "--expect-status": Option("expect_status", "str"),
    "--branch": Option("branch", "str"),
    "--prometheus": Option("prometheus", "str"),
    "--max-deletions": Option("max_deletions", "count", 1),
    "--format": Option("format", "choice", "text", ("text", "json", "markdown")),
    "--changes-only": Option("changes_only", "flag", False),
    "--path": Option("subtree", "str"),
    "--what-if": Option("what_if", "paths"),
}
_COUNT = re.compile(r"(?:0|[1-9][0-9]{0,8})\Z")


def parse_plan(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of ``plan`` from the words after ``plan``; None when typer must read them (a word
    that is not one of :data:`PLAN_OPTIONS`, an option given twice, a value that is empty, starts with
    ``-`` or is not one typer takes as it is, ``--repo`` missing)."""
    values: dict[str, Any] = {o.param: o.default for o in PLAN_OPTIONS.values()}
    seen: set[str] = set()
    words = iter(args)
    for word in words:
        name, eq, inline = word.partition("=")
        option = PLAN_OPTIONS.get(name)
        if option is None or (name in seen and option.kind != "paths"):
            return None
        seen.add(name)
        if option.kind == "flag":
            if eq:
                return None
            values[option.param] = True
            continue
        value = inline if eq else next(words, None)
        if not value or value.startswith("-"):
            return None
        if option.kind == "count":
            if not _COUNT.match(value):
                return None
            values[option.param] = int(value)
        elif option.kind == "choice":
            if value not in option.choices:
                return None
            values[option.param] = value
        elif option.kind == "path":
            values[option.param] = Path(value)
        elif option.kind == "paths":
            values[option.param] = [*(values[option.param] or ()), Path(value)]
        else:
            values[option.param] = value
    return values if values["repo"] is not None else None


def _plan(values: dict[str, Any]) -> int:
    """``reconciler plan`` with the parameters :func:`parse_plan` read (as ``cli_app.plan`` calls it)."""
    from reconciler.commands import plan as cmd

    return cmd.run(
        values["repo"],
        values["rev"],
        values["inventory"],
        values["palette"],
        values["max_deletions"],
        values["format"],
        from_status=values["from_status"],
        status_branch=values["status_branch"],
        branch=values["branch"],
        changes_only=values["changes_only"],
        prometheus=values["prometheus"],
        subtree=values["subtree"],
        what_if=values["what_if"] or (),
        no_status=values["no_status"],
        fetch=not values["no_fetch"],
        expect_status=values["expect_status"],
    )


def main() -> None:
    """The ``reconciler`` command. A one-shot command ends without the interpreter freeing its heap (up to
    a tenth of a large plan's time, deallocating objects the process is about to drop anyway): once its
    output is flushed, the process exits at once with the command's exit code (:func:`_exit_now`), leaving
    what nobody waits for to a child (``reconciler.process_exit``)."""
    one_shot = len(sys.argv) > 1 and sys.argv[1] in _ONE_SHOT
    if one_shot:
        from reconciler.process_exit import one_shot as keep_for_exit

        keep_for_exit()
    plan = parse_plan(sys.argv[2:]) if len(sys.argv) > 1 and sys.argv[1] == "plan" else None
    if plan is not None:
        code = _run_plan(plan)
        _exit_now(code)
        raise SystemExit(code)
    from reconciler.cli_app import app

    try:
        app()
    except SystemExit as exc:
        if one_shot:
            _exit_now(exc.code)
        raise


def _run_plan(values: dict[str, Any]) -> int:
    """:func:`_plan` as typer's standalone mode runs a command: an interrupt exits 130, a closed
    standard output exits 1 without a traceback."""
    import errno

    try:
        code = _plan(values)
    except KeyboardInterrupt:
        code = 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = _Pacified(sys.stdout)
        sys.stderr = _Pacified(sys.stderr)
        code = 1
    return code


class _Pacified:
    """A stream whose flush ignores a closed pipe (click's ``PacifyFlushWrapper``)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as exc:
            import errno

            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.wrapped, attr)


def _exit_now(code: object) -> None:
    """``os._exit(code)`` after flushing standard output and error; returns (and the normal exit runs)
    when the code is not a number or the output cannot be flushed (a closed pipe reports as usual)."""
    if code is None:
        code = 0
    if not isinstance(code, int) or isinstance(code, bool):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    from reconciler.process_exit import run_after_output

    run_after_output()  # the work nobody waits for, in a child (reconciler.process_exit)
    os._exit(code)


if __name__ == "__main__":
    main()
