"""The transaction journal: what a mutating operation intends, written before it does it.

One file per environment, ``<state>/journal.toml``. It exists exactly while an operation that can
change the environment is under way: created (and fsynced) before the first mutating step,
updated before each further step, removed once the outcome is verified. A journal found by the
next call (under the lock, so its writer is gone) means that writer died half way; ``recover``
brings the environment back to the snapshot the journal names.

``checkpoint`` is also where the fault-injection suite kills or signals the process: with
``SAFE_UNINSTALL_FAULT=<step>:<KILL|INT|TERM|ENOSPC|RAISE>`` the process sends itself that
signal, fails as on a full disk, or raises as a bug of ours would, when it reaches ``<step>``.
``file_fault`` is the same inside a per-file loop: ``SAFE_UNINSTALL_FAULT=stash-file:3:KILL``
fires after the third file stashed (``restore-file``: linked back) of one distribution.
The variable is for tests; nothing else reads it.
"""

from __future__ import annotations

import datetime
import errno
import os
import signal
from collections.abc import Callable
from pathlib import Path

import msgspec
import tomli_w
from msgspec import Struct

from . import tomlfile
from .atomicfile import write_atomically
from .errors import UnfinishedTransaction

JOURNAL_FILE = "journal.toml"
FAULT_VARIABLE = "SAFE_UNINSTALL_FAULT"
_SIGNALS = {"KILL": signal.SIGKILL, "INT": signal.SIGINT, "TERM": signal.SIGTERM}


class Entry(Struct, frozen=True):
    """The operation in progress, as recorded in the journal."""

    operation: str  # "uninstall" or "rollback"
    snapshot: str  # the snapshot that recover returns to
    step: str  # the step that was about to run, or the last one done
    pid: int
    started: str

    def describe(self) -> str:
        return (
            f"a {self.operation} (pid {self.pid}, started {self.started[:19]}) stopped at step "
            f"{self.step!r}; its snapshot is {self.snapshot}"
        )


class Journal:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / JOURNAL_FILE

    def read(self) -> Entry | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = tomlfile.loads(raw.decode("utf-8"))
            return Entry(
                operation=str(data["operation"]),
                snapshot=str(data["snapshot"]),
                step=str(data["step"]),
                pid=int(data["pid"]),
                started=str(data["started"]),
            )
        except (UnicodeDecodeError, KeyError, TypeError, ValueError):
            # A journal is written atomically, so this is damage from outside: still a
            # transaction whose state is unknown, which recover must look at.
            return Entry("unknown", "", "unreadable journal", 0, "")

    def refuse_if_unfinished(self) -> None:
        entry = self.read()
        if entry is not None:
            raise UnfinishedTransaction(
                f"an earlier operation on this environment did not finish: {entry.describe()}. "
                "Run `safe-uninstall recover` first."
            )

    def begin(self, operation: str, snapshot: str, step: str) -> Entry:
        entry = Entry(
            operation=operation,
            snapshot=snapshot,
            step=step,
            pid=os.getpid(),
            started=datetime.datetime.now(datetime.timezone.utc).isoformat(),
        )
        self._write(entry)
        checkpoint(step)
        return entry

    def step(
        self, entry: Entry, step: str, *, durable: bool = True, must_write: bool = True
    ) -> Entry:
        """Record that ``step`` is about to run, then pass the fault-injection point.

        ``durable=False`` for a step that changes nothing (the probe): the note may be lost
        in a power cut, the previous durable step still tells ``recover`` what to do.
        ``must_write=False`` inside a restore: a full disk must not stop the restore itself;
        the journal then still names an earlier step, which ``recover`` handles the same way.
        """
        updated = Entry(entry.operation, entry.snapshot, step, entry.pid, entry.started)
        try:
            self._write(updated, durable=durable)
        except OSError:
            if must_write:
                raise
        checkpoint(step)
        return updated

    def finish(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return

    def _write(self, entry: Entry, *, durable: bool = True) -> None:
        write_atomically(
            self.path, tomli_w.dumps(msgspec.structs.asdict(entry)).encode("utf-8"), durable=durable
        )


def checkpoint(step: str) -> None:
    """A step boundary; the fault-injection suite can make the process die or be signalled here."""
    fault = os.environ.get(FAULT_VARIABLE)
    if not fault:
        return
    wanted, _, kind = fault.rpartition(":")
    if wanted == step:
        _fire(kind, step)


def file_fault(loop: str) -> Callable[[], None] | None:
    """The fault point of a per-file loop (``stash-file``, ``restore-file``), or None.

    With ``SAFE_UNINSTALL_FAULT=<loop>:<N>:<KIND>``: a function for the loop to call after
    each file, which fires after the N-th. The variable is read here, once per loop; when it
    names no such point the loop's only cost is a test for None per file.
    """
    fault = os.environ.get(FAULT_VARIABLE)
    if not fault:
        return None
    wanted, _, kind = fault.rpartition(":")
    name, _, count = wanted.rpartition(":")
    if name != loop or not (count.isascii() and count.isdigit()) or int(count) < 1:
        return None
    remaining = int(count)

    def after_file() -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0:
            _fire(kind, wanted)

    return after_file


def _fire(kind: str, where: str) -> None:
    if kind in _SIGNALS:
        os.kill(os.getpid(), _SIGNALS[kind])
    elif kind == "ENOSPC":  # the disk fills up here
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "(fault injected)")
    elif kind == "RAISE":  # a bug of ours here
        raise RuntimeError(f"fault injected at {where}")
