"""What a one-shot command keeps alive until the process ends (``reconciler.cli.main``).

Freeing a large plan's objects one by one when its function returns costs up to a tenth of the run; a
process that exits straight after (``os._exit`` once the output is flushed) never needs them freed. So
a command hands its largest objects to :func:`keep_until_exit`, which holds them only when the command
line said the process ends with the command (:func:`one_shot`); a caller in the same process (tests,
the typer runner) keeps freeing them as usual.
"""

from __future__ import annotations

_kept: list[object] = []
_one_shot = False


def one_shot() -> None:
    """Called by the command line's entry point before a one-shot command runs."""
    global _one_shot
    _one_shot = True


def keep_until_exit(*objects: object) -> None:
    if _one_shot:
        _kept.extend(objects)
