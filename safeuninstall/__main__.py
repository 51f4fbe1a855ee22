"""The ``safe-uninstall`` command (and ``python -m safeuninstall``): start-up and exit.

Three things happen here and nowhere else (what each saves: docs/performance.md, "What is
deferred at start-up"):

- An interrupt during start-up is held until the command's core begins, then reported in one
  line (interrupts.py): holding it is this module's first act, before anything is imported
  (``_signal`` is built into the interpreter and loaded with it), and interrupts.py takes over
  what was noted once it is imported.
- Importing the tool creates objects that live as long as the process (modules, classes,
  click's commands): the collector's threshold is raised first, so that importing them runs no
  collection; a long operation still gets collected.
- After the last line is written nothing is left to do: the command leaves through
  ``os._exit`` once its output is flushed, skipping the interpreter's teardown. Every file the
  tool writes is closed by then, and its threads are daemons, which a normal exit stops as well.
"""

from __future__ import annotations

import os  # these two are loaded by the time a script runs: nothing to import
import sys

if os.name != "posix":  # its signals, locks and library model are POSIX ones
    sys.exit("safe-uninstall: Windows is not supported; it runs on Linux (macOS untested)")

import _signal  # type: ignore[import-not-found]  # built in, and no stub: signal.py wraps it

_noted_early: list[int] = []  # until interrupts.hold takes over


def _note_early(signum: int, frame: object) -> None:
    _noted_early.append(signum)


for _signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
    if _signal.getsignal(_signum) != _signal.SIG_IGN:  # an ignored one stays ignored
        _signal.signal(_signum, _note_early)

import contextlib  # noqa: E402 - from here an interrupt is held
import gc  # noqa: E402

from safeuninstall.base import interrupts  # noqa: E402

interrupts.hold(_noted_early)
gc.set_threshold(100_000, 50, 50)

from safeuninstall.cli.commands import run  # noqa: E402 - after the two lines above


def main() -> None:
    code = run()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
