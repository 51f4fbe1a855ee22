"""The ``safe-uninstall`` command (and ``python -m safeuninstall``): start-up and exit.

Two costs of a short-lived command are not the command's work, and this entry point avoids
both (measured on the 2-vCPU benchmark machine, docs/performance.md):

- Importing the tool creates only objects that live as long as the process (modules, classes,
  click's commands). The collections that this triggers find nothing to free and took 3.5 ms,
  so the collector is paused while ``cli`` is imported; what exists then is frozen out of later
  collections.
- After the last line is written nothing is left to do, and the interpreter's teardown
  (freeing every module and object) took 6.5 ms. The command leaves through ``os._exit``
  once its output is flushed: every file the tool writes is closed by then, and its threads
  are daemons, which a normal exit stops as well.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys


def main() -> None:
    collecting = gc.isenabled()
    gc.disable()
    from safeuninstall.cli import run

    gc.freeze()
    if collecting:
        gc.enable()
    code = run()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
