"""The ``safe-uninstall`` command (and ``python -m safeuninstall``): start-up and exit.

Two costs of a short-lived command are not the command's work, and this entry point avoids
both (measured on the 2-vCPU benchmark machine, docs/performance.md):

- Importing the tool creates objects that live as long as the process (modules, classes,
  click's commands). At the collector's default threshold (a collection every 700
  allocations) importing it ran 36 collections that freed 437 objects in all, 4-5 ms. With
  a threshold of 100,000 it runs none, and a long operation still gets collected.
- After the last line is written nothing is left to do, and the interpreter's teardown
  (freeing every module and object) took 6.5 ms. The command leaves through ``os._exit``
  once its output is flushed: every file the tool writes is closed by then, and its threads
  are daemons, which a normal exit stops as well.

An interrupt during start-up (importing the tool takes 0.1-0.2 s) is held until the command's
core begins, then reported in one line (interrupts.py); holding it is this module's first act.
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
