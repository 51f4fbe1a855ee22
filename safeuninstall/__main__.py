"""The ``safe-uninstall`` command (and ``python -m safeuninstall``): start-up and exit.

Three things happen here and nowhere else (what each saves: docs/performance.md, "What is
deferred at start-up"):

- An interrupt during start-up is held until the command's core begins, then reported in one
  line (interrupts.py): holding it is this module's first act, before the tool is imported.
- Importing the tool creates objects that live as long as the process (modules, classes,
  click's commands): the collector's threshold is raised first, so that importing them runs no
  collection; a long operation still gets collected.
- After the last line is written nothing is left to do: the command leaves through
  ``os._exit`` once its output is flushed, skipping the interpreter's teardown. Every file the
  tool writes is closed by then, and its threads are daemons, which a normal exit stops as well.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

from safeuninstall.base import interrupts

# Before the tool is imported (these modules above are loaded by the time a script runs, and
# interrupts.py only needs signal): an interrupt in any later import is held.
interrupts.hold()
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
