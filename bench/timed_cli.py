"""Run the real command line with its restore step timed from inside.

    python bench/timed_cli.py OUT [safe-uninstall arguments...]

The restore inside a failing removal starts and ends in the middle of one process, so no
outside clock can isolate it. This runs ``safeuninstall.cli.run`` (the console script, less
its final ``os._exit``) in this process, with clocks around a few of the core's functions, and
writes to OUT a JSON object of seconds:

- ``restore_step``: the uninstall's restore (operations.removal.Attempt._restore), all a
  user waits for once the probe has failed: the wait for the stash hasher, the restore, the
  verification, the probe after the restore if it runs, the outcome and the journal;
- inside it: ``hasher_wait`` (StashHasher.wait), ``restore`` (restore.restore) and
  ``verify`` (restore.verify).

A clock costs well under a microsecond, so the command's own wall time stays what it is.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Run as a script, this folder is sys.path[0]: take it out, so that the tool imports exactly
# what it imports when run as ``safe-uninstall``.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]


def _clocked(key: str, func: Callable[..., Any], timings: dict[str, float]) -> Callable[..., Any]:
    @functools.wraps(func)
    def clocked(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            timings[key] = timings.get(key, 0.0) + time.perf_counter() - started

    return clocked


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    from safeuninstall.cli import commands as cli
    from safeuninstall.operations.uninstall import removal
    from safeuninstall.state import stash
    from safeuninstall.transaction import transaction

    timings: dict[str, float] = {}
    # (where the name is looked up when called, the name, the key in OUT)
    clocks: list[tuple[object, str, str]] = [
        (removal.Attempt, "_restore", "restore_step"),
        (transaction, "restore", "restore"),
        (transaction, "verify", "verify"),
        (stash.StashHasher, "wait", "hasher_wait"),
    ]
    for owner, name, key in clocks:
        setattr(owner, name, _clocked(key, getattr(owner, name), timings))
    sys.argv = ["safe-uninstall", *argv[1:]]
    try:
        code = cli.run()
    finally:
        out.write_text(json.dumps(timings))
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
