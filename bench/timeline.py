"""One run of the real command line, with a timeline of its phases from inside.

    python bench/timeline.py OUT T0 [safe-uninstall arguments...]

Runs ``safeuninstall.cli.run`` in this process (as ``bench/timed_cli.py`` does) with a clock
around each function named in ``CLOCKED`` and writes to OUT a JSON list of spans
``[name, thread, start, end, cpu]``: seconds since T0 (a ``time.monotonic()`` taken by the
launching process just before it started this one; ``-``: this script's start; not an
environment variable, which the baseline cache's fingerprint would see change), and the
thread CPU seconds of the span. The tool's modules are imported before the command runs (so
that every reference to a clocked function can be replaced): the timeline shows where the
work goes, not the imports, which a plain run interleaves with it.

``time.monotonic`` is the system-wide clock, so a span in the probe's own process could be put
on the same axis; a clock costs about a microsecond.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import pkgutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

# "module:qualname" of each function clocked.
CLOCKED = [
    "cli.commands:_run",
    "state.locks:hold",
    "state.store:Store.locked",
    "state.store:OwnFiles.prepare",
    "state.journal:Journal.refuse_if_unfinished",
    "cli.commands:Common.settled",
    "transaction.retention:settle",
    "state.store:Store.holdings",
    "cli.commands:Common.context",
    "cli.commands:Common.probes",
    "environment.installed:census",
    "environment.installed:installed_distributions",
    "judgement.plan:plan_removal",
    "session.analysis:analyse",
    "session.analysis:with_default",
    "judgement.importables:importers",
    "judgement.importables:_module_files",
    "session.analysis:owned_files",
    "judgement.impact:impact_report",
    "environment.installed:requirement_index",
    "environment.installed:ensure_writable",
    "session.baseline:fingerprint",
    "session.baseline:begin",
    "session.baseline:head_start",
    "session.baseline:BaselineCache.put",
    "session.baseline:BaselineCache.get",
    "judgement.probe:run_probe",
    "judgement.probe:Running.results",
    "judgement.probe:run_all",
    "transaction.transaction:Transaction.snapshot_before",
    "transaction.transaction:take_snapshot",
    "transaction.transaction:plan_deletion",
    "state.stash:stash_distribution",
    "state.store:Store.save",
    "state.store:Store.new_folder",
    "state.store:Store.set_outcome",
    "state.journal:Journal.begin",
    "state.journal:Journal.step",
    "state.journal:Journal.finish",
    "state.stash:StashHasher._run",
    "state.stash:StashHasher.wait",
    "operations.removal:Removal._baseline_results",
    "operations.removal:Removal._refuse_changed_by_others",
    "operations.removal:Removal.judge_before",
    "transaction.transaction:Transaction.uninstall",
    "environment.backend:_Runner.uninstall",
    "operations.removal:Attempt._judge",
    "operations.removal:Attempt._probe",
    "transaction.transaction:Transaction.check_others",
    "operations.removal:Attempt._diagnose",
    "operations.removal:Attempt._restore",
    "operations.removal:Attempt._probe_after_restore",
    "session.analysis:Analysis.left_hollow",
    "session.analysis:Analysis.drift",
    "transaction.transaction:Transaction.restore",
    "transaction.transaction:stash_index",
    "transaction.restore:restore",
    "transaction.restore:verify",
    "state.stash:check_stash",
    "state.stash:restore_files",
    "transaction.transaction:Transaction.finish",
    "transaction.transaction:Transaction.__exit__",
]

SPANS: list[list[object]] = []
_T0 = time.monotonic()


def _clocked(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def clocked(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.monotonic(), time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            SPANS.append(
                [
                    name,
                    threading.current_thread().name,
                    round(started - _T0, 6),
                    round(time.monotonic() - _T0, 6),
                    round(time.thread_time() - cpu, 6),
                ]
            )

    return clocked


def _instrument() -> None:
    import safeuninstall

    modules = {}
    for info in pkgutil.walk_packages(safeuninstall.__path__, "safeuninstall."):
        if info.name.endswith("__main__"):
            continue
        modules[info.name] = importlib.import_module(info.name)
    for spec in CLOCKED:
        where, qualname = spec.split(":")
        module = modules["safeuninstall." + where]
        owner: Any = module
        *parents, attr = qualname.split(".")
        for part in parents:
            owner = getattr(owner, part)
        original = getattr(owner, attr, None)
        if original is None:
            print(f"timeline: no {spec}", file=sys.stderr)
            continue
        wrapped = _clocked(qualname, original)
        setattr(owner, attr, wrapped)
        if not parents:  # `from .x import f` elsewhere: those names too
            for other in modules.values():
                if getattr(other, attr, None) is original:
                    setattr(other, attr, wrapped)


def main(argv: list[str]) -> None:
    global _T0
    out = Path(argv[0])
    if argv[1] != "-":
        _T0 = float(argv[1])
    began = time.monotonic() - _T0
    _instrument()
    from safeuninstall.cli import commands as cli

    SPANS.append(["(imports)", "MainThread", round(began, 6), round(time.monotonic() - _T0, 6), 0])
    sys.argv = ["safe-uninstall", *argv[2:]]
    code = 1
    try:
        code = cli.run()
    finally:
        SPANS.append(["(exit)", "MainThread", round(time.monotonic() - _T0, 6), 0, 0])
        SPANS.append(["(process cpu)", "", 0, 0, round(time.process_time(), 6)])
        out.write_text(json.dumps(SPANS))
        sys.stdout.flush()
        os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
