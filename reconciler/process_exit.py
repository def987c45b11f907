"""What a one-shot command keeps alive, and what it leaves to do, until its process ends
(``reconciler.cli.main``).

Freeing a large plan's objects one by one when its function returns costs up to a tenth of the run; a
process that exits straight after (``os._exit`` once the output is flushed) never needs them freed. So
a command hands its largest objects to :func:`keep_until_exit`, which holds them only when the command
line said the process ends with the command (:func:`one_shot`); a caller in the same process (tests,
the typer runner) keeps freeing them as usual.

Work nobody waits for (writing the cache of checked documents, about a fifth of a cold plan) is handed
to :func:`after_output`: in a one-shot process it runs once the output is flushed, in a child forked by
:func:`run_after_output` (its standard streams on ``/dev/null``, so whoever reads the command's output
sees it end; niced), while the command exits; anywhere else it runs at once. Such work must be safe to
lose (a cache): a process that cannot fork runs it before exiting, one killed first just skips it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

_kept: list[object] = []
_later: list[Callable[[], None]] = []
_one_shot = False


def one_shot() -> None:
    """Called by the command line's entry point before a one-shot command runs."""
    global _one_shot
    _one_shot = True


@contextlib.contextmanager
def collector_paused(*, until_exit: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off inside, and on again after as it was. Work that makes many
    objects and few reference cycles (a plan, unpickling a pack) would only have its objects traversed
    again and again to free almost nothing early. ``until_exit``: a one-shot process leaves it off, since
    it exits once its output is flushed and a collection over the whole heap just before would free
    nothing the exit does not."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled and not (until_exit and _one_shot):
            gc.enable()


def without_collector(*, until_exit: bool = False) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A decorator: the function runs in :func:`collector_paused`."""

    def decorate(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with collector_paused(until_exit=until_exit):
                return fn(*args, **kwargs)

        return paused

    return decorate


def keep_until_exit(*objects: object) -> None:
    if _one_shot:
        _kept.extend(objects)


def after_output(work: Callable[[], None]) -> None:
    """``work()`` after the command's output, in a one-shot process; now, in any other."""
    if _one_shot:
        _later.append(work)
    else:
        work()


def run_after_output() -> None:
    """Called once the output is flushed, just before ``os._exit``: the work :func:`after_output` put off,
    in a forked child that the exiting process does not wait for."""
    if not _later:
        return
    work, _later[:] = list(_later), []
    try:
        pid = os.fork()
    except OSError:
        _run(work)
        return
    if pid == 0:  # the child: detached from the terminal and from the pipes of the command's output
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            with contextlib.suppress(OSError):
                os.nice(10)
            _run(work)
        finally:
            os._exit(0)


def _run(work: list[Callable[[], None]]) -> None:
    for item in work:
        with contextlib.suppress(Exception):
            item()
